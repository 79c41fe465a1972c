"""One metrics.json from the ranks of a multi-process run: pure functions over what each rank recorded.

Each rank measures its own steps (the same MetricsCallback as a single process) plus the time its gradient
collectives took, and leaves a `RankRecord` and its rows. The merged series are rank 0's, as for a single
process, plus two columns per rank aligned with the `step` column: `dist/rank<k>/comm_s` and
`dist/rank<k>/compute_s` (step time minus comm: the rank's own work). The per-rank summaries use the run
summary's warm-up cut, so every rank is judged over the same steps.

Why compute and not step time finds the straggler: the ranks meet in the all-reduce every step, so their step
times are equal; the slow rank's extra time shows as compute, the others' as time waiting in the all-reduce.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import Field

from canary_action.metrics import schema as m

Series = dict[str, list[float | None]]
RankColumn = Literal["compute_s", "comm_s"]


def rank_column(rank: int, what: RankColumn) -> str:
    return f"{m.RANK_PREFIX}{rank}/{what}"


class RankRecord(m.Record):
    """What one rank knows at its end, besides its rows (written by the worker, read by the launching process)."""

    rank: int
    status: m.Status
    non_finite: list[m.NonFiniteEvent] = Field(default_factory=list)
    notices: list[str] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    workload: m.Workload | None = None
    profiler: m.ProfilerSummary | None = None
    backend: str | None = None
    fix: str | None = Field(None, description="A CanaryError's fix, so that the launcher can raise it again.")
    failed_at: float | None = Field(None, description="Unix time of the failure: the first one is the cause.")


@dataclass(frozen=True)
class RankRun:
    rank: int
    series: Series
    record: RankRecord | None  # None: the process ended without writing one (killed, out of memory)


def base_run(runs: Sequence[RankRun]) -> RankRun | None:
    """The rank whose series are the run's: rank 0, or the lowest rank that recorded steps if rank 0 did not."""
    ordered = sorted(runs, key=lambda run: run.rank)
    return next((run for run in ordered if _num_rows(run.series)), ordered[0] if ordered else None)


def merge_series(runs: Sequence[RankRun], world_size: int) -> Series:
    """The base rank's series (without its own dist/ columns) plus compute and comm of every rank, by step."""
    base = base_run(runs)
    if base is None or not _num_rows(base.series):
        return {}
    merged = {name: list(values) for name, values in base.series.items() if not name.startswith(m.RANK_PREFIX)}
    steps = merged.get(m.STEP, [])
    by_rank = {run.rank: run for run in runs}
    for rank in range(world_size):
        run = by_rank.get(rank)
        comm, compute = _comm_and_compute(run) if run is not None else ({}, {})
        merged[rank_column(rank, "compute_s")] = [compute.get(step) if step is not None else None for step in steps]
        merged[rank_column(rank, "comm_s")] = [comm.get(step) if step is not None else None for step in steps]
    return merged


def distributed_summary(
    runs: Sequence[RankRun],
    *,
    world_size: int,
    strategy: Literal["ddp", "fsdp", "deepspeed"],
    backend: str | None,
    steady_steps: set[float],
) -> m.Distributed:
    """Per-rank medians over `steady_steps` (peaks over every step), the slowest rank and the imbalance."""
    by_rank = {run.rank: run for run in runs}
    ranks = [_rank_summary(rank, by_rank.get(rank), steady_steps) for rank in range(world_size)]
    computes = {r.rank: r.compute_median_s for r in ranks if r.compute_median_s is not None}
    slowest = max(computes, key=lambda rank: (computes[rank], -rank)) if len(computes) >= 2 else None
    imbalance = None
    if slowest is not None:
        # The median *rank* (the lower one of an even count): with two ranks, the slow one against the other.
        typical = statistics.median_low(computes.values())
        imbalance = 100 * (computes[slowest] - typical) / typical if typical > 0 else None
    shares = [
        r.comm_median_s / r.step_time_median_s for r in ranks if r.comm_median_s is not None and r.step_time_median_s
    ]
    return m.Distributed(
        world_size=world_size,
        strategy=strategy,
        backend=backend,
        ranks=ranks,
        slowest_rank=slowest,
        rank_imbalance_pct=imbalance,
        comm_share=statistics.median(shares) if shares else None,
    )


