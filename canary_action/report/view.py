"""The view model: a CompareResult turned into ready-to-print, escaped markdown pieces.

Templates only loop and branch over this; every number is formatted and every untrusted string escaped
here (escape.text), so the five templates agree on what a figure looks like and none can forget to escape.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Final

from canary_action.compare.curves import HELDOUT, PAIR_LOSS
from canary_action.compare.op_names import short_op_name
from canary_action.compare.result import (
    Change,
    Check,
    CompareResult,
    Curve,
    OpChange,
    Suspect,
    Warmup,
)
from canary_action.metrics import schema
from canary_action.metrics.schema import Distributed, RankSummary
from canary_action.report import charts
from canary_action.report.correctness import correctness_lines
from canary_action.report.escape import Md, code, link, mermaid_label, one_line, slug, text
from canary_action.report.facts import facts, paired_line

ICONS: Final = {"pass": "✅", "fail": "❌", "warn": "⚠️", "skip": "⏭️", "not-comparable": "➖"}
VERDICT_ICONS: Final = {"pass": "✅", "regression": "❌", "neutral": "➖", "crashed": "💥"}
MAX_DIFF_ROWS: Final = 60  # a diff of hundreds of keys: the first 60 and a count
MAX_SUSPECTS_SHOWN: Final = 3
MAX_RANK_ROWS: Final = 64  # a 512-GPU job: the first ranks, the slowest, and a count
CURVES: Final = {
    schema.STEP_TIME_S: ("Step time per step", "seconds"),
    schema.LOSS: ("Loss per step", "loss"),
    PAIR_LOSS: ("Loss per step, both sides (red: this PR, dark blue: base)", "loss"),  # <= 60: a chart title
    HELDOUT: ("Held-out figure at the evaluated steps (red: this run, dark blue: the reference)", ""),
}


@dataclass(frozen=True)
class Links:
    """Where the full story is; built by the action from the GitHub context, or by `canary report --repo --pr`
    (None: not known)."""

    workflow_run: str | None = None
    artifacts: str | None = None
    baseline_run: str | None = None
    artifact_name: str | None = None
    baseline_snippet: str | None = None
    """The workflow YAML that would create a baseline, shown when there is none."""
    repository: str | None = None
    """owner/name, already checked (`canary report --repo`): linked, with the pull request when there is one."""
    pull_request: int | None = None
    server_url: str = "https://github.com"
    history: str | None = None
    """The config's page of the published history site (the action's history-url input; docs/history.md)."""


@dataclass(frozen=True)
class CheckRow:
    icon: Md
    name: Md
    status: Md
    baseline: Md
    current: Md
    change: Md
    threshold: Md
    message: Md


@dataclass(frozen=True)
class SuspectView:
    rank: int
    category: Md
    bar: Md
    summary: Md
    evidence: list[Md]
    next_steps: list[Md]


@dataclass(frozen=True)
class Table:
    title: Md
    rows: list[tuple[Md, Md, Md]]
    more: int
    """Rows left out (MAX_DIFF_ROWS)."""


@dataclass(frozen=True)
class Chart:
    title: Md
    mermaid: Md | None
    spark_current: Md
    spark_baseline: Md


@dataclass(frozen=True)
class StepRow:
    step: int
    cells: list[Md]


@dataclass(frozen=True)
class RankTable:
    """A multi-process run's ranks: rank, step time, compute, comm, peak memory (MAX_RANK_ROWS at most)."""

    rows: list[list[Md]]
    more: int
    """Ranks left out."""


