"""What a comparison reads from one run, whichever format it came in.

metrics.json (schema version 1) carries raw per-step series; rlhf-canary 0.1's files carry summaries only.
`RunData` is the common view: per-step samples where the format has them (None where it does not), and the
summary figures every check needs. The checks read nothing else, so a check that needs per-step data says
so by finding None, never by guessing. A multi-process run adds its `distributed` block and, per rank, the
steady steps' compute and collective times.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from canary_action.compare.result import RunFormat, RunRef
from canary_action.metrics import schema
from canary_action.metrics.heldout import HeldoutEval
from canary_action.metrics.schema import Distributed, EnvFingerprint, Metrics, ProfilerSummary, Status, Workload
from canary_action.metrics.summarize import summarize

_RANK_COLUMN = re.compile(rf"{re.escape(schema.RANK_PREFIX)}(\d+)/(compute_s|comm_s)")


@dataclass(frozen=True)
class RunData:
    source: str
    format: RunFormat
    run_id: str
    config_name: str
    config_hash: str | None
    git_sha: str | None
    started_at: str | None
    status: Status
    env: EnvFingerprint
    workload: Workload | None
    device_kind: str | None
    """cpu or cuda: what the run trained on; None when its file does not say."""
    config: Mapping[str, Any]
    num_steps: int
    steady_step_times: list[float] | None = None
    """Steady-state step times (s) in step order; None when the format keeps no per-step times."""
    steady_rows: list[int] | None = None
    """The rows (indices into step_times, loss_steps...) behind steady_step_times."""
    steady_tokens: list[float] | None = None
    """Measured tokens of the same steady steps, aligned with steady_step_times."""
    step_time_median: float | None = None
    step_time_mean: float | None = None
    first_step_time_s: float | None = None
    tokens_per_s: float | None = None
    tokens_per_s_measured: bool = True
    """False for rlhf-canary 0.1 (its tokens/s came from the config, not from the batches)."""
    peak_allocated_mib: float | None = None
    peak_reserved_mib: float | None = None
    host_peak_rss_mib: float | None = None
    """The process's peak resident memory in its steps outside the profiler window (rank 0's on several
    processes; Linux, from this release on); judged on CPU runs only."""
    gpu_utilization_pct: float | None = None
    data_wait_share: float | None = None
    generation_share: float | None = None
    num_nan_steps: int = 0
    num_inf_steps: int = 0
    non_finite_keys: list[str] = field(default_factory=list)
    """Where non-finite values were seen: 'loss', 'gradients', logged keys; first events first."""
    first_non_finite_step: int | None = None
    divergence_step: int | None = None
    num_grad_norm_spikes: int | None = None
    loss_steps: list[int] = field(default_factory=list)
    losses: list[float | None] = field(default_factory=list)
    tail_mean_loss: float | None = None
    final_loss: float | None = None
    algo: Mapping[str, list[float | None]] = field(default_factory=dict)
    """Algorithm metrics per step ('rewards/accuracies', 'kl', ...), aligned with loss_steps."""
    grad_norms: list[float | None] = field(default_factory=list)
    """Every step's gradient norm as the trainer logged it (before clipping), aligned with loss_steps."""
    weight_sums: list[float | None] = field(default_factory=list)
    """Every step's checksum of the trainable weights (numerics/weight_sum), aligned with loss_steps."""
    heldout: HeldoutEval | None = None
    """The held-out evaluation: the run's own (metrics.json), or for a lockstep pair's side the pair's (pair.json)."""
    step_times: list[float | None] = field(default_factory=list)
    """Every step's time, aligned with loss_steps (charts, timing breakdown)."""
    data_wait: list[float | None] = field(default_factory=list)
    generation: list[float | None] = field(default_factory=list)
    gpu_busy: list[float | None] = field(default_factory=list)
    """Every step's GPU busy time (CUDA runs that timed it), aligned with loss_steps; None where not timed."""
    gpu_kernels: list[float | None] = field(default_factory=list)
    """Every step's kernel count on the GPU, aligned with gpu_busy."""
    profiler: ProfilerSummary | None = None
    profiler_steps: int | None = None
    """How many steps the profiler window covered (op times are divided by it)."""
    measurement_warnings: list[str] = field(default_factory=list)
    """Why this run's figures may be less trustworthy (a throttled or shared GPU)."""
    distributed: Distributed | None = None
    """A multi-process run's world size, strategy and per-rank summaries; None for one process (and for
    rlhf-canary 0.1, which ran one)."""
    steady_rank_compute: Mapping[int, list[float | None]] = field(default_factory=dict)
    """Per rank, its compute time (step minus collectives) on each of steady_rows; empty when not recorded."""
    steady_rank_comm: Mapping[int, list[float | None]] = field(default_factory=dict)
    """Per rank, its time in gradient collectives (waiting for slower ranks included) on each of steady_rows."""
    warmup_steps: int = 0
    """Leading rows left out of the steady figures above (the run's own cut, or the comparison's: `recut`)."""
    warmup_method: Literal["auto", "fixed"] | None = None
    """How the run's own summary chose its cut; None where the format keeps no per-step times."""
    metrics: Metrics | None = field(default=None, repr=False, compare=False)
    """The record behind this view (schema 1), so that a comparison can cut every run the same way."""

    @property
    def world_size(self) -> int:
        """Processes in the job: from the distributed block, else the config (a run that failed before its ranks
        reported), else 1."""
        if self.distributed is not None:
            return self.distributed.world_size
        configured = self.config.get("num_processes")
        return configured if isinstance(configured, int) and not isinstance(configured, bool) and configured > 0 else 1

    def collective_times(self) -> list[float] | None:
        """Per steady step, the collectives' own time: the least any rank spent in them.

        Every rank leaves the last all-reduce together, so a rank's comm_s is the collectives plus its wait for
        the last rank to arrive, and that last rank waits for no one. The minimum over ranks is the collectives
        themselves; a straggler's cost shows in the other ranks' waits and in rank imbalance, not here. Steps
        where a rank has no figure are left out; None when no step has every rank's.
        """
        columns = list(self.steady_rank_comm.values())
        if len(columns) < 2:
            return None
        rows = zip(*columns, strict=True)
        times = [min(v for v in row if v is not None) for row in rows if all(_ok(v) for v in row)]
        return times or None

    @property
    def steady_gpu_busy(self) -> list[float]:
        """The GPU busy time of the steady steps that were timed on the GPU ([] when none was)."""
        rows = self.steady_rows or []
        return [b for i in rows if i < len(self.gpu_busy) and (b := self.gpu_busy[i]) is not None and b > 0]

    @property
    def tokens_per_step(self) -> float | None:
        if not self.steady_tokens:
            return None
        return sum(self.steady_tokens) / len(self.steady_tokens)

    def ref(self) -> RunRef:
        gpu = self.env.gpus[0].name if self.env.gpus else None
        return RunRef(
            run_id=self.run_id,
            source=self.source,
            format=self.format,
            config_name=self.config_name,
            git_sha=self.git_sha,
            started_at=self.started_at,
            state=self.status.state,
            num_steps=self.num_steps,
            device=self.workload.device if self.workload else None,
            gpu=gpu,
            distributed=self.distributed,
        )


