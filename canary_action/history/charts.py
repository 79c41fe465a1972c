"""The history's charts as inline SVG, drawn here: no charting library, nothing fetched, nothing run in the page.

One chart is one metric over a config's commits, oldest left, equally spaced (a commit is a step of the x axis,
not a span of time): a line through the values, the run's own noise band where it has one, a point per run linking
to its commit, a triangle where the run regressed, and above the plot a marker per merged pull request (linking to
it) or bisect finding, and a dashed line where the environment changed. Every text reaches the markup through
markupsafe's format, which escapes it; every link is built by the caller from validated fields.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from markupsafe import Markup

WIDTH: Final = 720
HEIGHT: Final = 240
_LEFT, _RIGHT, _TOP, _BOTTOM = 70, 14, 30, 34  # room for the y labels, the markers above, the dates below


@dataclass(frozen=True)
class Point:
    label: str
    """The x axis's label for it: the date (a rolled month: the month)."""
    value: float | None
    href: str
    """Its commit's page."""
    title: str
    """What a hover or a screen reader says of it."""
    low: float | None = None
    high: float | None = None
    regression: bool = False
    month: bool = False
    """A rolled-up month (store.py): drawn hollow."""
    marker_href: str | None = None
    marker_title: str | None = None
    """A merged pull request or a bisect finding here, drawn above the plot."""
    marker_kind: str = "pull-request"
    """pull-request (a diamond) or bisect (a square)."""
    env_change: str | None = None
    """What changed in the environment since the point before."""
    more_links: tuple[tuple[str, str], ...] = ()
    """(label, href) of its workflow run and merged pull request: in the chart's table (a point is one link)."""


@dataclass(frozen=True)
class Scale:
    low: float
    high: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Scale:
        low, high = min(values), max(values)
        pad = (high - low) * 0.08 or abs(high) * 0.05 or 1.0
        return cls(low - pad, high + pad)

    def y(self, value: float) -> float:
        return _TOP + (self.high - value) / (self.high - self.low) * (HEIGHT - _TOP - _BOTTOM)

    def ticks(self, count: int = 4) -> list[float]:
        raw = (self.high - self.low) / count
        step = 10 ** math.floor(math.log10(raw))
        step *= next(m for m in (1, 2, 2.5, 5, 10) if m * step >= raw)
        first = math.ceil(self.low / step) * step
        return [first + i * step for i in range(count + 2) if first + i * step <= self.high]


def x_of(index: int, count: int) -> float:
    if count == 1:
        return (_LEFT + WIDTH - _RIGHT) / 2
    return _LEFT + index * (WIDTH - _LEFT - _RIGHT) / (count - 1)


def chart(points: Sequence[Point], *, chart_id: str, title: str, unit: str) -> Markup:
    """The SVG of one metric; `points` oldest first. Points without a value keep their place on the x axis. A group,
    not an image: its points and markers are links a keyboard reaches, each with its own title."""
    valued = [p.value for p in points if p.value is not None]
    band = [v for p in points for v in (p.low, p.high) if v is not None]
    scale = Scale.of(valued + band) if valued else Scale(0.0, 1.0)
    n = len(points)
    parts = [_grid(scale, unit), _band(points, scale), _line(points, scale), _dates(points)]
    parts += [_env_line(x_of(i, n), p.env_change) for i, p in enumerate(points) if p.env_change]
    parts += [_marker(x_of(i, n), p) for i, p in enumerate(points) if p.marker_href and p.marker_title]
    parts += [_point(x_of(i, n), scale.y(p.value), p) for i, p in enumerate(points) if p.value is not None]
    return Markup(
        '<svg class="chart" id="{id}" viewBox="0 0 {w} {h}" role="group" aria-labelledby="{id}-title" '
        'data-points="{count}"><title id="{id}-title">{title}</title>{body}</svg>'
    ).format(id=chart_id, w=WIDTH, h=HEIGHT, count=len(valued), title=title, body=Markup("").join(parts))


def sparkline(values: Sequence[float], *, label: str) -> Markup:
    """A small line of the last values (the index's cards): no axes, no links."""
    if len(values) < 2:
        return Markup("")
    scale = Scale.of(values)
    width, height = 160, 36
    step = width / (len(values) - 1)
    span = scale.high - scale.low
    coords = " ".join(f"{i * step:.1f},{2 + (scale.high - v) / span * (height - 4):.1f}" for i, v in enumerate(values))
    return Markup(
        '<svg class="spark" viewBox="0 0 {w} {h}" role="img" aria-label="{label}"><polyline points="{coords}" /></svg>'
    ).format(w=width, h=height, label=label, coords=coords)


def format_value(value: float, unit: str) -> str:
    """A figure for people: 3 significant digits, the unit after it."""
    magnitude = abs(value)
    digits = 0 if magnitude >= 100 else 1 if magnitude >= 10 else 2 if magnitude >= 1 else 3
    text = f"{value:,.{digits}f}" if magnitude < 1e6 else f"{value:.3g}"
    return f"{text} {unit}".strip()