@dataclass(frozen=True)
class ReportView:
    marker: Md
    """The hidden marker of the sticky comment: one per config."""
    title: Md
    reason: Md
    counts: Md
    checks: list[CheckRow]
    top_suspect: Md | None
    suspects: list[SuspectView]
    charts: list[Chart]
    chart_legend: Md
    step_header: list[Md]
    step_rows: list[StepRow]
    diffs: list[Table]
    """env changes, config changes, profiled ops: the collapsible detail."""
    facts: list[Md]
    links: list[Md]
    notes: list[Md]
    unjudged: list[Md]
    """Each check that was asked for but not judged, with why and the fix (what keeps a verdict from pass)."""
    why: list[Md]
    """How the checks were judged, in words: each widened limit with its reason, the warm-up cut, the checks
    that do not apply to this run."""
    show_charts: bool = True
    show_step_detail: bool = True
    show_env: bool = True
    how_to_baseline: Md | None = None
    """A fenced YAML block: the workflow that creates a baseline (only when the result has none)."""
    dropped: Md | None = None
    """Set when parts were left out to fit a size limit: what, and where the full report is."""
    ranks: RankTable | None = None
    """The per-rank table of a multi-process run (None: one process). Small, so never dropped for size."""
    baseline_kind: Md | None = None
    """One line under the verdict when the baseline was not the usual artifact history (a lockstep pair)."""
    correctness: list[Md] = field(default_factory=list)
    """Under the verdict: the pair's numerics and the held-out evaluation, in a line each (report/correctness.py)."""

    def degraded(self, level: int, note: Md) -> ReportView:
        """A copy with the first `level` parts dropped, in the fixed order charts, per-step detail, env diff."""
        return replace(
            self, show_charts=level < 1, show_step_detail=level < 2, show_env=level < 3, dropped=note if level else None
        )


def sticky_marker(config_name: str) -> str:
    """The sticky comment's first line: hidden, one per config, and no config name can close it early."""
    return f"<!-- rlhf-canary:sticky:{slug(config_name)} -->"


def build_view(result: CompareResult, links: Links | None = None) -> ReportView:
    links = links or Links()
    failed = sum(1 for c in result.checks if c.status == "fail")
    warned = sum(1 for c in result.checks if c.status == "warn")
    passed = sum(1 for c in result.checks if c.status == "pass")
    unjudged = sum(1 for c in result.checks if c.status in ("skip", "not-comparable") and c.fix is not None)
    idle = len(result.checks) - failed - warned - passed - unjudged
    config_name = result.current.config_name
    top = result.suspects[0] if result.suspects else None
    chart_list = [c for c in (_chart(curve, result.warmup) for curve in result.curves) if c is not None]
    header, rows = _step_detail(result.curves)
    return ReportView(
        marker=Md(sticky_marker(result.current.config_name)),
        title=Md(f"{VERDICT_ICONS[result.verdict]} rlhf-canary **{result.verdict}** — `{code(config_name)}`"),
        reason=text(result.reason, 400),
        counts=Md(
            f"{failed} failed · {warned} warned · {passed} passed · {unjudged} not judged"
            + (f" · {idle} not applicable" if idle else "")
            + _interval_levels(result.checks)
        ),
        checks=[_row(c) for c in result.checks],
        top_suspect=Md(f"Most likely cause: **{top.category}** ({100 * top.confidence:.0f} %)") if top else None,
        suspects=[_suspect(i, s) for i, s in enumerate(result.suspects[:MAX_SUSPECTS_SHOWN], 1)],
        charts=chart_list,
        chart_legend=Md(charts.LEGEND),
        step_header=header,
        step_rows=rows,
        diffs=[t for t in _diffs(result) if t.rows],
        facts=facts(result),
        links=[m for m in _links(links) if m is not None],
        notes=[text(n, 300) for n in result.notes],
        unjudged=[
            Md(f"**{text(c.name, 60)}** not judged: {text(c.message, 300)}. Fix: {text(c.fix, 300)}.")
            for c in result.checks
            if c.fix is not None and c.status in ("skip", "not-comparable")
        ],
        why=_why(result),
        how_to_baseline=None if result.baselines else _yaml_block(links.baseline_snippet),
        ranks=_ranks(result.current.distributed),
        baseline_kind=paired_line(result),
        correctness=correctness_lines(result),
    )


def _why(result: CompareResult) -> list[Md]:
    lines = []
    for c in result.checks:
        if c.threshold_note is not None and c.threshold_note.startswith("widened"):
            lines.append(Md(f"**{text(c.name, 60)}** limit {text(c.threshold_note, 300)}."))
    if result.warmup is not None:
        lines.append(Md(f"Warm-up: {text(result.warmup.note, 300)}."))
    idle = [c for c in result.checks if c.status == "skip" and c.fix is None]
    if idle:
        parts = ", ".join(f"{text(c.name, 60)} ({text(c.message, 160)})" for c in idle)
        lines.append(Md(f"Skipped, not applicable to this run: {parts}."))
    return lines


