"""Per-step curves for the reports' charts: the current run against the baselines' band, downsampled."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Final

from canary_action.compare.learning import Band
from canary_action.compare.result import Curve
from canary_action.compare.runs import RunData
from canary_action.metrics import schema

MAX_POINTS: Final = 120  # a chart wider than this is unreadable in a PR comment


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