def timed_rows(run: RunData) -> list[int]:
    """Rows that could be steady: outside the profiler window, with a step time; warm-up not yet cut."""
    if run.metrics is None:
        return []
    times = run.step_times
    return [i for i in _steady_rows(run.metrics, run.loss_steps, 0) if i < len(times) and _ok(times[i])]


def recut(run: RunData, warmup_steps: int) -> RunData:
    """The same run with its first `warmup_steps` rows left out of the steady figures instead of its own cut."""
    if run.metrics is None or warmup_steps == run.warmup_steps:
        return run
    # A lockstep side's held-out evaluation is the pair's (pair.json), not its metrics.json's: it stays.
    return replace(from_metrics(run.metrics, run.source, warmup_steps=warmup_steps), heldout=run.heldout)


def from_metrics(metrics: Metrics, source: str, *, warmup_steps: int | None = None) -> RunData:
    """The view of a schema-1 metrics.json. Steady rows follow the summary's warm-up cut (or `warmup_steps`,
    when given, with the steady figures recomputed) and leave out the profiler window."""
    series = metrics.series
    n = len(series.get(schema.STEP, []))
    raw_steps = _col(series, schema.STEP, n)
    steps = [int(v) if v is not None and math.isfinite(v) else i + 1 for i, v in enumerate(raw_steps)]
    summary = metrics.summary
    own_cut = summary.warmup_steps if summary else 0
    cut = own_cut if warmup_steps is None else min(warmup_steps, n)
    if summary is not None and cut != own_cut:  # its figures describe its own cut: summarise these steady steps
        profiled = range(metrics.profiler.start_step, metrics.profiler.end_step + 1) if metrics.profiler else None
        summary = summarize(series, warmup=cut, profiler_steps=profiled)
    times = _col(series, schema.STEP_TIME_S, n)
    tokens = _col(series, schema.NUM_TOKENS, n)
    steady_rows = _steady_rows(metrics, steps, cut)
    timed_rows = [i for i in steady_rows if (t := times[i]) is not None and _ok(t)]
    steady = [(times_i, tokens[i]) for i in timed_rows if (times_i := times[i]) is not None]
    steady_tokens = [k for _, k in steady if k is not None]
    stability = metrics.stability
    first_bad = min((e.step for e in stability.non_finite), default=None)
    timing = summary.step_time_s if summary else None
    window = metrics.profiler
    compute, comm = _rank_columns(series, timed_rows) if metrics.distributed is not None else ({}, {})
    return RunData(
        source=source,
        format="v1",
        run_id=metrics.run.run_id,
        config_name=metrics.run.config_name,
        config_hash=metrics.run.config_hash,
        git_sha=metrics.run.git_sha,
        started_at=metrics.run.started_at,
        status=metrics.status,
        env=metrics.env,
        workload=metrics.workload,
        device_kind=metrics.workload.device.split(":")[0] if metrics.workload else None,
        config=metrics.config,
        num_steps=n,
        steady_step_times=[t for t, _ in steady] or None,
        steady_rows=timed_rows or None,
        steady_tokens=steady_tokens if steady and len(steady_tokens) == len(steady) else None,
        step_time_median=timing.median if timing else None,
        step_time_mean=timing.mean if timing else None,
        first_step_time_s=summary.first_step_time_s if summary else None,
        tokens_per_s=summary.tokens_per_s if summary else None,
        peak_allocated_mib=summary.peak_allocated_mib if summary else None,
        peak_reserved_mib=summary.peak_reserved_mib if summary else None,
        host_peak_rss_mib=summary.host_peak_rss_mib if summary else None,
        gpu_utilization_pct=summary.gpu_utilization_mean_pct if summary else None,
        data_wait_share=summary.data_wait_share if summary else None,
        generation_share=summary.generation_share if summary else None,
        num_nan_steps=stability.num_nan_steps,
        num_inf_steps=stability.num_inf_steps,
        non_finite_keys=list(dict.fromkeys(e.key for e in stability.non_finite)),
        first_non_finite_step=first_bad,
        divergence_step=stability.divergence_step,
        num_grad_norm_spikes=len(stability.grad_norm_spikes) if schema.GRAD_NORM in series else None,
        loss_steps=steps,
        losses=_col(series, schema.LOSS, n),
        tail_mean_loss=summary.tail_mean_loss if summary else None,
        final_loss=summary.final_loss if summary else None,
        algo={k.removeprefix(schema.ALGO_PREFIX): v for k, v in series.items() if k.startswith(schema.ALGO_PREFIX)},
        grad_norms=_col(series, schema.GRAD_NORM, n),
        weight_sums=_col(series, schema.WEIGHT_SUM, n),
        heldout=metrics.heldout,
        step_times=times,
        data_wait=_col(series, schema.DATA_WAIT_S, n),
        generation=_col(series, schema.GENERATION_S, n),
        gpu_busy=_col(series, schema.GPU_BUSY_S, n),
        gpu_kernels=_col(series, schema.NUM_GPU_KERNELS, n),
        measurement_warnings=list(metrics.measurement_warnings),
        profiler=window,
        profiler_steps=(window.end_step - window.start_step + 1) if window else None,
        distributed=metrics.distributed,
        steady_rank_compute=compute,
        steady_rank_comm=comm,
        warmup_steps=cut,
        warmup_method=metrics.summary.warmup_method if metrics.summary else None,
        metrics=metrics,
    )


