"""Where a steady step's time goes: data wait, generation, collectives, compute, and the stalls on top.

Means, not medians, over the same steady rows the step-time summary uses: means add up (step = wait +
generation + compute per step), so a component's growth can be read as a share of the step-time growth.
Stalls are told apart by counting outlier steps (slower than OUTLIER_RATIO x the median): periodic I/O,
logging, checkpointing or garbage collection shows there, not in a shift of the typical step.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from canary_action.compare.runs import RunData

OUTLIER_RATIO: Final = 2.0  # jitter stays within tens of percent of the median; a stall at least doubles a step


@dataclass(frozen=True)
class Breakdown:
    """Per-step means over a run's steady steps, in seconds (tokens: a count)."""

    num_steps: int
    step_s: float
    data_wait_s: float | None
    """None when the run recorded no data wait: then compute_s includes it."""
    generation_s: float | None
    """None when the run generated nothing (offline training) or did not time it."""
    compute_s: float
    """The rest of the step: forward, backward, optimizer (step - data wait - generation - collectives)."""
    stall_s: float
    """Time per step that outlier steps spend above the median (overlaps the components above)."""
    outlier_share: float
    """Share of steady steps slower than OUTLIER_RATIO x the median step."""
    tokens_per_step: float | None
    collective_s: float | None = None
    """Multi-process runs: the collectives' own time (RunData.collective_times); None in one process."""


@dataclass(frozen=True)
class ComponentDelta:
    baseline_s: float
    """The mean over the baselines that measured it."""
    current_s: float
    delta_s: float
    share: float | None
    """delta_s / the step-time growth; None when the step did not get slower. Components add up to 1."""


@dataclass(frozen=True)
class BreakdownDelta:
    step: ComponentDelta
    data_wait: ComponentDelta | None
    generation: ComponentDelta | None
    compute: ComponentDelta
    stall: ComponentDelta
    baseline_outlier_share: float
    current_outlier_share: float
    baseline_tokens_per_step: float | None
    current_tokens_per_step: float | None
    collective: ComponentDelta | None = None


def breakdown(run: RunData) -> Breakdown | None:
    """The timing breakdown of the steady steps; None when the run kept no per-step times (rlhf-canary 0.1)."""
    rows = run.steady_rows
    if not rows or not run.steady_step_times:
        return None
    times = run.steady_step_times  # the times of exactly these rows
    step = statistics.fmean(times)
    wait = _mean(run.data_wait, rows)
    generation = _mean(run.generation, rows)
    collectives = run.collective_times()
    collective = statistics.fmean(collectives) if collectives else None
    median = statistics.median(times)
    outliers = [t for t in times if t > OUTLIER_RATIO * median]
    return Breakdown(
        num_steps=len(rows),
        step_s=step,
        data_wait_s=wait,
        generation_s=generation,
        compute_s=step - (wait or 0.0) - (generation or 0.0) - (collective or 0.0),
        stall_s=sum(t - median for t in outliers) / len(times),
        outlier_share=len(outliers) / len(times),
        tokens_per_step=run.tokens_per_step,
        collective_s=collective,
    )


def compare_breakdowns(current: Breakdown, baselines: Sequence[Breakdown]) -> BreakdownDelta:
    """Each component against the mean of the baselines, with its share of the step-time growth."""
    if not baselines:
        raise ValueError("compare_breakdowns needs at least one baseline breakdown")
    growth = current.step_s - statistics.fmean(b.step_s for b in baselines)

    def optional(get: Callable[[Breakdown], float | None]) -> ComponentDelta | None:
        own, base = get(current), [v for b in baselines if (v := get(b)) is not None]
        return _delta(own, base, growth) if own is not None and base else None

    tokens = [t for b in baselines if (t := b.tokens_per_step) is not None]
    collective = optional(lambda b: b.collective_s)

    def compute(b: Breakdown) -> float:
        # Collectives measured on one side only (a world size change, allowed): compare compute with them in.
        return b.compute_s if collective is not None else b.compute_s + (b.collective_s or 0.0)

    return BreakdownDelta(
        step=_delta(current.step_s, [b.step_s for b in baselines], growth),
        data_wait=optional(lambda b: b.data_wait_s),
        generation=optional(lambda b: b.generation_s),
        compute=_delta(compute(current), [compute(b) for b in baselines], growth),
        stall=_delta(current.stall_s, [b.stall_s for b in baselines], growth),
        baseline_outlier_share=statistics.fmean(b.outlier_share for b in baselines),
        current_outlier_share=current.outlier_share,
        baseline_tokens_per_step=statistics.fmean(tokens) if tokens else None,
        current_tokens_per_step=current.tokens_per_step,
        collective=collective,
    )


def _delta(own: float, base: Sequence[float], growth: float) -> ComponentDelta:
    mean = statistics.fmean(base)
    return ComponentDelta(mean, own, own - mean, (own - mean) / growth if growth > 0 else None)


def _mean(column: Sequence[float | None], rows: Sequence[int]) -> float | None:
    # A missing or broken sample is no measurement; the mean covers the rows that have one.
    values = [v for i in rows if i < len(column) and (v := column[i]) is not None and math.isfinite(v) and v >= 0]
    return statistics.fmean(values) if values else None