def _grid(scale: Scale, unit: str) -> Markup:
    rows = []
    for tick in scale.ticks():
        y = scale.y(tick)
        rows.append(
            Markup('<line class="grid" x1="{l}" x2="{r}" y1="{y:.1f}" y2="{y:.1f}" />'
                   '<text class="tick" x="{tx}" y="{ty:.1f}" text-anchor="end">{label}</text>').format(
                l=_LEFT, r=WIDTH - _RIGHT, y=y, tx=_LEFT - 6, ty=y + 4, label=format_value(tick, unit)
            )
        )  # fmt: skip
    return Markup("").join(rows)


def _band(points: Sequence[Point], scale: Scale) -> Markup:
    """The noise band: one polygon per run of consecutive points that have one."""
    n, shapes, run = len(points), [], []
    for i, p in enumerate([*points, None]):
        if p is not None and p.low is not None and p.high is not None:
            run.append((x_of(i, n), scale.y(p.high), scale.y(p.low)))
            continue
        if len(run) > 1:
            upper = [f"{x:.1f},{hi:.1f}" for x, hi, _ in run]
            lower = [f"{x:.1f},{lo:.1f}" for x, _, lo in reversed(run)]
            shapes.append(Markup('<polygon class="band" points="{}" />').format(" ".join(upper + lower)))
        run = []
    return Markup("").join(shapes)


def _line(points: Sequence[Point], scale: Scale) -> Markup:
    """The values joined; a point without a value breaks the line."""
    n, path, pen_down = len(points), [], False
    for i, p in enumerate(points):
        if p.value is None:
            pen_down = False
            continue
        path.append(f"{'L' if pen_down else 'M'}{x_of(i, n):.1f},{scale.y(p.value):.1f}")
        pen_down = True
    return Markup('<path class="line" d="{}" />').format(" ".join(path)) if path else Markup("")


def _dates(points: Sequence[Point]) -> Markup:
    """The first, middle and last points' labels under the plot."""
    n = len(points)
    shown = sorted({0, n // 2, n - 1}) if n > 2 else list(range(n))
    anchors = {0: "start", n - 1: "end"}
    return Markup("").join(
        Markup('<text class="tick" x="{x:.1f}" y="{y}" text-anchor="{a}">{label}</text>').format(
            x=x_of(i, n), y=HEIGHT - 10, a=anchors.get(i, "middle") if n > 1 else "middle", label=points[i].label
        )
        for i in shown
    )


def _point(x: float, y: float, p: Point) -> Markup:
    if p.regression:  # a triangle, not only a colour
        shape = Markup('<path class="regression" d="M{x:.1f},{t:.1f} L{r:.1f},{b:.1f} L{l:.1f},{b:.1f} Z" />').format(
            x=x, t=y - 6, r=x + 5.5, b=y + 4, l=x - 5.5
        )
    else:
        kind = "month" if p.month else "run"
        shape = Markup('<circle class="{k}" cx="{x:.1f}" cy="{y:.1f}" r="3.2" />').format(k=kind, x=x, y=y)
    return Markup('<a class="point" href="{href}"><title>{title}</title>{shape}</a>').format(
        href=p.href, title=p.title, shape=shape
    )


def _marker(x: float, p: Point) -> Markup:
    """Above the plot, linking to it: a diamond for a merged pull request, a square for a bisect finding."""
    y = _TOP - 14
    if p.marker_kind == "bisect":
        shape = Markup('<rect x="{l:.1f}" y="{t}" width="9" height="9" />').format(l=x - 4.5, t=y - 4.5)
    else:
        shape = Markup('<path d="M{x:.1f},{t} L{r:.1f},{y} L{x:.1f},{b} L{l:.1f},{y} Z" />').format(
            x=x, t=y - 5, b=y + 5, r=x + 5, l=x - 5, y=y
        )
    return Markup(
        '<a class="marker {kind}" href="{href}"><title>{title}</title><line class="marker-stem" x1="{x:.1f}" '
        'x2="{x:.1f}" y1="{y1}" y2="{y2}" />{shape}</a>'
    ).format(kind=p.marker_kind, href=p.marker_href, title=p.marker_title, x=x, y1=y + 5, y2=HEIGHT - _BOTTOM,
             shape=shape)  # fmt: skip


def _env_line(x: float, change: str) -> Markup:
    return Markup(
        '<g class="env"><title>environment changed: {change}</title><line x1="{x:.1f}" x2="{x:.1f}" y1="{t}" '
        'y2="{b}" /><text x="{tx:.1f}" y="{ty}">env</text></g>'
    ).format(change=change, x=x, t=_TOP, b=HEIGHT - _BOTTOM, tx=x + 3, ty=_TOP + 10)