def _rank_columns(
    series: Mapping[str, list[float | None]], rows: Sequence[int]
) -> tuple[dict[int, list[float | None]], dict[int, list[float | None]]]:
    """The per-rank columns (dist/rank<k>/compute_s, .../comm_s) on the given rows, by rank."""
    found: dict[str, dict[int, list[float | None]]] = {"compute_s": {}, "comm_s": {}}
    for name, values in series.items():
        match = _RANK_COLUMN.fullmatch(name)
        if match:
            found[match.group(2)][int(match.group(1))] = [values[i] for i in rows]
    return dict(sorted(found["compute_s"].items())), dict(sorted(found["comm_s"].items()))


def _steady_rows(metrics: Metrics, steps: Sequence[int], cut: int) -> list[int]:
    if metrics.summary is None:
        return []
    flagged = metrics.series.get(schema.IN_PROFILER_WINDOW) or [None] * len(steps)
    window = range(metrics.profiler.start_step, metrics.profiler.end_step + 1) if metrics.profiler else range(0)
    return [
        i for i in range(cut, len(steps)) if steps[i] not in window and not (flagged[i] is not None and flagged[i] != 0)
    ]


def _col(series: Mapping[str, list[float | None]], name: str, n: int) -> list[float | None]:
    return list(series[name]) if name in series else [None] * n


def _ok(value: float | None) -> bool:
    return value is not None and math.isfinite(value) and value >= 0
