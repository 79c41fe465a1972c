"""Text from a pull request stays text in every report.

Config names, run ids, check messages, versions, op and metric names come from files a pull request controls.
Rendered (and read back as GitHub would, tests/gfm.py) they must not close a table cell, inject HTML, a link or
an image, @mention anyone, start a heading, list, quote or code block, or forge the hidden marker that finds our
sticky comment. The fixture tests/fixtures/reports/hostile_result.json holds every trick at once; each payload
is also put alone into every free-text field of a result.
"""

from __future__ import annotations

import re
from typing import Final

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it.token import Token

from canary_action.compare.result import CompareResult
from canary_action.report.escape import mermaid_label, text
from canary_action.report.load import read_result
from canary_action.report.render import TARGETS, Kind, render
from tests import gfm
from tests.report_cases import HOSTILE_FIXTURE, LINKS, OUR_URLS, PAYLOADS, everywhere, failing, hostile

KINDS: Final[tuple[Kind, ...]] = tuple(TARGETS)
MARKER: Final = re.compile(r"<!-- rlhf-canary:sticky:[a-z0-9._-]+ -->\n")
OUR_TITLES: Final = (
    "How this was judged|Per-step detail|Per-rank|Environment changes|Config changes|"
    "Profiled ops that moved \\(ms per step\\)"
)
OUR_HTML_BLOCKS: Final = re.compile(rf"<details><summary>({OUR_TITLES})</summary>\n|</details>\n")
OUR_INLINE_HTML: Final = frozenset({"<sub>", "</sub>"})
# Nothing invisible that reorders or hides text; newlines and the two joiners escape.text adds are ours.
UNSEEN: Final = re.compile(r"[\x00-\x09\x0b-\x1f\x7f\x85\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
MERMAID: Final = re.compile(
    r'%%\{init: \{"themeVariables": \{"xyChart": \{"plotColorPalette": "[#0-9a-f, ]+"\}\}\}\}%%|xychart-beta'
    r'|    title "[A-Za-z0-9 ._/:,()+-]*"|    x-axis "step" \d+ --> \d+|    y-axis "[a-z]*" [-\d.]+ --> [-\d.]+'
    r"|    line \[[-\d., ]+\]"
)  # numbers, our words, and titles through escape.mermaid_label
CONTROL: Final = re.compile(r"[\x00-\x1f\x7f\x85\u2028\u2029]")
BIDI: Final = re.compile(r"[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def shown(value: str, limit: int) -> str:
    """What a reader must see of `value` in a cell: one line, no controls, cut with an ellipsis."""
    flat = " ".join(CONTROL.sub(" ", BIDI.sub("", value)).split())
    return (flat if len(flat) <= limit else flat[: limit - 1] + "…").translate(gfm.INVISIBLE)


def problems(out: str, kind: Kind) -> list[str]:
    """Everything in a rendered report that untrusted text could have put there."""
    found: list[str] = []
    stream = gfm.tokens(out)
    blocks = [t.content for t in stream if t.type == "html_block"]
    if kind == "comment":
        if not (blocks and MARKER.fullmatch(blocks[0]) and out.startswith(blocks[0])):
            found.append("the comment does not start with its marker")
        blocks = blocks[1:]
    found += [f"html block {b!r}" for b in blocks if not OUR_HTML_BLOCKS.fullmatch(b)]
    inline = [t.content for t in stream if t.type == "html_inline"]
    found += [f"inline html {html!r}" for html in inline if html not in OUR_INLINE_HTML]
    if out.count("<!--") != (kind == "comment"):
        found.append(f"{out.count('<!--')} html comments")
    found += [f"link to {url}" for url in gfm.links(out) if url not in OUR_URLS]
    found += [f"image {t.attrs['src']}" for t in stream if t.type == "image"]
    found += gfm.table_problems(out)
    for content in gfm.text_tokens(out):
        if gfm.MENTION.search(content) or gfm.AUTOLINK.search(content):
            found.append(f"GitHub would link {content!r}")
    found += [f"invisible character {m.group()!r}" for m in UNSEEN.finditer(out)]
    # GitHub renders $…$ as math (markdown-it does not know it): outside code spans, every `$` must be escaped.
    found += [f"math in {m.group()!r}" for m in re.finditer(r"[^\n]{0,20}(?<!\\)\$", re.sub(r"`[^`\n]*`", "", out))]
    found += _structure(stream, kind)
    return found


def _structure(stream: list[Token], kind: Kind) -> list[str]:
    """Block structure only the templates make: our headings, mermaid fences, the one quote (the size note)."""
    found = []
    headings = [(t.tag, stream[i + 1].content) for i, t in enumerate(stream) if t.type == "heading_open"]
    if kind == "check-text":  # the check run's title and summary stand above it
        expected: list[list[str]] = [[]]
    else:
        expected = [["h3"], ["h3", "h4"]]
    if [tag for tag, _ in headings] not in expected or headings[1:] not in ([], [("h4", "Likely causes")]):
        found.append(f"headings {headings}")
    fences = [t for t in stream if t.type == "fence"]
    found += [f"fence {t.info!r}" for t in fences if t.info != "mermaid"]
    found += [
        f"mermaid line {line!r}" for t in fences for line in t.content.splitlines() if not MERMAID.fullmatch(line)
    ]
    found += [f"{t.type} at line {t.map}" for t in stream if t.type in ("code_block", "hr")]
    quotes = [i for i, t in enumerate(stream) if t.type == "blockquote_open"]
    found += [f"quote {stream[i + 2].content!r}" for i in quotes if not stream[i + 2].content.startswith("✂️ To fit")]
    return found


@pytest.fixture(scope="module")
def fixture_result() -> CompareResult:
    return read_result(HOSTILE_FIXTURE)


def _strings(node: object) -> list[str]:
    if isinstance(node, dict):
        return [s for value in node.values() for s in _strings(value)]
    if isinstance(node, list):
        return [s for value in node for s in _strings(value)]
    return [node] if isinstance(node, str) else []


def test_the_hostile_fixture_is_current(fixture_result: CompareResult) -> None:
    """Its text, that is: the numbers may drift with `compare` without weakening the test."""
    expected = _strings(hostile().model_dump(mode="json"))
    assert _strings(fixture_result.model_dump(mode="json")) == expected, (
        "regenerate: .venv/bin/python -m tests.report_cases"
    )


def test_the_hostile_fixture_holds_every_payload_in_every_kind_of_field(fixture_result: CompareResult) -> None:
    r = fixture_result
    every = set(PAYLOADS)
    assert {c.name for c in r.checks} == {c.message for c in r.checks} == every
    assert {c.field for c in r.env_changes} == {c.current for c in r.env_changes} == every
    assert {c.field for c in r.config_changes} == {c.baseline for c in r.config_changes} == every
    assert {o.name for o in r.op_changes} == set(r.notes) == every
    assert all(s in every for suspect in r.suspects for s in [suspect.summary, *suspect.evidence, *suspect.next_steps])
    assert all(s in PAYLOADS for s in [r.current.config_name, r.current.run_id, r.reason, *r.threshold_sources])
    assert r.current.distributed is not None
    assert r.current.distributed.backend in PAYLOADS
    assert all(c.name in PAYLOADS for c in r.curves)


@pytest.mark.parametrize("kind", KINDS)
def test_the_hostile_fixture_renders_inert(fixture_result: CompareResult, kind: Kind) -> None:
    r = fixture_result
    out = render(r, kind, LINKS)
    assert problems(out, kind) == []
    assert "<!-- rlhf-canary:sticky:other -->" not in out
    tables = gfm.tables(out)
    for table in tables:  # each hostile string in its own cell, whole (to its cut), in order
        if table.header[:2] == ["", "Check"]:
            assert [row[1] for row in table.rows] == [shown(c.name, 60) for c in r.checks]
        elif table.header == ["Check", "Status", "Why"]:
            assert [(row[0], row[2]) for row in table.rows] == [
                (shown(c.name, 60), shown(c.message, 300)) for c in r.checks
            ]
    diffs = [t for t in tables if t.header == ["", "Baseline", "Current"]]
    if kind != "check-summary":
        assert [tuple(row) for row in diffs[0].rows] == [
            tuple(shown("—" if v is None else v, 80) for v in (c.field, c.baseline, c.current)) for c in r.env_changes
        ]


@pytest.mark.parametrize("payload", PAYLOADS, ids=lambda p: repr(p[:24]))
def test_each_payload_in_every_field_stays_in_its_cell(payload: str) -> None:
    result = everywhere(failing(), payload)
    outs = {kind: render(result, kind, LINKS) for kind in KINDS}
    for kind, out in outs.items():
        assert problems(out, kind) == [], kind
    by_header = {tuple(t.header): t for out in outs.values() for t in gfm.tables(out)}
    checks = by_header[("", "Check", "Baseline", "Current", "Change", "Threshold", "Status")]
    assert {row[1] for row in checks.rows} == {shown(payload, 60)}
    messages = by_header[("Check", "Status", "Why")]
    assert {(row[0], row[2]) for row in messages.rows} == {(shown(payload, 60), shown(payload, 300))}
    diff = by_header[("", "Baseline", "Current")]
    assert {row[0] for row in diff.rows} == {shown(payload, 80)}
    steps = next(t for header, t in by_header.items() if header[0] == "step")
    assert steps.header[1:3] == [shown(f"{payload}: this run", 200), shown(f"{payload}: baseline", 200)]
    heading = next(line for line in outs["markdown"].splitlines() if line.startswith("### "))
    assert heading.endswith("`")  # the config name stays in its code span
    assert heading.count("`") == 2
    assert outs["comment"].count("<!--") == 1


CONTEXTS: Final = {
    "table cell": "| h |\n|---|\n| {} |\n",
    "list item": "- {}\n",
    "nested list item": "1. x\n   - {}\n",
    "paragraph": "{}\n",
    "quote": "> {}\n",
}


@settings(max_examples=300, deadline=None)  # markdown-it takes a few ms a document
@given(st.text(), st.sampled_from(["", "Note: "]))
def test_escaped_text_reads_back_as_itself_wherever_the_templates_put_it(value: str, prefix: str) -> None:
    value = value.translate(gfm.INVISIBLE)  # the joiners escape.text adds: read back, they are taken out
    expected = (prefix + shown(value, 200)).strip()
    for context, template in CONTEXTS.items():
        markdown = template.format(prefix + text(value))
        if expected:  # the same blocks as with a plain word, and the value's text as it came
            blocks = gfm.MD.parse(markdown)
            assert [t.type for t in blocks] == [t.type for t in gfm.MD.parse(template.format("x"))], context
            assert gfm.plain([t for t in blocks if t.type == "inline"][-1]) == expected, context
        assert gfm.html(markdown) == gfm.links(markdown) == [], context
        assert not [c for c in gfm.text_tokens(markdown) if gfm.MENTION.search(c) or gfm.AUTOLINK.search(c)], context


@given(st.text())
def test_a_mermaid_label_cannot_leave_its_quotes(value: str) -> None:
    label = mermaid_label(value)
    assert re.fullmatch(r"[A-Za-z0-9 ._/:,()+-]*", label)
    assert len(label) <= 60
