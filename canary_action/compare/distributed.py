"""Checks of a multi-process run (group perf): rank imbalance and the time the collectives themselves take.

`rank_imbalance` reads the slowest rank's compute against the median rank's. It needs no baseline (a straggler
holds every rank back whatever the baseline did), so alone it fails over `max_rank_imbalance_pct`; with
baselines it fails only when also clearly above their imbalance, and warns when they were as imbalanced (a
machine whose ranks always differ is the machine, not the pull request).

`communication_time` compares the collectives' own time per step (`RunData.collective_times`: per step, the
least any rank spent in them, so that a straggler's cost counts once, in rank_imbalance) with the
baselines', with step_time's statistics: medians of steady steps, batch-median errors, the run-to-run spread
measured from several baselines, the limit widened to k x the noise.

A single-process run gets neither check: no row at all, rather than a "skip" on every report.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from canary_action.compare.context import NEW_BASELINE, Context, no_baseline, noise_margin, not_comparable, skipped
from canary_action.compare.perf import device_ratio, judged, too_short_fix
from canary_action.compare.result import Check, CheckStatus
from canary_action.compare.runs import RunData
from canary_action.compare.stats import Sample, compare_levels
from canary_action.metrics.schema import Distributed


@dataclass(frozen=True)
class Straggler:
    """The slowest rank of a run against the median rank, by median compute time per step."""

    rank: int
    compute_s: float
    median_s: float
    """The median rank's compute (s per step; the lower one of an even count: with two ranks, the other)."""
    imbalance_pct: float


def straggler(dist: Distributed | None) -> Straggler | None:
    """The slowest rank, from the run's distributed block; the imbalance the run recorded where it did."""
    if dist is None:
        return None
    computes = {r.rank: v for r in dist.ranks if (v := r.compute_median_s) is not None and v > 0}
    if not computes:
        return None
    slowest = dist.slowest_rank if dist.slowest_rank in computes else max(computes, key=computes.__getitem__)
    worst = computes[slowest]
    recorded = dist.rank_imbalance_pct
    if recorded is not None and recorded > -100:
        return Straggler(slowest, worst, worst / (1 + recorded / 100), recorded)
    if len(computes) < 2:
        return None
    median = statistics.median_low(computes.values())  # the median *rank*, as metrics/merge.py records it
    return Straggler(slowest, worst, median, 100 * (worst / median - 1))


def imbalance(run: RunData) -> float | None:
    """The run's rank imbalance in % (None: one process, or the ranks' compute was not recorded)."""
    found = straggler(run.distributed)
    if found is not None:
        return found.imbalance_pct
    return run.distributed.rank_imbalance_pct if run.distributed is not None else None


def distributed_checks(ctx: Context) -> list[Check]:
    if ctx.current.distributed is None:
        return []
    return [_rank_imbalance(ctx), _communication_time(ctx)]


def _rank_imbalance(ctx: Context) -> Check:
    name, unit, t = "rank_imbalance", "%", ctx.thresholds
    limit = t.max_rank_imbalance_pct
    found = straggler(ctx.current.distributed)
    current = imbalance(ctx.current)
    if current is None:
        return skipped(name, "perf", unit, "the ranks' compute times were not recorded")
    short = _too_short(ctx, name, unit, len(ctx.current.steady_step_times or []))
    if short is not None:
        return short
    if ctx.baselines and not ctx.perf.usable:
        return not_comparable(name, "perf", unit, ctx.perf)
    values = [v for b in ctx.perf.usable if (v := imbalance(b)) is not None]
    who = f"rank {found.rank}'s" if found is not None else "the slowest rank's"
    message = f"{who} compute {current:.1f} % over the median rank's; limit {limit:g} %"
    note = None
    status: CheckStatus
    if current <= limit:
        status = "pass"
    elif not values:
        status = "fail"
        message += " (judged alone: no baseline recorded its rank imbalance)"
    else:
        worst = max(values)
        margin = max(limit / 2, noise_margin(values, t.run_spread_k))
        note = f"fails only when also over {margin:.1f} points above the baselines' most ({worst:.1f} %)"
        if current - worst > margin:
            status = "fail"
            message += f"; the baselines' at most {worst:.1f} %"
        else:
            status = "warn"
            message += f", but the baselines were as imbalanced (up to {worst:.1f} %)"
    base = statistics.fmean(values) if values else None
    return Check(
        name=name, group="perf", status=status, unit=unit, baseline=base, current=current,
        delta=current - base if base is not None else None, threshold=limit, threshold_unit="%",
        threshold_note=note, message=message,
    )  # fmt: skip


def _communication_time(ctx: Context) -> Check:
    name, unit, limit = "communication_time", "s", ctx.thresholds.max_comm_time_increase_pct
    own = _positive(ctx.current.collective_times())
    if not own:
        dist = ctx.current.distributed
        strategy = f"this {dist.strategy} run" if dist is not None else "this run"
        return skipped(name, "perf", unit, f"{strategy} recorded no per-rank time in collectives")
    median = statistics.median(own)
    short = _too_short(ctx, name, unit, len(own))
    if short is not None:
        return short
    if not ctx.perf.usable:
        if ctx.perf.differences:
            return not_comparable(name, "perf", unit, ctx.perf)
        return no_baseline(name, "perf", unit, median)
    samples = [Sample.of(values) for b in ctx.perf.usable if (values := _positive(b.collective_times()))]
    if not samples:
        why = (
            "the baselines recorded no per-rank time in collectives"
            if any(b.distributed is not None for b in ctx.perf.usable)
            else "the baselines ran in one process: no collectives to compare"
        )
        return skipped(name, "perf", unit, why, current=median, fix=NEW_BASELINE if "recorded no" in why else None)
    effect = compare_levels(Sample.of(own), samples, ratio=device_ratio(ctx.current), level=ctx.level)
    check = judged(name, unit, effect, limit, ctx, worse="higher", current=median)
    step = ctx.current.step_time_median
    share = f"; collectives take {100 * median / step:.0f} % of the step" if step else ""
    return check.model_copy(update={"message": f"collective time per step {check.message}{share}"})


def _too_short(ctx: Context, name: str, unit: str, num_steady: int) -> Check | None:
    if num_steady >= ctx.thresholds.min_step_count:
        return None
    why = f"{num_steady} steady-state steps, fewer than min_step_count ({ctx.thresholds.min_step_count})"
    return skipped(name, "perf", unit, why, fix=too_short_fix(ctx))


def _positive(values: list[float] | None) -> list[float]:
    return [v for v in values or [] if v > 0]
