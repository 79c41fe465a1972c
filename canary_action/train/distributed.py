"""What a multi-process canary needs beyond a single process: the checks before launching, the backend,
and the Trainer arguments of each strategy (DDP, FSDP, DeepSpeed).

The strategy reaches the Trainer through its own TrainingArguments (ddp_*, fsdp/fsdp_config, deepspeed), not
through launcher flags: the Trainer builds its accelerate plugins from them, so the same arguments work
under any launcher and a user's own Trainer (`training_type: custom`) receives them in `trainer_kwargs()`.
"""

from __future__ import annotations

import importlib.util
import os
from typing import Any

import torch
import transformers

from canary_action.config.blocks import DistributedConfig
from canary_action.config.schema import CommonConfig
from canary_action.errors import GPU_RUNTIME_FIX, ConfigError

_CPU_FIX = "use strategy ddp for a CPU canary (gloo), or run this config on a GPU runner"


def settings(config: CommonConfig) -> DistributedConfig:
    """The config's distributed block, or the defaults (ddp) when it has none."""
    return config.distributed or DistributedConfig()


def backend(config: CommonConfig, on_cuda: bool) -> str:
    return settings(config).backend or ("nccl" if on_cuda else "gloo")


def check_launch(config: CommonConfig) -> tuple[bool, list[str]]:
    """Refuse, before any process starts, what cannot run here; (on CUDA, measurement warnings).

    Never initialises CUDA: the launching process must not hold a context on a GPU that rank 0 measures.
    """
    available = torch.cuda.is_available()
    if config.device == "cuda" and not available:
        raise ConfigError("the config asks for device: cuda but this process sees no CUDA GPU", fix=GPU_RUNTIME_FIX)
    on_cuda = available and config.device != "cpu"
    dist = settings(config)
    if dist.strategy != "ddp" and not on_cuda:
        raise ConfigError(f"distributed.strategy {dist.strategy} needs GPUs and this run is on the CPU", fix=_CPU_FIX)
    if dist.backend == "nccl" and not on_cuda:
        raise ConfigError(
            "distributed.backend nccl needs GPUs and this run is on the CPU",
            fix="set distributed.backend: gloo, or leave it unset (gloo on the CPU, nccl on GPUs)",
        )
    if dist.strategy == "deepspeed" and importlib.util.find_spec("deepspeed") is None:
        raise ConfigError(
            "distributed.strategy deepspeed but the deepspeed package is not installed",
            fix="pip install deepspeed on the runner (the canary image does not ship it), or use strategy fsdp",
        )
    warnings: list[str] = []
    if on_cuda and torch.cuda.device_count() < config.num_processes:
        raise ConfigError(
            f"num_processes {config.num_processes} but this process sees {torch.cuda.device_count()} GPU(s): "
            "one process per GPU",
            fix="lower num_processes, or give the runner more GPUs (check CUDA_VISIBLE_DEVICES)",
        )
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    if not on_cuda and config.num_processes > cores:
        warnings.append(
            f"{config.num_processes} processes on {cores} CPU cores: ranks share cores, so step and "
            "communication times include the contention"
        )
    return on_cuda, warnings


def trainer_kwargs(config: CommonConfig, on_cuda: bool) -> dict[str, Any]:
    """TrainingArguments of the configured strategy, for a run of num_processes > 1."""
    dist = settings(config)
    kwargs: dict[str, Any] = {"ddp_backend": backend(config, on_cuda)}
    if dist.strategy == "ddp":
        kwargs.update(ddp_find_unused_parameters=dist.find_unused_parameters, ddp_bucket_cap_mb=dist.bucket_cap_mb)
    elif dist.strategy == "fsdp":
        kwargs.update(_fsdp(dist))
    else:
        kwargs["deepspeed"] = _deepspeed(dist)
    return kwargs


def _fsdp(dist: DistributedConfig) -> dict[str, Any]:
    sharding = dist.fsdp_sharding_strategy
    if int(transformers.__version__.split(".")[0]) < 5:
        wrap = "" if dist.fsdp_auto_wrap_policy == "NO_WRAP" else " auto_wrap"
        return {"fsdp": sharding.lower() + wrap, "fsdp_config": {"auto_wrap_policy": dist.fsdp_auto_wrap_policy}}
    # transformers 5 configures FSDP through fsdp_config alone. FSDP2 (its default) expresses FULL_SHARD and
    # SHARD_GRAD_OP as reshard_after_forward; NO_SHARD and HYBRID_SHARD exist in FSDP1 only.
    fsdp2 = sharding in ("FULL_SHARD", "SHARD_GRAD_OP")
    return {
        "fsdp": True,
        "fsdp_config": {
            "version": 2 if fsdp2 else 1,
            "reshard_after_forward": sharding == "FULL_SHARD" if fsdp2 else sharding.lower(),
            "auto_wrap_policy": dist.fsdp_auto_wrap_policy,
        },
    }


def _deepspeed(dist: DistributedConfig) -> dict[str, Any]:
    """A DeepSpeed config whose "auto" values the Trainer fills from its own arguments (batch, LR, precision)."""
    zero: dict[str, Any] = {"stage": dist.zero_stage}
    config: dict[str, Any] = {
        "train_micro_batch_size_per_gpu": "auto",
        "gradient_accumulation_steps": "auto",
        "gradient_clipping": "auto",
        "bf16": {"enabled": "auto"},
        "fp16": {"enabled": "auto"},
        "zero_optimization": zero,
    }
    if dist.offload_optimizer:
        zero["offload_optimizer"] = {"device": "cpu", "pin_memory": True}
        # Offloaded states need DeepSpeed's own CPU Adam; "auto" takes the Trainer's learning rate and betas.
        config["optimizer"] = {
            "type": "AdamW",
            "params": {"lr": "auto", "betas": "auto", "eps": "auto", "weight_decay": "auto"},
        }
    return config
