"""rlhf-canary 0.1's metrics.json, read as a baseline (never as the current run).

0.1 kept summaries only: no per-step series, no workload fingerprints. What each of its fields meant follows
from how 0.1 measured it (the documented format, read against 0.1's released source), and that decides
what it becomes in RunData; where a 0.1 figure is a different quantity from ours, the field stays None and
the check that would read it skips. docs/baselines.md has the mapping table and the list of checks.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Final, Literal, TypeGuard

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from canary_action.compare.runs import RunData
from canary_action.errors import BaselineError
from canary_action.metrics.io import OLD_FORMAT_KEYS, clip_text, validation_summary
from canary_action.metrics.schema import EnvFingerprint, GPUInfo, ProfiledOp, ProfilerSummary, Status

LEGACY_VERSION: Final = "0.1"
# 0.1 named runs f"{config.name}_{unix time}_{sha256(config)[:8]}": the only place its files keep the config name.
_RUN_ID: Final = re.compile(r"(?P<name>.+)_\d+_[0-9a-f]{8}")
# 0.1 wrote this for torch_version when torch was not importable.
_NO_TORCH: Final = "N/A"
_RECREATE: Final = (
    "re-create the baseline with this release: run the canary on the default branch and keep its metrics.json"
)

# Bounds far outside any real run, so that the arithmetic below (a step time scaled by its wait share, GiB to
# MiB, one GPUInfo per GPU) stays finite and small whatever an untrusted file says.
Seconds = Annotated[float, Field(ge=0, le=1e6)]
Count = Annotated[int, Field(ge=0)]
Millis = Annotated[float, Field(ge=-1e12, le=1e12)]  # torch can report a slightly negative self time


class _Record(BaseModel):
    # Closed and strict, like metrics.json: 0.1 wrote exactly these keys (a pydantic dump of its models), so
    # any other key, a "5" for 5 or a 1 for true means a file 0.1 did not write.
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, allow_inf_nan=False)


class LegacyEnv(_Record):
    python_version: str
    torch_version: str
    cuda_available: bool
    cuda_version: str | None
    gpu_name: str | None = Field(description="torch.cuda.get_device_name(0): 0.1 described device 0 only.")
    gpu_count: Annotated[int, Field(ge=0, le=1024)]
    gpu_memory_gb: Annotated[float, Field(ge=0, le=1e6)] | None = Field(description="GiB (total_memory / 1024**3).")
    platform: str = Field(description="platform.system(), e.g. Linux.")
    platform_version: str = Field(description="platform.release(), the kernel.")
    transformers_version: str | None
    trl_version: str | None
    fingerprint_hash: str = Field(description="md5 of gpu name, CUDA version and GPU count, first 8 hex digits.")


class LegacyConfig(_Record):
    model_name: str
    max_steps: Count
    batch_size: Count
    gradient_accumulation_steps: Count
    max_length: Count
    learning_rate: float
    beta: float | None
    dataset_name: str
    dataset_size: Count
    seed: int | None


class LegacyStepTime(_Record):
    """Over the steps after 0.1's metrics_warmup_steps (default 10); all None when no step remained."""

    count: Count
    mean: Seconds | None
    median: Seconds | None
    p50: Seconds | None
    p95: Seconds | None
    p99: Seconds | None
    min: Seconds | None
    max: Seconds | None
    std: Seconds | None


class LegacyPerf(_Record):
    step_time: LegacyStepTime
    approx_tokens_per_sec: Annotated[float, Field(ge=0)] | None
    max_mem_mb: Annotated[float, Field(ge=0)] = Field(description="torch.cuda.max_memory_allocated() / 1024**2.")
    # Both mean "not measured" when null; accepting their absence too loses nothing.
    gpu_utilization_avg: Annotated[float, Field(ge=0, le=100)] | None = None
    dataloader_wait_pct: Annotated[float, Field(ge=0, le=1e4)] | None = None


class LegacyStability(_Record):
    nan_steps: Count
    inf_steps: Count
    loss_values: Annotated[list[float], Field(max_length=100)]
    grad_norm_values: Annotated[list[float], Field(max_length=100)]
    final_loss: float | None
    loss_diverged: bool


class LegacyCudaOp(_Record):
    name: str
    self_cuda_time_ms: Millis
    count: Count


class LegacyCpuOp(_Record):
    name: str
    self_cpu_time_ms: Millis
    count: Count