def merge_status(runs: Sequence[RankRun], world_size: int, launcher_exit: int) -> tuple[m.Status, list[str]]:
    """How the run ended, and warnings: the first failure in time wins (the others are usually its echo:
    a peer that vanished mid all-reduce); then a rank that left no record; then the earliest early stop."""
    records = {run.rank: run.record for run in runs if run.record is not None}
    missing = ", ".join(str(rank) for rank in range(world_size) if rank not in records)
    vanished = f"rank {missing} ended without a record (killed, or out of memory?)" if missing else ""
    failed = [r for r in records.values() if r.status.state == "failed"]
    first = first_failure(runs)
    if first is not None:
        message = f"rank {first.rank}: {first.status.message or first.status.exception_type}"
        # A rank that vanished may have died first (a kill, the OOM killer): then this error is the echo.
        message = f"{vanished}; then {message}" if vanished else message
        others = ", ".join(str(r.rank) for r in sorted(failed, key=lambda r: r.rank) if r is not first)
        warnings = [f"rank {others} failed too, after rank {first.rank}"] if others else []
        return first.status.model_copy(update={"message": message[:2000]}), warnings
    if vanished:
        return m.Status(
            state="failed",
            reason="error",
            stage="train",
            exception_type="RankExited",
            message=f"{vanished}; the launcher exited with code {launcher_exit}",
        ), []
    warnings = [f"the launcher exited with code {launcher_exit} after every rank finished"] if launcher_exit else []
    stopped = [r for r in records.values() if r.status.state == "stopped_early" and r.status.reason != "peer"]
    if stopped:
        first_stop = min(stopped, key=lambda r: (r.status.step or 0, r.rank))
        return first_stop.status, warnings
    return records[min(records)].status, warnings


def first_failure(runs: Sequence[RankRun]) -> RankRecord | None:
    """The rank that failed first in time (ties: the lowest rank), or None when none failed."""
    failed = [run.record for run in runs if run.record is not None and run.record.status.state == "failed"]
    return min(failed, key=lambda r: (r.failed_at if r.failed_at is not None else math.inf, r.rank), default=None)


def merge_non_finite(runs: Sequence[RankRun]) -> list[m.NonFiniteEvent]:
    """Every rank's events, once each: gradients are all-reduced and logs gathered, so most are on all ranks."""
    seen: dict[tuple[int, str, str], m.NonFiniteEvent] = {}
    for run in sorted(runs, key=lambda run: run.rank):
        for event in run.record.non_finite if run.record else []:
            seen.setdefault((event.step, event.source, event.key), event)
    return sorted(seen.values(), key=lambda event: event.step)


def _comm_and_compute(run: RankRun) -> tuple[dict[float, float | None], dict[float, float | None]]:
    steps = run.series.get(m.STEP, [])
    times = run.series.get(m.STEP_TIME_S, [None] * len(steps))
    comms = run.series.get(rank_column(run.rank, "comm_s"), [None] * len(steps))
    comm: dict[float, float | None] = {}
    compute: dict[float, float | None] = {}
    for step, time, spent in zip(steps, times, comms, strict=True):
        if step is None:
            continue
        comm[step] = _finite(spent)
        step_time, in_comm = _finite(time), comm[step]
        compute[step] = step_time - in_comm if step_time is not None and in_comm is not None else None
    return comm, compute


def _rank_summary(rank: int, run: RankRun | None, steady_steps: set[float]) -> m.RankSummary:
    if run is None:
        return m.RankSummary(rank=rank)
    comm, compute = _comm_and_compute(run)
    steps = run.series.get(m.STEP, [])
    times = dict(zip(steps, run.series.get(m.STEP_TIME_S, [None] * len(steps)), strict=True))
    steady = [step for step in steps if step is not None and step in steady_steps]
    return m.RankSummary(
        rank=rank,
        step_time_median_s=_median(times.get(step) for step in steady),
        compute_median_s=_median(compute.get(step) for step in steady),
        comm_median_s=_median(comm.get(step) for step in steady),
        peak_allocated_mib=_peak(run.series.get(m.PEAK_ALLOCATED_MIB)),
        host_rss_peak_mib=_peak(run.series.get(m.HOST_RSS_MIB)),
    )


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def _median(values: Iterable[float | None]) -> float | None:
    finite = [v for v in values if v is not None and math.isfinite(v)]
    return statistics.median(finite) if finite else None


def _peak(values: Sequence[float | None] | None) -> float | None:
    finite = [v for v in values or [] if v is not None and math.isfinite(v)]
    return max(finite) if finite else None


def _num_rows(series: Mapping[str, list[float | None]]) -> int:
    return len(series.get(m.STEP, []))
