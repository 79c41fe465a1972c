"""Every report template on every kind of result, compared with a reviewed copy in tests/golden/reports.

A change to a template or to the view model shows up here as a diff to read. To accept it, regenerate and
review the files that changed:

    UPDATE_GOLDENS=1 .venv/bin/pytest tests/unit/test_report_golden.py
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Final

import pytest

from canary_action.compare.result import CompareResult
from canary_action.report.render import TARGETS, Kind, check_output, render
from canary_action.report.terminal import render_terminal
from tests import gfm
from tests.report_cases import CASES, LINKS

GOLDEN: Final = Path(__file__).parents[1] / "golden" / "reports"
UPDATE: Final = os.environ.get("UPDATE_GOLDENS") == "1"
KINDS: Final[tuple[Kind, ...]] = tuple(TARGETS)


@pytest.fixture(scope="module")
def results() -> dict[str, CompareResult]:
    return {name: make() for name, make in CASES.items()}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("case", CASES)
def test_report_matches_its_golden_file(results: dict[str, CompareResult], case: str, kind: Kind) -> None:
    out = render(results[case], kind, LINKS)
    golden = GOLDEN / case / f"{kind}.md"
    if UPDATE:
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(out, encoding="utf-8")
    assert golden.exists(), f"no golden file {golden}: run with UPDATE_GOLDENS=1 and review it"
    assert out == golden.read_text(encoding="utf-8"), f"{golden} differs: run with UPDATE_GOLDENS=1 and review the diff"


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("case", CASES)
def test_every_table_parses_with_its_header_width(results: dict[str, CompareResult], case: str, kind: Kind) -> None:
    out = render(results[case], kind, LINKS)
    found = gfm.tables(out)
    assert found, "every report has at least one table"
    assert gfm.table_problems(out) == []


@pytest.mark.parametrize("case", CASES)
def test_the_terminal_form_matches_its_golden_file(results: dict[str, CompareResult], case: str) -> None:
    """Issue 15 item 14: what `canary compare` prints, uncoloured (as into a pipe or a file)."""
    out = render_terminal(results[case], LINKS)
    golden = GOLDEN / case / "terminal.txt"
    if UPDATE:
        golden.write_text(out, encoding="utf-8")
    assert out == golden.read_text(encoding="utf-8"), f"{golden} differs: run with UPDATE_GOLDENS=1 and review the diff"


def test_no_golden_file_is_left_over() -> None:
    expected = {GOLDEN / case / f"{kind}.md" for case in CASES for kind in KINDS}
    expected |= {GOLDEN / case / "terminal.txt" for case in CASES}
    assert set(GOLDEN.glob("*/*")) == expected


def test_the_cases_cover_every_verdict(results: dict[str, CompareResult]) -> None:
    verdicts = {name: r.verdict for name, r in results.items()}
    assert verdicts == {
        "passing": "pass", "failing": "regression", "neutral": "neutral", "not-comparable": "neutral",
        "crashed": "crashed", "distributed": "regression", "gpu-kernels": "regression", "paired": "regression",
        "correctness": "regression", "numerics-changed": "pass",
    }  # fmt: skip
    assert not results["not-comparable"].comparability.comparable
    assert {c.status for c in results["not-comparable"].checks} >= {"not-comparable"}


def test_the_reports_say_what_each_verdict_means(results: dict[str, CompareResult]) -> None:
    comment = {name: render(r, "comment", LINKS) for name, r in results.items()}
    assert comment["passing"].splitlines()[1] == "### ✅ rlhf-canary **pass** — `sft-smoke`"
    assert "❌ rlhf-canary **regression**" in comment["failing"]
    assert "no baseline yet" in comment["neutral"]
    assert "not comparable with the baseline (gpu" in comment["not-comparable"]
    assert "💥 rlhf-canary **crashed**" in comment["crashed"]
    assert "OutOfMemoryError" in comment["crashed"]


def test_check_output_is_the_check_run_templates(results: dict[str, CompareResult]) -> None:
    output = check_output(results["failing"], LINKS)
    assert output == {
        "title": "rlhf-canary: regression (step_time)",
        "summary": render(results["failing"], "check-summary", LINKS),
        "text": render(results["failing"], "check-text", LINKS),
    }
    json.dumps(output)  # what the REST API is sent
