"""Reports fit GitHub's size limits: over budget, parts go in a fixed order (charts, per-step detail, the env
diff), the report says so and where the full one is, and as a last resort it is cut at a line.

Three kinds of evidence: a long run (5,000 steps, 300 algo/* series, hundreds of env/config changes and ops,
long messages) through every format; views with one part blown up past the budget, which must drop exactly
that part and the ones before it; and a report padded to exactly its budget, which must stay whole until one
character more.
"""

from __future__ import annotations

import math
import re
from dataclasses import replace
from typing import Final

import pytest

from canary_action.compare.result import Change, Check, CompareResult, Curve, OpChange
from canary_action.compare.verdict import compare
from canary_action.config.thresholds import TIERS
from canary_action.metrics import schema
from canary_action.report.escape import Md
from canary_action.report.render import DROP_ORDER, TARGETS, Kind, render, render_view
from canary_action.report.view import ReportView, StepRow, Table, build_view
from tests import gfm
from tests.report_cases import LINKS, failing
from tests.unit.test_compare import run

BUDGETED: Final[tuple[Kind, ...]] = ("comment", "check-summary", "check-text", "summary")
DEGRADING: Final[tuple[Kind, ...]] = ("comment", "check-text", "summary")  # those with charts, steps and env diff
CHARTS, STEPS, ENV = DROP_ORDER


def long_run(num_steps: int = 5_000, num_algo: int = 300) -> CompareResult:
    """A long, wide regression, built directly: `compare` bounds what it writes; a result file need not."""
    base = failing()
    steps = list(range(1, num_steps + 1, math.ceil(num_steps / 120)))  # compare keeps at most 120 points

    def curve(name: str, level: float) -> Curve:
        mid = [level * (1 + 0.01 * (i % 7)) for i in range(len(steps))]
        return Curve(
            name=name, steps=steps, current=[level * (1 + 0.013 * (i % 11)) for i in range(len(steps))],
            baseline_low=[m * 0.95 for m in mid], baseline_mid=mid, baseline_high=[m * 1.05 for m in mid],
        )  # fmt: skip

    def long(i: int) -> str:
        return (f"algo/metric_{i:03d} <tail mean> moved & drifted " * 8)[:300]  # `<` and `&` grow when escaped

    algo_checks = [
        Check(
            name=f"algo/metric_{i:03d}/mean", group="learning", status=("warn", "pass", "fail")[i % 3], unit="",
            baseline=1.0 + i, current=1.2 + i, delta=0.2, delta_pct=20 / (1 + i), threshold=20.0,
            threshold_unit="%", message=long(i),
        )
        for i in range(num_algo)
    ]  # fmt: skip
    return base.model_copy(
        update={
            "current": base.current.model_copy(update={"num_steps": num_steps}),
            "checks": [*base.checks, *algo_checks],
            "curves": [
                curve(schema.STEP_TIME_S, 0.1),
                curve(schema.LOSS, 2.0),
                *(curve(f"algo/metric_{i:03d}/mean", 1.0 + i) for i in range(num_algo)),
            ],
            "env_changes": [
                Change(field=f"lib_{i:03d}", baseline=f"1.{i}.0+<cu128>", current=f"2.{i}.0+<cu128>")
                for i in range(200)
            ],
            "config_changes": [
                Change(field=f"trainer.option_{i:03d}", baseline="<" * 80, current="&" * 80) for i in range(400)
            ],
            "op_changes": [
                OpChange(
                    name=f"aten::_flash_attention_backward_<{i}>" + "_" * 60,
                    baseline_ms=1.0,
                    current_ms=2.0,
                    delta_ms=1.0,
                    device=True,
                )
                for i in range(300)
            ],
            "suspects": [
                s.model_copy(
                    update={"evidence": [long(i) for i in range(8)], "next_steps": [long(i) for i in range(4)]}
                )
                for s in base.suspects * 3
            ],
            "notes": [long(i) for i in range(50)],
        }
    )


@pytest.fixture(scope="module")
def long_view() -> ReportView:
    return build_view(long_run(), LINKS)


@pytest.fixture(scope="module")
def small_view() -> ReportView:
    return build_view(failing(), LINKS)


