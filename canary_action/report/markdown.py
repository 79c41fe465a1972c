"""The plain markdown report `canary compare` prints: verdict, checks table, suspects, what changed.

Every string that came from a metrics file (config names, versions, op names, messages) goes through
`cell()`: it cannot end a table row, start a new line or inject markup.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from canary_action.compare.result import Check, CompareResult, Suspect

ICONS = {"pass": "✅", "fail": "❌", "warn": "⚠️", "skip": "⏭️", "not-comparable": "➖"}
VERDICTS = {"pass": "✅ pass", "regression": "❌ regression", "neutral": "➖ neutral", "crashed": "💥 crashed"}
_MARKUP = re.compile(r"([\\`\[\]<>|@])")  # what could end a cell, open a link or tag, or mention someone


def cell(text: object, limit: int = 200) -> str:
    """One table cell or inline fragment: control characters and newlines flattened, markup escaped."""
    flat = " ".join(str(text).split())
    clipped = flat if len(flat) <= limit else flat[: limit - 1] + "…"
    return _MARKUP.sub(r"\\\1", clipped)


def render_markdown(result: CompareResult) -> str:
    lines = [f"## rlhf-canary: {VERDICTS[result.verdict]} — {cell(result.current.config_name)}", ""]
    lines += [cell(result.reason, 400), ""]
    lines += ["| Check | Status | Baseline | Current | Change | Threshold |", "|---|---|---|---|---|---|"]
    lines += [_row(c) for c in result.checks]
    lines.append("")
    if result.suspects:
        lines += ["### Likely causes", ""]
        top = result.suspects[0]
        lines += [f"Most likely cause: **{top.category}** ({cell(top.summary)})", ""]
        for rank, suspect in enumerate(result.suspects[:3], 1):
            lines += _suspect(rank, suspect)
    lines += _changes(result)
    lines += _facts(result)
    return "\n".join(lines).rstrip() + "\n"


def bar(confidence: float) -> str:
    filled = round(10 * confidence)
    return "█" * filled + "░" * (10 - filled) + f" {100 * confidence:.0f} %"


def _row(check: Check) -> str:
    change = "—"
    if check.threshold_unit == "pp" and check.delta is not None:
        change = f"{check.delta:+.1f} pp"
    elif check.delta_pct is not None:
        change = f"{check.delta_pct:+.1f} %"
        if check.interval is not None:
            change += f" [{check.interval.low:+.1f}, {check.interval.high:+.1f}]"
    elif check.delta is not None:
        change = f"{check.delta:+.4g} {check.unit}".rstrip()
    threshold = "—" if check.threshold is None else f"{check.threshold:.4g} {check.threshold_unit}".rstrip()
    status = f"{ICONS[check.status]} {check.status}"
    return (
        f"| {cell(check.name)} | {status} | {_value(check.baseline, check.unit)} | "
        f"{_value(check.current, check.unit)} | {change} | {cell(threshold)} |"
    )


def _value(value: float | None, unit: str) -> str:
    if value is None:
        return "—"
    number = f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"
    return cell(f"{number} {unit}".rstrip())


def _suspect(rank: int, suspect: Suspect) -> list[str]:
    lines = [f"{rank}. **{suspect.category}** `{bar(suspect.confidence)}` — {cell(suspect.summary)}"]
    lines += [f"   - evidence: {cell(e)}" for e in suspect.evidence[:4]]
    lines += [f"   - try: {cell(s)}" for s in suspect.next_steps[:3]]
    return [*lines, ""]


def _changes(result: CompareResult) -> list[str]:
    sections = [
        ("Environment changes", ((c.field, c.baseline, c.current) for c in result.env_changes)),
        ("Config changes", ((c.field, c.baseline, c.current) for c in result.config_changes)),
        (
            "Profiled ops that moved (ms per step)",
            ((o.name, _ms(o.baseline_ms), _ms(o.current_ms)) for o in result.op_changes),
        ),
    ]
    lines: list[str] = []
    for title, rows in sections:
        table = _table(rows)
        if table:
            lines += ["<details><summary>" + title + "</summary>", "", *table, "", "</details>", ""]
    return lines


def _table(rows: Iterable[tuple[str, str | None, str | None]]) -> list[str]:
    body = [
        f"| {cell(a, 80)} | {cell(b if b is not None else '—', 80)} | {cell(c if c is not None else '—', 80)} |"
        for a, b, c in rows
    ]
    return ["| | Baseline | Current |", "|---|---|---|", *body] if body else []


def _facts(result: CompareResult) -> list[str]:
    current = result.current
    lines = [
        f"Current: {cell(current.run_id)} ({current.state}, {current.num_steps} steps"
        + (f", {cell(current.gpu)}" if current.gpu else f", {cell(current.device or 'unknown device')}")
        + (f", {cell(current.git_sha[:12])}" if current.git_sha else "")
        + ")",
    ]
    if result.baselines:
        shas = ", ".join(cell(b.git_sha[:12]) for b in result.baselines if b.git_sha) or "unknown"
        lines.append(f"Baselines: {len(result.baselines)} run(s), commits {shas}")
    if result.noise is not None:
        spread = result.noise.run_spread_pct
        lines.append(
            f"Noise: {result.noise.baseline_runs} baseline(s), run-to-run spread "
            + (f"{spread:.1f} %" if spread is not None else "unmeasured (one baseline)")
        )
    lines.append(f"Thresholds: {', '.join(cell(s) for s in result.threshold_sources) or result.tier}")
    lines += [f"Note: {cell(n, 300)}" for n in result.notes]
    return [*(line + "  " for line in lines)]


def _ms(value: float | None) -> str | None:
    return None if value is None else f"{value:.3f}"
