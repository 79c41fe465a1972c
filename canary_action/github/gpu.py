"""Whether a job that trains must see a GPU, and the failed step that says so when it does not.

A canary that silently trains on the CPU on a GPU runner (a container started without the GPU, a driver the
torch build cannot use) judges nothing a GPU run does, and a neutral verdict there passes a required check. So
the action decides before training whether this job must train on a GPU, from the `gpu` input and the config's
`device`, and where it must and none is visible, fails with the fix.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from canary_action.config.schema import CommonConfig
from canary_action.errors import GPU_RUNTIME_FIX, ConfigError

#: The NVIDIA kernel driver's own file: present wherever the driver is loaded, a container's /proc included.
NVIDIA_DRIVER: Final = Path("/proc/driver/nvidia/version")


def gpu_expected(setting: str, config: CommonConfig) -> str | None:
    """Why this job must train on a GPU (a sentence), or None when it need not."""
    if config.device == "cpu":
        return None  # the config asks for the CPU: that is its decision, judged as such
    if config.device == "cuda":
        return "the config says device: cuda"
    if setting == "required":
        return "the action's input gpu is `required`"
    if setting == "auto" and NVIDIA_DRIVER.exists():
        return f"this machine has the NVIDIA driver loaded ({NVIDIA_DRIVER}) and the config says device: auto"
    return None


def require_gpu(setting: str, config: CommonConfig) -> None:
    """Raise ConfigError (exit 2, a failed check) when this job must train on a GPU and sees none."""
    why = gpu_expected(setting, config)
    if why is None or torch_sees_cuda():
        return
    raise ConfigError(
        f"{why}, but this job sees no CUDA GPU (torch.cuda.is_available() is false): a CPU run here would judge "
        "nothing a GPU run does",
        fix=f"{GPU_RUNTIME_FIX}; for a canary meant for the CPU, set device: cpu in the config or the input gpu: none",
    )


def torch_sees_cuda() -> bool:
    """torch's answer in this process (the trainer's child sees what it sees: the same container and devices)."""
    import torch

    return bool(torch.cuda.is_available())
