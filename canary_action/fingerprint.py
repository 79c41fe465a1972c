"""The environment fingerprint: which software on which hardware produced a measurement.

Two runs are only comparable when their environments are; the hash makes "same environment" one equality.
Nothing heavy is imported at module level: package versions come from installed metadata, and torch is
imported inside `collect_environment`, only when it is installed, so the light paths can import this module.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any, Final

import canary_action
from canary_action.metrics.schema import EnvFingerprint, GPUInfo
from canary_action.safe_git import git_command

# Distribution names, as pip knows them; each is also the EnvFingerprint field that records its version.
PACKAGES: Final = (
    "torch",
    "transformers",
    "trl",
    "peft",
    "accelerate",
    "datasets",
    "tokenizers",
    "bitsandbytes",
)
# The runner image's Dockerfile sets the first two; an image cannot know its own digest (that is only known after
# the push), so a workflow that pins the image by digest can pass it in the third.
IMAGE_VAR: Final = "CANARY_IMAGE"
IMAGE_REVISION_VAR: Final = "CANARY_IMAGE_REVISION"
IMAGE_DIGEST_VAR: Final = "CANARY_IMAGE_DIGEST"
_GIT_TIMEOUT_S: Final = 5.0  # a healthy `git status` takes milliseconds; a hung network filesystem must not hang us


def collect_environment(*, torch_threads: int | None = None) -> EnvFingerprint:
    """Describe this process's environment. GPUs: the devices visible to it (CUDA_VISIBLE_DEVICES applies).

    `torch_threads`: the intra-op threads the training processes used, when they are not this process (the
    launching parent of a multi-process run); default: this process's own torch.get_num_threads().
    """
    fields: dict[str, Any] = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu_model": _cpu_model(),
        "cpu_count": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "canary": canary_action.__version__,
        **{name: _installed_version(name) for name in PACKAGES},
        "container_image": os.environ.get(IMAGE_VAR) or None,
        "container_image_revision": os.environ.get(IMAGE_REVISION_VAR) or None,
        "container_image_digest": os.environ.get(IMAGE_DIGEST_VAR) or None,
    }
    if fields["torch"] is not None:
        fields.update(_torch_facts())
    if torch_threads is not None:
        fields["torch_threads"] = torch_threads
    setup = os.environ.get("CANARY_SETUP_PREFIX")  # train/launch/environment.py: a setup command's environment
    if setup:
        fields["setup_packages"] = setup_packages(Path(setup))
    env = EnvFingerprint.model_validate({**fields, "fingerprint_hash": ""})
    return env.model_copy(update={"fingerprint_hash": fingerprint_hash(env)})


def setup_packages(prefix: Path) -> dict[str, str]:
    """name -> version of every distribution installed into a setup environment (not the image's)."""
    import importlib.metadata
    import sysconfig

    purelib = sysconfig.get_paths(vars={"base": str(prefix), "platbase": str(prefix)})["purelib"]
    found = {d.metadata["Name"]: d.version for d in importlib.metadata.distributions(path=[purelib])}
    return dict(sorted(found.items(), key=lambda item: item[0].lower()))


def fingerprint_hash(env: EnvFingerprint) -> str:
    """sha256 of the canonical JSON (sorted keys, no spaces) of every field but the hash itself (and
    setup_packages when empty, so that fingerprints recorded before it existed keep their hash)."""
    exclude = {"fingerprint_hash"} | (set() if env.setup_packages else {"setup_packages"})
    fields = env.model_dump(mode="json", exclude=exclude)
    canonical = json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(canonical.encode("ascii")).hexdigest()


def git_revision(cwd: Path) -> tuple[str | None, bool | None]:
    """(HEAD sha, dirty) of the repository at `cwd`; None where git is missing, slow, or it is no repository.

    Dirty means modified tracked files: untracked files (the canary's own outputs in the workspace) do not
    change the code that ran.
    """
    head = _git(cwd, "rev-parse", "HEAD")
    if head is None:
        return None, None
    status = _git(cwd, "status", "--porcelain", "--untracked-files=no")
    return head.strip(), None if status is None else bool(status.strip())


def _git(cwd: Path, *args: str) -> str | None:
    # In the Docker action the workspace is owned by the runner's user while the container runs as root, and git
    # refuses such a repository ("dubious ownership"): trusted, but nothing its config names runs (`git status`
    # would run its filters and fsmonitor: safe_git.py).
    try:
        command = git_command(cwd, *args)
        done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=_GIT_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired):  # no git on PATH, cwd gone, or hung
        return None
    return done.stdout if done.returncode == 0 else None


def _installed_version(distribution: str) -> str | None:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def _cpu_model() -> str | None:
    try:
        with Path("/proc/cpuinfo").open(encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "model name" and value.strip():
                    return value.strip()
    except OSError:  # not Linux
        pass
    return platform.processor() or None  # aarch64 Linux has no "model name"; "" means unknown


def _torch_facts() -> dict[str, Any]:
    """CUDA stack and visible GPUs, as torch sees them. Called only when torch is installed."""
    try:
        import torch
    except ImportError:  # installed but broken: its version is recorded, the training step will say why
        return {}
    cudnn: Any = torch.backends.cudnn  # its functions carry no annotations
    facts: dict[str, Any] = {"cuda": torch.version.cuda, "torch_threads": torch.get_num_threads()}
    if cudnn.is_available():
        facts["cudnn"] = _cudnn_version(cudnn.version())
    if not torch.cuda.is_available():
        return facts
    gpus = []
    for index in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(index)
        uuid = getattr(props, "uuid", None)  # torch >= 2.2
        gpus.append(
            GPUInfo(
                index=index,
                name=props.name,
                memory_total_mib=props.total_memory / 2**20,
                uuid=_gpu_uuid(uuid),
            )
        )
    facts.update(gpus=gpus, gpu_count=len(gpus), nccl=_nccl_version(), gpu_driver=_nvml_driver_version())
    return facts


def _cudnn_version(code: int | None) -> str | None:
    """cuDNN encodes its version as major*1000 + minor*100 + patch before 9, major*10000 + ... from 9 on."""
    if code is None:
        return None
    major, rest = divmod(code, 10000 if code >= 10000 else 1000)
    return f"{major}.{rest // 100}.{rest % 100}"


def _gpu_uuid(uuid: object) -> str | None:
    if uuid is None:
        return None
    text = str(uuid)
    return text if text.startswith(("GPU-", "MIG-")) else f"GPU-{text}"  # nvidia-smi's spelling


def _nccl_version() -> str | None:
    import torch

    if not torch.distributed.is_available() or not torch.distributed.is_nccl_available():
        return None
    nccl: Any = torch.cuda.nccl  # no annotations; returns a tuple (major, minor, patch) in torch >= 1.13
    version = nccl.version()
    return ".".join(map(str, version)) if isinstance(version, tuple) else str(version)


def _nvml_driver_version() -> str | None:
    """The driver version, from NVML (nvidia-ml-py, in the [train] extra); None where it cannot be asked."""
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:  # libnvidia-ml.so not mounted into this container
        return None
    try:
        version = pynvml.nvmlSystemGetDriverVersion()
    finally:
        pynvml.nvmlShutdown()
    return version.decode() if isinstance(version, bytes) else str(version)