def shown_parts(out: str) -> set[str]:
    present = {
        CHARTS: "```mermaid" in out,
        STEPS: "<summary>Per-step detail</summary>" in out,
        ENV: "<summary>Environment changes</summary>" in out,
    }
    return {part for part, here in present.items() if here}


def note(kind: Kind, dropped: tuple[str, ...]) -> str:
    listed = dropped[0] if len(dropped) == 1 else ", ".join(dropped[:-1]) + " and " + dropped[-1]
    return f"> ✂️ To fit {TARGETS[kind].limit_name}, this report leaves out {listed}; the full report is in "


def assert_fits(out: str, kind: Kind) -> None:
    target = TARGETS[kind]
    assert target.budget is not None
    assert target.measure(out) <= target.budget
    assert gfm.table_problems(out) == []
    assert out.count("<details>") == out.count("</details>")


@pytest.mark.parametrize(("kind", "degraded"), [("comment", True), ("check-summary", False), ("check-text", True),
                                               ("summary", True)])  # fmt: skip
def test_a_long_run_fits_every_budget_and_says_where_the_full_report_is(
    long_view: ReportView, kind: Kind, degraded: bool
) -> None:
    out = render_view(long_view, kind)
    assert_fits(out, kind)
    assert (f"the full report is in {TARGETS[kind].full_report}." in out) == degraded


def test_the_job_summary_of_a_long_run_leaves_out_only_the_charts(long_view: ReportView) -> None:
    out = render_view(long_view, "summary")
    assert note("summary", (CHARTS,)) in out
    assert shown_parts(out) == {STEPS, ENV}
    assert re.search(r"^- Step time per step.*?: this run `", out, re.M)  # the sparklines stand in for the charts
    assert "| algo/metric\\_299/mean | ❌ fail |" in out  # every check message is still there


def test_the_pr_comment_of_a_long_run_leaves_out_all_three_then_is_cut(long_view: ReportView) -> None:
    out = render_view(long_view, "comment")
    assert out.splitlines()[0] == "<!-- rlhf-canary:sticky:sft-smoke -->"
    assert note("comment", DROP_ORDER) in out
    assert shown_parts(out) == set()
    assert out.endswith(
        "\n\n… cut to fit a PR comment's 65,536 characters; the full report is in the check run's details and the "
        "job summary.\n"
    )


def test_the_markdown_report_has_no_budget(long_view: ReportView) -> None:
    out = render_view(long_view, "markdown")
    assert "leaves out" not in out
    assert "cut to fit" not in out
    assert "| lib\\_059 |" in out
    assert "… and 140 more" in out  # the env diff shows its first 60 rows and a count


def test_a_real_5000_step_run_with_300_algo_series_fits_whole() -> None:
    """What `compare` writes is bounded (curves downsampled, checks fixed, diffs capped): no cut, nothing left out."""
    algo = {f"algo/metric_{i:03d}": [math.sin(s / (i + 1)) for s in range(5_000)] for i in range(300)}
    options = {f"option_{j:03d}": j for j in range(300)}
    baselines = [run(100 + i, num_steps=5_000, series=algo, config={"trainer": options}) for i in range(2)]
    current = run(1, num_steps=5_000, step_time_s=0.12, series=algo, env={"torch": "2.14.0+cu128"},
                  config={"trainer": {k: v + 1 for k, v in options.items()}})  # fmt: skip
    result = compare(current, baselines, TIERS["default"])
    assert len(result.config_changes) == 300
    for kind in BUDGETED:
        out = render(result, kind, LINKS)
        assert_fits(out, kind)
        assert "leaves out" not in out