class LegacyProfiler(_Record):
    trace_path: str | None
    cuda_time_total_ms: Millis
    cpu_time_total_ms: Millis
    self_cuda_time_total_ms: Millis
    top_cuda_ops: Annotated[list[LegacyCudaOp], Field(max_length=1000)]
    top_cpu_ops: Annotated[list[LegacyCpuOp], Field(max_length=1000)]


class LegacyMetrics(_Record):
    run_id: str
    timestamp: str = Field(description="datetime.now().isoformat(): local time, no time zone.")
    duration_seconds: Annotated[float, Field(ge=0)]
    env: LegacyEnv
    config: LegacyConfig
    perf: LegacyPerf
    stability: LegacyStability
    profiler: LegacyProfiler | None
    status: Literal["completed", "failed", "timeout"]

    @field_validator("timestamp")
    @classmethod
    def _iso(cls, value: str) -> str:
        datetime.fromisoformat(value)  # a ValueError becomes a validation error naming the field
        return value


def is_legacy(data: object) -> TypeGuard[dict[str, Any]]:
    """True for a JSON object shaped like 0.1's metrics.json: no schema_version, and run_id, perf, stability."""
    return isinstance(data, dict) and "schema_version" not in data and data.keys() >= OLD_FORMAT_KEYS


def read_legacy(path: Path, data: Mapping[str, Any]) -> tuple[RunData, list[str]]:
    """Validate a parsed 0.1 document and map it. Returns the run and notes on figures it lacks.

    Raises BaselineError naming the file, the first few invalid fields and the fix.
    """
    try:
        doc = LegacyMetrics.model_validate(data)
    except ValidationError as e:
        raise BaselineError(
            f"baseline {path} looks like an rlhf-canary 0.1 metrics.json but does not match that format: "
            + validation_summary(e),
            fix=f"0.1 files are read as 0.1 wrote them and this one was edited or truncated; delete it or pass "
            f"another baseline, or {_RECREATE}",
        ) from e
    return _to_run(doc, str(path)), _caveats(doc)


def config_name_of(run_id: str) -> str:
    """The config name inside a 0.1 run id, or '' when the id does not have 0.1's shape."""
    found = _RUN_ID.fullmatch(run_id)
    return found["name"] if found else ""


def _to_run(doc: LegacyMetrics, source: str) -> RunData:
    perf, timing = doc.perf, doc.perf.step_time
    # 0.1 timed a step from on_step_begin to on_step_end, so the batch fetch (done before on_step_begin) and
    # the logging fell into the gap it reported as dataloader_wait_pct, in % of that shorter step. This
    # release times a step end to end, gap included: scale 0.1's times by (1 + gap) to mean the same thing.
    gap = perf.dataloader_wait_pct / 100 if perf.dataloader_wait_pct is not None else None
    scale = 1 + (gap or 0.0)
    median = timing.median if timing.median is not None else timing.p50
    return RunData(
        source=source,
        format="rlhf-canary-0.1",
        run_id=doc.run_id,
        config_name=config_name_of(doc.run_id),
        config_hash=None,
        git_sha=None,
        started_at=doc.timestamp,
        status=_status(doc.status),
        env=_env(doc.env),
        workload=None,  # 0.1 fingerprinted neither the model nor the data
        device_kind=_device_kind(doc.env),
        config=doc.config.model_dump(),
        # A completed 0.1 run ran max_steps; otherwise only the timed steps are known to have run.
        num_steps=doc.config.max_steps if doc.status == "completed" else timing.count,
        step_time_median=median * scale if median is not None else None,
        step_time_mean=timing.mean * scale if timing.mean is not None else None,
        tokens_per_s=perf.approx_tokens_per_sec,
        tokens_per_s_measured=False,  # batch x accumulation x max_length / mean step time: padding counted
        # Without CUDA, 0.1 wrote 0.0: nothing was measured.
        peak_allocated_mib=perf.max_mem_mb if doc.env.cuda_available else None,
        gpu_utilization_pct=perf.gpu_utilization_avg,
        data_wait_share=gap / (1 + gap) if gap is not None else None,  # our share is of the whole step
        num_nan_steps=doc.stability.nan_steps,
        num_inf_steps=doc.stability.inf_steps,
        # Not mapped, on purpose (docs/baselines.md): divergence is judged on the current run only; 0.1's
        # loss_values are every logged loss-like value at unknown steps, ending with the Trainer's train_loss
        # (the whole-run mean), which is also what 0.1 wrote as final_loss: no per-step loss, no tail mean.
        profiler=_profiler(doc.profiler),
        profiler_steps=None,  # 0.1's files keep no profiler window: per-step op times cannot be formed
        distributed=None,  # 0.1 trained in one process: world size 1
    )


