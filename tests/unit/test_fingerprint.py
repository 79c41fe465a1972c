"""The environment fingerprint and git revision, and the torch-free import of the light modules."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import types
from importlib import metadata
from pathlib import Path

import pytest

import canary_action
from canary_action import fingerprint
from canary_action.fingerprint import PACKAGES, collect_environment, fingerprint_hash, git_revision

GIT_IDENTITY = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
                "GIT_COMMITTER_EMAIL": "t@example.com"}  # fmt: skip


def test_light_modules_do_not_import_torch() -> None:
    code = (
        "import canary_action.metrics.summarize, canary_action.metrics.io, canary_action.fingerprint; import sys; "
        "heavy = sorted({'torch', 'transformers', 'trl', 'numpy'} & set(sys.modules)); assert not heavy, heavy"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_environment_of_this_process() -> None:
    env = collect_environment()
    assert env.python == platform.python_version()
    assert env.platform == platform.platform()
    assert env.canary == canary_action.__version__
    assert env.cpu_count == len(os.sched_getaffinity(0))
    for name in PACKAGES:
        try:
            installed: str | None = metadata.version(name)
        except metadata.PackageNotFoundError:
            installed = None
        assert getattr(env, name) == installed, name
    assert env.gpu_count == len(env.gpus)
    assert env.fingerprint_hash == fingerprint_hash(env)
    assert len(env.fingerprint_hash) == 64


def test_no_gpu_facts_without_cuda() -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a CUDA machine")
    env = collect_environment()
    assert (env.gpus, env.gpu_count, env.nccl, env.gpu_driver) == ([], 0, None, None)


def test_the_hash_follows_every_field(monkeypatch: pytest.MonkeyPatch) -> None:
    image_vars = (fingerprint.IMAGE_VAR, fingerprint.IMAGE_REVISION_VAR, fingerprint.IMAGE_DIGEST_VAR)
    for name in image_vars:
        monkeypatch.delenv(name, raising=False)
    plain = collect_environment()
    assert (plain.container_image, plain.container_image_revision, plain.container_image_digest) == (None,) * 3
    monkeypatch.setenv(fingerprint.IMAGE_VAR, "ghcr.io/rlhf-canary/rlhf-canary:0.1.0")
    tagged = collect_environment()
    assert tagged.container_image == "ghcr.io/rlhf-canary/rlhf-canary:0.1.0"
    assert tagged.fingerprint_hash != plain.fingerprint_hash
    monkeypatch.setenv(fingerprint.IMAGE_REVISION_VAR, "f" * 40)
    built = collect_environment()
    assert built.container_image_revision == "f" * 40
    assert built.fingerprint_hash != tagged.fingerprint_hash
    monkeypatch.setenv(fingerprint.IMAGE_DIGEST_VAR, "sha256:" + "ab" * 32)
    pinned = collect_environment()
    assert pinned.container_image_digest == "sha256:" + "ab" * 32
    assert pinned.fingerprint_hash != built.fingerprint_hash
    assert collect_environment().fingerprint_hash == pinned.fingerprint_hash  # deterministic
    assert fingerprint_hash(pinned.model_copy(update={"cuda": "12.8"})) != pinned.fingerprint_hash


def test_without_torch_installed_or_importable() -> None:
    code = (
        "import sys; sys.modules['torch'] = None\n"  # `import torch` now raises ImportError
        "from canary_action.fingerprint import collect_environment\n"
        "env = collect_environment()\n"
        "assert (env.cuda, env.cudnn, env.gpus) == (None, None, []), env\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_cudnn_version_decoding() -> None:
    assert fingerprint._cudnn_version(8902) == "8.9.2"
    assert fingerprint._cudnn_version(90100) == "9.1.0"
    assert fingerprint._cudnn_version(91002) == "9.10.2"
    assert fingerprint._cudnn_version(None) is None


def test_driver_version_from_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    fake = types.ModuleType("pynvml")

    class NVMLError(Exception):
        pass

    fake.NVMLError = NVMLError  # type: ignore[attr-defined]
    fake.nvmlInit = lambda: calls.append("init")  # type: ignore[attr-defined]
    fake.nvmlShutdown = lambda: calls.append("shutdown")  # type: ignore[attr-defined]
    fake.nvmlSystemGetDriverVersion = lambda: b"570.133.20"  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    assert fingerprint._nvml_driver_version() == "570.133.20"
    assert calls == ["init", "shutdown"]

    def no_library() -> None:
        raise NVMLError("NVML Shared Library Not Found")

    fake.nvmlInit = no_library  # type: ignore[attr-defined]
    assert fingerprint._nvml_driver_version() is None
    monkeypatch.setitem(sys.modules, "pynvml", None)  # not installed
    assert fingerprint._nvml_driver_version() is None


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, **GIT_IDENTITY}
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True, env=env).stdout


def test_git_revision_of_a_repository(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q")
    (tmp_path / "train.py").write_text("print('hi')\n")
    git(tmp_path, "add", "train.py")
    git(tmp_path, "commit", "-q", "-m", "first")
    head = git(tmp_path, "rev-parse", "HEAD").strip()
    assert git_revision(tmp_path) == (head, False)
    (tmp_path / "metrics.json").write_text("{}")
    assert git_revision(tmp_path) == (head, False)  # untracked outputs do not change the code that ran
    (tmp_path / "train.py").write_text("print('changed')\n")
    assert git_revision(tmp_path) == (head, True)
    (tmp_path / "sub").mkdir()
    assert git_revision(tmp_path / "sub") == (head, True)


def test_git_revision_without_a_repository_or_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))  # do not find an enclosing repo
    assert git_revision(tmp_path) == (None, None)
    assert git_revision(tmp_path / "missing") == (None, None)
    git(tmp_path, "init", "-q")
    assert git_revision(tmp_path) == (None, None)  # a repository without a commit has no HEAD
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert git_revision(Path.cwd()) == (None, None)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give the repository to another user")
def test_git_revision_of_a_repository_owned_by_another_user(tmp_path: Path) -> None:
    """The Docker action's case: the workspace belongs to the runner's user, the container runs as root."""
    git(tmp_path, "init", "-q")
    git(tmp_path, "commit", "-q", "--allow-empty", "-m", "first")
    for path in [tmp_path, *tmp_path.rglob("*")]:
        os.chown(path, 65534, 65534)
    sha, dirty = git_revision(tmp_path)
    assert sha is not None
    assert dirty is False
