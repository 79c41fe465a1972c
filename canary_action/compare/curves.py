"""Per-step curves for the reports' charts: the current run against the baselines' band, downsampled."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Final

from canary_action.compare.learning import Band
from canary_action.compare.result import Curve, HeldoutSummary
from canary_action.compare.runs import RunData
from canary_action.metrics import schema

MAX_POINTS: Final = 120  # a chart wider than this is unreadable in a PR comment
#: A lockstep pair's two loss curves, unsmoothed: the head side (current) over its base side (baseline_mid).
PAIR_LOSS: Final = "pair/loss"
#: The held-out figure at each evaluated step: this run (current) over its reference (baseline_mid).
HELDOUT: Final = "heldout"


def step_time_curve(current: RunData, baselines: Sequence[RunData]) -> Curve:
    per_step = [dict(zip(b.loss_steps, b.step_times, strict=False)) for b in baselines if b.format == "v1"]
    low, mid, high = [], [], []
    for step in current.loss_steps:
        values = [v for d in per_step if (v := d.get(step)) is not None and math.isfinite(v)]
        low.append(min(values) if values else None)
        mid.append(statistics.median(values) if values else None)
        high.append(max(values) if values else None)
    return _curve(schema.STEP_TIME_S, current.loss_steps, [current.step_times, low, mid, high])


def loss_curve(current: RunData, band: Band | None) -> Curve:
    if band is None:
        none: list[float | None] = [None] * len(current.loss_steps)
        return _curve(schema.LOSS, current.loss_steps, [current.losses, none, none, none])
    return _curve(schema.LOSS, band.steps, [list(band.current), list(band.low), list(band.mid), list(band.high)])


def pair_loss_curve(head: RunData, base: RunData) -> Curve:
    """Both sides' losses at the steps both logged: where a changed math parts them, and from which step."""
    theirs = dict(zip(base.loss_steps, base.losses, strict=False))
    none: list[float | None] = [None] * len(head.loss_steps)
    mid = [theirs.get(step) for step in head.loss_steps]
    return _curve(PAIR_LOSS, head.loss_steps, [head.losses, none, mid, none])


def heldout_curve(summary: HeldoutSummary) -> Curve:
    none: list[float | None] = [None] * len(summary.steps)
    return Curve(name=HELDOUT, steps=summary.steps, current=summary.current_curve, baseline_low=none,
                 baseline_mid=summary.reference_curve, baseline_high=none)  # fmt: skip


def _curve(name: str, steps: Sequence[int], columns: Sequence[Sequence[float | None]]) -> Curve:
    """Bucket means of at most MAX_POINTS buckets; each point is labelled with its bucket's last step."""
    n = len(steps)
    size = max(1, math.ceil(n / MAX_POINTS))
    buckets = [range(i, min(i + size, n)) for i in range(0, n, size)]
    shrunk = [[_mean(column, rows) for rows in buckets] for column in columns]
    return Curve(
        name=name,
        steps=[steps[rows[-1]] for rows in buckets],
        current=shrunk[0],
        baseline_low=shrunk[1],
        baseline_mid=shrunk[2],
        baseline_high=shrunk[3],
    )


def _mean(column: Sequence[float | None], rows: range) -> float | None:
    values = [v for i in rows if i < len(column) and (v := column[i]) is not None and math.isfinite(v)]
    return statistics.fmean(values) if values else None