def _device_kind(env: LegacyEnv) -> str | None:
    """0.1 recorded no device, only whether CUDA was there: without it the run was on the CPU; with it and a
    named GPU, 0.1's trainer used that GPU; CUDA without a GPU name leaves the device unknown."""
    if not env.cuda_available:
        return "cpu"
    return "cuda" if env.gpu_name else None


def _status(state: str) -> Status:
    if state == "completed":
        return Status(state="completed")
    if state == "timeout":
        return Status(state="stopped_early", reason="timeout")
    return Status(state="failed", message="rlhf-canary 0.1 wrote status 'failed' (it records no cause)")


def _env(env: LegacyEnv) -> EnvFingerprint:
    gpus = []
    if env.gpu_name is not None and env.gpu_memory_gb is not None:
        # 0.1 described device 0 only; a multi-GPU runner is taken to hold that model throughout.
        memory = env.gpu_memory_gb * 1024
        gpus = [GPUInfo(index=i, name=env.gpu_name, memory_total_mib=memory) for i in range(env.gpu_count)]
    return EnvFingerprint(
        python=env.python_version,
        platform=f"{env.platform}-{env.platform_version}",
        canary=LEGACY_VERSION,
        torch=None if env.torch_version == _NO_TORCH else env.torch_version,
        cuda=env.cuda_version,
        transformers=env.transformers_version,
        trl=env.trl_version,
        gpu_count=env.gpu_count,
        gpus=gpus,
        fingerprint_hash=env.fingerprint_hash,  # 0.1's md5 prefix: never equal to ours, as it should be
    )


def _profiler(profile: LegacyProfiler | None) -> ProfilerSummary | None:
    if profile is None or not (profile.top_cuda_ops or profile.top_cpu_ops):
        return None  # 0.1 wrote an all-zero summary when its profiler failed: no profile, not an idle one
    # The two top-10 lists come from one table of op averages: merge them by op name. An op in only one
    # list gets 0 ms for the other time (unknown, not measured as 0).
    merged: dict[str, list[float]] = {}  # name -> [count, cpu ms, device ms]
    for cuda_op in profile.top_cuda_ops:
        entry = merged.setdefault(cuda_op.name, [0, 0.0, 0.0])
        entry[0], entry[2] = max(entry[0], cuda_op.count), entry[2] + cuda_op.self_cuda_time_ms
    for cpu_op in profile.top_cpu_ops:
        entry = merged.setdefault(cpu_op.name, [0, 0.0, 0.0])
        entry[0], entry[1] = max(entry[0], cpu_op.count), entry[1] + cpu_op.self_cpu_time_ms
    ops = [
        ProfiledOp(name=name, count=int(count), cpu_self_time_ms=cpu, device_self_time_ms=device)
        for name, (count, cpu, device) in merged.items()
    ]
    ops.sort(key=lambda op: (op.device_self_time_ms, op.cpu_self_time_ms), reverse=True)
    return ProfilerSummary(
        trace_path=profile.trace_path,
        start_step=0,  # unknown: see profiler_steps
        end_step=0,
        # 0.1's cpu_time_total_ms summed inclusive times (nested ops counted again); the self times of its
        # top CPU ops are a lower bound of what ours means. Its self_cuda_time_total_ms is ours exactly.
        cpu_time_total_ms=sum(op.self_cpu_time_ms for op in profile.top_cpu_ops),
        device_time_total_ms=profile.self_cuda_time_total_ms,
        top_ops=ops,
    )


def _caveats(doc: LegacyMetrics) -> list[str]:
    # What every 0.1 baseline lacks, the comparison notes once; this is what only some of them lack.
    if doc.perf.dataloader_wait_pct is not None or doc.perf.step_time.count == 0:
        return []
    return [
        f"{clip_text(doc.run_id, 80)}: rlhf-canary 0.1 recorded no data-wait share, so its step time, which left out "
        "the batch fetch, is used as written; the current run may read slower by its own data-wait share"
    ]
