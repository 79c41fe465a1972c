"""Where and in what precision a canary runs: resolved once, before anything is loaded.

Refuses what cannot work on this machine with a ConfigError (exit 2) that says how to fix it, instead of a
crash later: a CUDA config without a visible GPU, 4/8-bit quantization without CUDA, fp16 on a CPU.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass, field
from typing import Final, Literal

import torch

from canary_action.config.schema import CommonConfig
from canary_action.errors import GPU_RUNTIME_FIX, ConfigError

#: torch's own choice (one thread per core), read before any run sets it: `cpu_threads: auto` means this.
TORCH_DEFAULT_THREADS: Final = torch.get_num_threads()


@dataclass(frozen=True)
class Placement:
    device: torch.device
    dtype: Literal["fp32", "bf16", "fp16"]
    notices: list[str] = field(default_factory=list)

    @property
    def on_cuda(self) -> bool:
        return self.device.type == "cuda"

    @property
    def torch_dtype(self) -> torch.dtype:
        return {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[self.dtype]


def resolve_placement(config: CommonConfig) -> Placement:
    has_cuda = torch.cuda.is_available()
    if config.device == "cuda" and not has_cuda:
        raise ConfigError("the config asks for device: cuda but this process sees no CUDA GPU", fix=GPU_RUNTIME_FIX)
    on_cuda = has_cuda and config.device != "cpu"
    if (config.load_in_4bit or config.load_in_8bit) and not on_cuda:
        bits = 4 if config.load_in_4bit else 8
        raise ConfigError(
            f"load_in_{bits}bit needs a CUDA GPU (bitsandbytes quantization) and this run is on the CPU",
            fix=f"set load_in_{bits}bit: false for CPU runs, or run this config on a GPU runner",
        )
    if config.fault_injection is not None and config.fault_injection.gpu_matmuls_per_step and not on_cuda:
        raise ConfigError(
            "fault_injection.gpu_matmuls_per_step plants work only a GPU does, and this run is on the CPU",
            fix="plant a CPU slowdown with fault_injection.extra_matmuls_per_step, or run this config on a GPU runner",
        )
    if (config.load_in_4bit or config.load_in_8bit) and importlib.util.find_spec("bitsandbytes") is None:
        raise ConfigError(
            "quantization is on but bitsandbytes is not installed",
            fix="pip install bitsandbytes (the runner image ships it), or turn load_in_4bit/load_in_8bit off",
        )
    notices: list[str] = []
    dtype = _resolve_dtype(config.dtype, on_cuda, notices)
    return Placement(
        torch.device("cuda", torch.cuda.current_device()) if on_cuda else torch.device("cpu"), dtype, notices
    )


def _resolve_dtype(
    requested: Literal["auto", "fp32", "bf16", "fp16"], on_cuda: bool, notices: list[str]
) -> Literal["fp32", "bf16", "fp16"]:
    if requested == "fp16" and not on_cuda:
        raise ConfigError(
            "dtype: fp16 on a CPU is refused: CPU fp16 autocast is slow and numerically unlike a GPU run",
            fix="use dtype: auto (fp32 on CPU) or fp32, or run on a GPU runner",
        )
    if requested == "bf16" and on_cuda and not torch.cuda.is_bf16_supported():
        raise ConfigError("dtype: bf16 but this GPU has no bf16 support", fix="use dtype: auto or fp16")
    if requested != "auto":
        if requested == "bf16" and not on_cuda:
            notices.append("dtype bf16 on CPU: runs with CPU autocast; its figures are not comparable with GPU runs")
        return requested
    if not on_cuda:
        return "fp32"
    resolved: Literal["bf16", "fp16"] = "bf16" if torch.cuda.is_bf16_supported() else "fp16"
    notices.append(f"dtype auto resolved to {resolved} (mixed precision, fp32 master weights)")
    return resolved


def cpu_threads(config: CommonConfig, *, on_cuda: bool) -> int:
    """torch's intra-op threads for each training process: on the CPU the config's number; for `auto`, and on
    a GPU, torch's default with one process and the cores shared out among several (ranks must not fight)."""
    if config.cpu_threads != "auto" and not on_cuda:
        return config.cpu_threads
    if config.num_processes == 1:
        return TORCH_DEFAULT_THREADS
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, cores // config.num_processes)


def apply_cpu_threads(config: CommonConfig, placement: Placement) -> None:
    """Set the thread count of a CPU run. On a shared 2-core machine torch's default (one thread per core)
    ran the tiny canaries 10x slower and far noisier than one thread: docs/benchmarks.md#cpu-threads."""
    if not placement.on_cuda:
        torch.set_num_threads(cpu_threads(config, on_cuda=False))