def _row(check: Check) -> CheckRow:
    return CheckRow(
        icon=Md(ICONS[check.status]),
        name=text(check.name, 60),
        status=Md(check.status),
        baseline=_value(check.baseline, check.unit),
        current=_value(check.current, check.unit),
        change=_change(check),
        threshold=_threshold(check),
        message=text(check.message, 300),
    )


def _interval_levels(checks: Sequence[Check]) -> str:
    """What the brackets in the Change column are: ' · [low, high]: 95 % confidence intervals' (thresholds'
    confidence_level), or '' when no check has one."""
    levels = sorted({c.interval.level for c in checks if c.interval is not None})
    if not levels:
        return ""
    return f" · [low, high]: {' / '.join(f'{100 * level:.4g} %' for level in levels)} confidence intervals"


def _change(check: Check) -> Md:
    # A share compared in points, or a level in % with no relative change (rank imbalance): points.
    points = check.threshold_unit == "pp" or (check.unit == "%" and check.delta_pct is None)
    if points and check.delta is not None:
        return Md(f"{_signed(check.delta)} pp")
    if check.delta_pct is not None:
        out = f"{_signed(check.delta_pct)} %"
        if check.interval is not None:
            out += f" [{_signed(check.interval.low)}, {_signed(check.interval.high)}]"
        return Md(out)
    if check.delta is not None:
        return Md(f"{_number(check.delta, signed=True)} {text(check.unit, 20)}".rstrip())
    return Md("—")


def _threshold(check: Check) -> Md:
    if check.threshold is None:
        return Md("—")
    # Limits read like the change they bound: "+10 %" for growth, a minus sign for a drop; a learning limit is an
    # allowed change in either named direction: "Δ 0.2".
    sign = (
        ("−" if check.threshold < 0 else "+")
        if check.threshold_unit in ("%", "MiB", "pp")
        else "Δ "
        if check.group == "learning" and check.threshold_unit != "% of steps"
        else ""
    )
    out = f"{sign}{_number(abs(check.threshold))} {text(check.threshold_unit, 20)}".rstrip()
    return Md(out + (" (widened)" if check.threshold_note and check.threshold_note.startswith("widened") else ""))


def _value(value: float | None, unit: str) -> Md:
    if value is None:
        return Md("—")
    return Md(f"{_number(value)} {text(unit, 20)}".rstrip())


def _signed(value: float) -> str:
    """+1.5, -0.3, and +0.0 for anything that rounds to zero (never "-0.0", which reads as a drop)."""
    out = f"{value:+.1f}"
    return "+0.0" if out == "-0.0" else out


def _number(value: float, *, signed: bool = False) -> str:
    if not math.isfinite(value):
        return "—"
    sign = "+" if signed and value > 0 else ""
    if abs(value) >= 1000:
        return f"{sign}{value:,.0f}"
    return f"{sign}{value:.4g}"


def _suspect(rank: int, suspect: Suspect) -> SuspectView:
    filled = round(10 * suspect.confidence)
    return SuspectView(
        rank=rank,
        category=Md(suspect.category),
        bar=Md("█" * filled + "░" * (10 - filled) + f" {100 * suspect.confidence:.0f} %"),
        summary=text(suspect.summary, 300),
        # A blank item would print as a bare "   -", which under the summary line is a setext heading rule.
        evidence=[text(e, 300) for e in suspect.evidence if one_line(e)][:5],
        next_steps=[text(s, 300) for s in suspect.next_steps[:3]],
    )


def _chart(curve: Curve, warmup: Warmup | None) -> Chart | None:
    title, unit = CURVES.get(curve.name, (curve.name, ""))
    if curve.name == schema.STEP_TIME_S:
        curve, cut = charts.without_warmup(curve, warmup.steps if warmup is not None else None)
        if cut:
            title += f" (from step {curve.steps[0]}: warm-up left out)"
    current = charts.sparkline(curve.current, also=curve.baseline_mid)
    if not current:
        return None
    block = charts.mermaid(curve, mermaid_label(title), unit)  # a curve's name is the result file's: no raw text
    return Chart(
        title=text(title),
        mermaid=Md(block) if block else None,
        spark_current=Md(current),
        spark_baseline=Md(charts.sparkline(curve.baseline_mid, also=curve.current)),
    )


