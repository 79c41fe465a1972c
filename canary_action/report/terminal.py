"""The report for a person at a terminal (`canary compare`, `canary report --format terminal`): what the GitHub
formats say, as text that reads in a terminal or a CI log.

Built from the same view model as the markdown (so every figure reads the same), with the markdown taken off
(escape.plain: `step_time`, not `step\\_time`), tables as aligned columns, sparklines instead of charts, no HTML,
and one blank line between parts. Colour (verdict and status: red a regression or a failed check, green a pass,
yellow neutral or a warning) only where `use_colour` says so. Every string from a result file went through
escape.text, whose one_line removes control characters: no result can move the cursor or recolour the terminal.
"""

from __future__ import annotations

import os
import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final, TextIO

import click

from canary_action.compare.result import CompareResult
from canary_action.report.escape import one_line, plain
from canary_action.report.view import CheckRow, Links, ReportView, build_view

VERDICT_COLOURS: Final = {"regression": "red", "crashed": "red", "pass": "green", "neutral": "yellow"}
STATUS_COLOURS: Final = {"fail": "red", "warn": "yellow", "pass": "green"}
HEADER: Final = ("Check", "Status", "Baseline", "Current", "Change", "Threshold")
_LINK: Final = re.compile(r"\[((?:\\.|[^\]\\])*)\]\((https://[^)\s]*)\)")


def use_colour(stream: TextIO, env: Mapping[str, str] | None = None) -> bool:
    """Colour when `stream` is a terminal, unless NO_COLOR is set (no-color.org); FORCE_COLOR set forces it, even
    into a pipe (force-color.org), and wins over NO_COLOR. An empty value counts as unset."""
    env = os.environ if env is None else env
    if env.get("FORCE_COLOR"):
        return True
    if env.get("NO_COLOR"):
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def render_terminal(result: CompareResult, links: Links | None = None, *, colour: bool = False) -> str:
    view = build_view(result, links)
    paint = _Paint(colour)
    verdict = paint(result.verdict.upper(), VERDICT_COLOURS[result.verdict], bold=True)
    head = [f"rlhf-canary {verdict} — {one_line(result.current.config_name, 80)}", plain(view.reason)]
    if view.baseline_kind is not None:
        head.append(plain(view.baseline_kind))
    head += [plain(line) for line in view.correctness]
    parts = [
        head,
        _how_to_baseline(view, links),
        [*_table(HEADER, [_check_cells(c) for c in view.checks], paint), "", plain(view.counts)],
        _bullets("Not judged", view.unjudged),
        _bullets("How this was judged", view.why),
        _suspects(view),
        [f"{plain(c.title)}: this run {plain(c.spark_current)}" + (f" · baseline {plain(c.spark_baseline)}"
         if c.spark_baseline else "") for c in view.charts],
        _ranks(view, paint),
        *[_diff(title=plain(t.title), rows=t.rows, more=t.more, paint=paint) for t in view.diffs],
        [*[plain(f) for f in view.facts], *[f"Note: {plain(n)}" for n in view.notes]],
        [_LINK.sub(lambda m: f"{plain(m.group(1))}: {m.group(2)}", link) for link in view.links],
    ]  # fmt: skip
    out = "\n\n".join("\n".join(line.rstrip() for line in part) for part in parts if part) + "\n"
    return re.sub(r"\n{3,}", "\n\n", out)


@dataclass(frozen=True)
class _Paint:
    colour: bool

    def __call__(self, value: str, fg: str | None, *, bold: bool = False) -> str:
        if not self.colour or fg is None:
            return value
        return click.style(value, fg=fg, bold=bold or None)


def _check_cells(check: CheckRow) -> list[str]:
    return [plain(v) for v in (check.name, check.status, check.baseline, check.current, check.change, check.threshold)]


def _table(
    header: Sequence[str], rows: Sequence[Sequence[str]], paint: _Paint, status_column: int | None = 1
) -> list[str]:
    """Columns padded to their widest cell (East Asian wide characters count two), two spaces apart; the status
    column coloured after padding, so that the escape codes take no width."""
    widths = [max([_width(h), *(_width(r[i]) for r in rows)]) for i, h in enumerate(header)]

    def line(cells: Sequence[str], *, coloured: bool) -> str:
        out = []
        for i, cell in enumerate(cells):
            padded = cell + " " * (widths[i] - _width(cell))
            if coloured and i == status_column:
                padded = paint(padded, STATUS_COLOURS.get(cell))
            out.append(padded)
        return "  ".join(out)

    return [line(header, coloured=False), *(line(r, coloured=True) for r in rows)]


def _width(cell: str) -> int:
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 0 if unicodedata.combining(c) else 1 for c in cell)


def _bullets(title: str, items: Sequence[str]) -> list[str]:
    return [f"{title}:", *(f"  - {plain(i)}" for i in items)] if items else []


def _how_to_baseline(view: ReportView, links: Links | None) -> list[str]:
    if view.how_to_baseline is None or links is None or links.baseline_snippet is None:
        return []
    snippet = links.baseline_snippet.strip("\n").splitlines()
    return ["To create a baseline, run this workflow on the default branch once (push, or run it by hand):", "",
            *(f"    {line}" for line in snippet)]  # fmt: skip


def _suspects(view: ReportView) -> list[str]:
    if not view.suspects:
        return []
    lines = ["Likely causes:"]
    for s in view.suspects:
        lines.append(f"  {s.rank}. {plain(s.category)}  {plain(s.bar)}  {plain(s.summary)}")
        lines += [f"       - {plain(e)}" for e in s.evidence]
        lines += [f"       ➜ {plain(n)}" for n in s.next_steps]
    return lines


def _ranks(view: ReportView, paint: _Paint) -> list[str]:
    if view.ranks is None:
        return []
    header = ("Rank", "Step time", "Compute", "Comm", "Peak memory")
    rows = [[plain(cell) for cell in row] for row in view.ranks.rows]
    more = [f"… and {view.ranks.more} more"] if view.ranks.more else []
    return ["Per rank:", *_table(header, rows, paint, status_column=None), *more]


def _diff(*, title: str, rows: Sequence[tuple[str, str, str]], more: int, paint: _Paint) -> list[str]:
    if not rows:
        return []
    cells = [[plain(cell) for cell in row] for row in rows]
    tail = [f"… and {more} more"] if more else []
    return [f"{title}:", *_table(("", "Baseline", "Current"), cells, paint, status_column=None), *tail]