# Views with parts blown up past any budget: each must take exactly the parts up to the last blown-up one.
def _huge_charts(view: ReportView, size: int) -> ReportView:
    points = ", ".join(["1.5"] * (size // 5))
    block = Md(f"```mermaid\nxychart-beta\n    line [{points}]\n```")
    return replace(view, charts=[replace(c, mermaid=block) for c in view.charts])


def _huge_steps(view: ReportView, size: int) -> ReportView:
    width = len(view.step_rows[0].cells)
    cells = [Md("9" * (size // (50 * width)))] * width  # few long rows: markdown-it reads those fast
    return replace(view, step_rows=[StepRow(step=i, cells=cells) for i in range(1, 61)])


def _huge_env(view: ReportView, size: int) -> ReportView:
    cell = Md("9" * (size // 100))
    env = Table(title=Md("Environment changes"), rows=[(Md("torch"), cell, cell)] * 60, more=0)
    return replace(view, diffs=[env, *(t for t in view.diffs if t.title != "Environment changes")])


BLOW_UP: Final = {CHARTS: _huge_charts, STEPS: _huge_steps, ENV: _huge_env}


@pytest.mark.parametrize(
    "blown",
    [(CHARTS,), (STEPS,), (ENV,), (CHARTS, STEPS), (CHARTS, ENV), DROP_ORDER],
    ids=lambda parts: "+".join(p.split()[-1] for p in parts),
)
@pytest.mark.parametrize("kind", DEGRADING)
def test_parts_go_in_the_fixed_order(small_view: ReportView, kind: Kind, blown: tuple[str, ...]) -> None:
    budget = TARGETS[kind].budget
    assert budget is not None
    view = small_view
    assert shown_parts(render_view(view, kind)) == set(DROP_ORDER)
    for part in blown:
        view = BLOW_UP[part](view, budget)
    out = render_view(view, kind)
    dropped = DROP_ORDER[: max(DROP_ORDER.index(p) for p in blown) + 1]
    assert_fits(out, kind)
    assert shown_parts(out) == set(DROP_ORDER) - set(dropped)
    assert note(kind, dropped) in out
    assert "cut to fit" not in out
    if CHARTS in dropped:
        assert "this run `" in out  # sparklines instead


@pytest.mark.parametrize("kind", DEGRADING)
def test_a_report_at_its_budget_is_whole_and_one_character_more_drops_only_the_charts(
    small_view: ReportView, kind: Kind
) -> None:
    target = TARGETS[kind]
    assert target.budget is not None
    room = target.budget - target.measure(render_view(small_view, kind))

    def padded(extra: int) -> ReportView:  # a Mermaid comment line inside the first chart: `extra` characters more
        first = small_view.charts[0]
        assert first.mermaid is not None
        block = Md(first.mermaid.removesuffix("```") + "%%" + "x" * (extra - 3) + "\n```")
        return replace(small_view, charts=[replace(first, mermaid=block), *small_view.charts[1:]])

    at = render_view(padded(room), kind)
    assert target.measure(at) == target.budget
    assert shown_parts(at) == set(DROP_ORDER)
    assert "leaves out" not in at
    over = render_view(padded(room + 1), kind)
    assert shown_parts(over) == {STEPS, ENV}
    assert note(kind, (CHARTS,)) in over


CUT_CASES: Final = [(kind, "checks") for kind in BUDGETED] + [(kind, "config") for kind in DEGRADING]


@pytest.mark.parametrize(("kind", "where"), CUT_CASES)
def test_a_cut_report_closes_what_it_left_open_and_ends_with_the_note(
    small_view: ReportView, kind: Kind, where: str
) -> None:
    """Past every drop, the report is cut at a line; a <details> left open is closed first, so that the note
    stands on its own outside it."""
    target = TARGETS[kind]
    assert target.budget is not None
    long = Md("9" * (target.budget // 10))
    view = _huge_env(small_view, target.budget)
    if where == "checks":
        view = replace(
            view, checks=[replace(c, name=Md(f"c{i} {long}"), message=long) for i, c in enumerate(view.checks)]
        )
    else:
        config = Table(title=Md("Config changes"), rows=[(Md("k"), long, long)] * 60, more=0)
        view = replace(view, diffs=[*view.diffs[:-1], config])
    out = render_view(view, kind)
    assert_fits(out, kind)
    assert note(kind, DROP_ORDER) in out or kind == "check-summary"
    assert out.endswith(f"\n\n… cut to fit {target.limit_name}; the full report is in {target.full_report}.\n")
    if where == "config":
        assert "9 |\n\n\n</details>\n\n… cut to fit" in out  # closed after the last whole row
    last = [t for t in gfm.parse(out) if t.type == "inline"][-1]
    assert last.content.startswith("… cut to fit")  # a paragraph of its own, outside any table
