"""Pictures of a curve: GitHub-rendered Mermaid `xychart-beta` charts, and unicode sparklines for plain text
and for when the charts are dropped to fit a size limit. Only numbers and our own titles go in: nothing from
a metrics file can reach the Mermaid source as text."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Final

from canary_action.compare.result import Curve

CHART_POINTS: Final = 60  # more points than this make a line chart in a PR comment a smear
SPARK_POINTS: Final = 40
_BLOCKS: Final = "▁▂▃▄▅▆▇█"
# Mermaid xychart-beta has no legend: the palette is fixed and the caption says which colour is which.
_PALETTE: Final = "#d62728, #1f77b4, #9ecae1, #9ecae1"
LEGEND: Final = "red: this run · dark blue: baseline median · light blue: baseline min and max"
# A leading point this many times the steady level is warm-up (compilation, allocator, caches): drawn, it sets the
# y range, and a 30 % slowdown of every later step shrinks to a pixel.
WARMUP_FACTOR: Final = 2.0


def mermaid(curve: Curve, title: str, unit: str) -> str | None:
    """A ```mermaid block: this run, the baselines' median and band. None when the run has no points."""
    current = _shrink(curve.current, CHART_POINTS)
    if not any(v is not None for v in current):
        return None
    lines = [_filled(current)]
    for column in (curve.baseline_mid, curve.baseline_low, curve.baseline_high):
        shrunk = _shrink(column, CHART_POINTS)
        if any(v is not None for v in shrunk):
            lines.append(_filled(shrunk))
    values = [v for line in lines for v in line]
    low, high = min(values), max(values)
    pad = (high - low) * 0.05 or abs(high) * 0.05 or 1.0
    first, last = (curve.steps[0], curve.steps[-1]) if curve.steps else (1, len(current))
    body = [
        "```mermaid",
        '%%{init: {"themeVariables": {"xyChart": {"plotColorPalette": "' + _PALETTE + '"}}}}%%',
        "xychart-beta",
        f'    title "{title}"',
        f'    x-axis "step" {first} --> {max(last, first + 1)}',
        f'    y-axis "{unit}" {_num(max(0.0, low - pad) if low >= 0 else low - pad)} --> {_num(high + pad)}',
        *(f"    line [{', '.join(_num(v) for v in line)}]" for line in lines),
        "```",
    ]
    return "\n".join(body)


def without_warmup(curve: Curve, last_warmup_step: int | None = None) -> tuple[Curve, int]:
    """The curve less its leading warm-up points, and how many were left out.

    With `last_warmup_step` (the comparison's cut, result.warmup) the points up to that step go, so the chart
    shows the steps that were judged. Without it (an older result), a point is warm-up while this run's value, or
    the baselines' median, is over WARMUP_FACTOR times that line's median over the curve's second half, for at
    most a quarter of the points. The first-step check judges those steps; the charts show the rest.
    """
    n = len(curve.current)
    cut = 0
    if last_warmup_step is not None:
        cut = next((i for i, step in enumerate(curve.steps) if step > last_warmup_step), n)
        cut = cut if cut < n else 0  # nothing would be left: draw it all
    else:
        cut = _detected(curve, n)
    if not cut:
        return curve, 0
    fields = ("steps", "current", "baseline_low", "baseline_mid", "baseline_high")
    return curve.model_copy(update={f: getattr(curve, f)[cut:] for f in fields}), cut


def _detected(curve: Curve, n: int) -> int:
    cut = 0
    lines = [line for line in (curve.current, curve.baseline_mid) if len(line) == n]
    levels = [_median([v for v in line[n // 2 :] if v is not None and math.isfinite(v)]) for line in lines]
    while cut < n // 4 and any(
        level is not None and (v := line[cut]) is not None and v > WARMUP_FACTOR * level
        for line, level in zip(lines, levels, strict=True)
    ):
        cut += 1
    return cut


def sparkline(values: Sequence[float | None], points: int = SPARK_POINTS, *, also: Sequence[float | None] = ()) -> str:
    """▁▂▃▅▇ over the range of the values and of `also` (the line it is printed beside, so that the two share
    a scale: a run 30 % slower sits higher, not at the same height); a gap for a missing point; '' when there
    is nothing."""
    shrunk = _shrink(values, points)
    finite = [v for v in shrunk if v is not None]
    if not finite:
        return ""
    finite += [v for v in _shrink(also, points) if v is not None]
    low, high = min(finite), max(finite)
    span = high - low
    return "".join(" " if v is None else _BLOCKS[0 if span == 0 else min(7, int((v - low) / span * 8))] for v in shrunk)


def _shrink(values: Sequence[float | None], points: int) -> list[float | None]:
    """Bucket means down to at most `points` values (None where a bucket has no finite value)."""
    n = len(values)
    size = max(1, math.ceil(n / points))
    out: list[float | None] = []
    for start in range(0, n, size):
        bucket = [v for v in values[start : start + size] if v is not None and math.isfinite(v)]
        out.append(sum(bucket) / len(bucket) if bucket else None)
    return out


def _median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


def _filled(values: Sequence[float | None]) -> list[float]:
    """Mermaid has no gaps: a missing point takes its neighbour's value (the previous, else the next)."""
    first = next(v for v in values if v is not None)
    out, last = [], first
    for v in values:
        last = v if v is not None else last
        out.append(last)
    return out


def _num(value: float) -> str:
    """Plain decimals (Mermaid's parser takes no exponents), 6 places at most."""
    text = f"{value:.6f}".rstrip("0").rstrip(".")
    return "0" if text in ("", "-0") else text
