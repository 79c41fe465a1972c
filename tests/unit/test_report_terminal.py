"""The terminal form of the report (issue 15 item 14): text for people, not GitHub markdown — no backslash
escapes, no HTML, no runs of blank lines, aligned columns, colour only where use_colour says so."""

from __future__ import annotations

import io
import re
from typing import Final

import pytest

from canary_action.compare.result import CompareResult
from canary_action.report.escape import one_line, plain, text
from canary_action.report.terminal import HEADER, render_terminal, use_colour
from tests.report_cases import CASES, LINKS, PAYLOADS, hostile

ANSI: Final = re.compile(r"\x1b\[[0-9;]*m")


@pytest.fixture(scope="module", params=[*CASES, "hostile"])
def result(request: pytest.FixtureRequest) -> CompareResult:
    return hostile() if request.param == "hostile" else CASES[request.param]()


@pytest.mark.parametrize("case", CASES)
def test_no_markdown_escapes_html_or_blank_runs(case: str) -> None:
    """(The hostile result is left out: its payloads hold these marks as text, which the terminal shows as is.)"""
    out = render_terminal(CASES[case](), LINKS)
    for markdown in ("\\_", "\\[", "\\|", "\\*", "**", "`", "<details>", "<sub>", "```", "&lt;", "&amp;", "| ---"):
        assert markdown not in out, markdown
    assert "\n\n\n" not in out
    assert out.endswith("\n")
    assert not out.endswith("\n\n")


def test_no_control_character_reaches_the_terminal(result: CompareResult) -> None:
    out = render_terminal(result, LINKS, colour=True)
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b\u2060]", ANSI.sub("", out))


def test_the_checks_are_aligned_columns(result: CompareResult) -> None:
    out = render_terminal(result, LINKS)
    widths = {len(line) for line in out.splitlines() if line.startswith("Check ")}
    assert len(widths) == 1
    lines = out.splitlines()
    head = next(i for i, line in enumerate(lines) if line.split() == list(HEADER))
    starts = [lines[head].index(h) for h in HEADER]
    rows = lines[head + 1 : head + 1 + len(result.checks)]
    for check, row in zip(result.checks, rows, strict=True):
        assert row.startswith(one_line(check.name, 60))
        assert row[starts[1] :].startswith(check.status)


def test_colour_marks_the_verdict_and_statuses_without_moving_the_columns() -> None:
    failing = CASES["failing"]()
    grey, coloured = render_terminal(failing, LINKS), render_terminal(failing, LINKS, colour=True)
    assert ANSI.search(coloured)
    assert not ANSI.search(grey)
    assert ANSI.sub("", coloured) == grey
    assert "\x1b[31m\x1b[1mREGRESSION\x1b[0m" in coloured  # red, bold
    assert re.search(r"(?m)^step_time +\x1b\[31mfail", coloured)
    assert re.search(r"(?m)^run_status +\x1b\[32mpass", coloured)
    assert "\x1b[33m\x1b[1mNEUTRAL" in render_terminal(CASES["neutral"](), colour=True)
    assert "\x1b[32m\x1b[1mPASS" in render_terminal(CASES["passing"](), colour=True)


class Stream(io.StringIO):
    def __init__(self, tty: bool) -> None:
        super().__init__()
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


@pytest.mark.parametrize(
    ("tty", "env", "expected"),
    [
        (True, {}, True),
        (False, {}, False),
        (True, {"NO_COLOR": "1"}, False),
        (True, {"NO_COLOR": ""}, True),  # empty: unset (no-color.org)
        (False, {"FORCE_COLOR": "1"}, True),
        (False, {"FORCE_COLOR": ""}, False),
        (True, {"FORCE_COLOR": "1", "NO_COLOR": "1"}, True),  # forcing is the more explicit ask
    ],
)
def test_use_colour_follows_the_tty_and_the_conventions(tty: bool, env: dict[str, str], expected: bool) -> None:
    assert use_colour(Stream(tty), env) is expected


@pytest.mark.parametrize("payload", PAYLOADS)
def test_plain_undoes_text(payload: str) -> None:
    undone = plain(text(payload, 10_000))
    assert undone == re.sub(r"[\x80-\x9f\u200b\u2060]", "", one_line(payload, 10_000))