def _step_detail(curves: Sequence[Curve]) -> tuple[list[Md], list[StepRow]]:
    """Per-step figures (downsampled, as in the charts): step, then this run and the baseline per curve."""
    usable = [c for c in curves if c.steps]
    if not usable:
        return [], []
    header = [Md("step")]
    by_step: dict[int, list[Md]] = {}
    for curve in usable:
        name = CURVES.get(curve.name, (curve.name, ""))[0]
        header += [text(f"{name}: this run"), text(f"{name}: baseline")]
    steps = sorted({s for c in usable for s in c.steps})
    for curve in usable:
        lookup = {s: (cur, mid) for s, cur, mid in zip(curve.steps, curve.current, curve.baseline_mid, strict=True)}
        for step in steps:
            cur, mid = lookup.get(step, (None, None))
            by_step.setdefault(step, []).extend([_value(cur, ""), _value(mid, "")])
    return header, [StepRow(step=s, cells=by_step[s]) for s in steps]


def _diffs(result: CompareResult) -> list[Table]:
    return [
        _table("Environment changes", [_change_row(c) for c in result.env_changes]),
        _table("Config changes", [_change_row(c) for c in result.config_changes]),
        _table("Profiled ops that moved (ms per step)", [_op_row(o) for o in result.op_changes]),
    ]


def _table(title: str, rows: list[tuple[Md, Md, Md]]) -> Table:
    return Table(title=Md(title), rows=rows[:MAX_DIFF_ROWS], more=max(0, len(rows) - MAX_DIFF_ROWS))


def _change_row(change: Change) -> tuple[Md, Md, Md]:
    return text(change.field, 80), _maybe(change.baseline), _maybe(change.current)


def _op_row(op: OpChange) -> tuple[Md, Md, Md]:
    ms = [Md("—") if v is None else Md(f"{v:.3f}") for v in (op.baseline_ms, op.current_ms)]
    return text(short_op_name(op.name), 80), ms[0], ms[1]


def _maybe(value: str | None) -> Md:
    return Md("—") if value is None else text(value, 80)


def _ranks(dist: Distributed | None) -> RankTable | None:
    if dist is None or not dist.ranks:
        return None
    ranks = sorted(dist.ranks, key=lambda r: r.rank)
    shown = ranks[:MAX_RANK_ROWS]
    slowest = next((r for r in ranks if r.rank == dist.slowest_rank), None)
    if slowest is not None and slowest not in shown:  # past the cut: the one rank a reader looks for
        shown = [*shown[: MAX_RANK_ROWS - 1], slowest]
    return RankTable(rows=[_rank_row(r, r.rank == dist.slowest_rank) for r in shown], more=len(ranks) - len(shown))


def _rank_row(rank: RankSummary, slowest: bool) -> list[Md]:
    if rank.peak_allocated_mib is not None:
        memory = _value(rank.peak_allocated_mib, "MiB")
    elif rank.host_rss_peak_mib is not None:
        memory = Md(f"{_value(rank.host_rss_peak_mib, 'MiB')} (host RSS)")
    else:
        memory = Md("—")
    return [
        Md(f"{rank.rank}{' (slowest)' if slowest else ''}"),
        _value(rank.step_time_median_s, "s"),
        _value(rank.compute_median_s, "s"),
        _value(rank.comm_median_s, "s"),
        memory,
    ]


def _links(links: Links) -> list[Md | None]:
    artifact = f"artifact {links.artifact_name}" if links.artifact_name else "artifacts"
    pull_request = None
    if links.repository is not None:
        where = f"{links.server_url}/{links.repository}"
        pull_request = (
            link(links.repository, where)
            if links.pull_request is None
            else link(f"{links.repository}#{links.pull_request}", f"{where}/pull/{links.pull_request}")
        )
    return [
        pull_request,
        link("workflow run", links.workflow_run),
        link(artifact, links.artifacts),
        link("baseline run", links.baseline_run),
        link("history", links.history),
    ]


_SNIPPET_SAFE: Final = re.compile(r"[ -_a-}\n]*")  # printable ASCII and newlines, minus backtick and tilde


def _yaml_block(snippet: str | None) -> Md | None:
    """A snippet the action built, in a fenced block; refused (None) if it could close the fence or hold HTML."""
    if not snippet or not _SNIPPET_SAFE.fullmatch(snippet) or "<" in snippet:
        return None
    return Md(f"```yaml\n{snippet.strip(chr(10))}\n```")
