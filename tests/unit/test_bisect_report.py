"""canary bisect's reports (terminal and markdown) and bisect.json's model."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from canary_action.bisect.render import MARKER, render_markdown, render_terminal
from canary_action.bisect.result import BisectResult, CommitRef, EffectRecord, Finding, PairStep

GOOD = CommitRef(sha="a" * 40, subject="the canary", index=0)
MIDDLE = CommitRef(sha="b" * 40, subject="docs | words", index=1)
CULPRIT = CommitRef(sha="c" * 40, subject="trainer: a `debug` forward pass", index=2)
BAD = CommitRef(sha="d" * 40, subject="later", index=3)
ZERO = EffectRecord(pct=0.4, low=-1.5, high=2.3)
SLOW = EffectRecord(pct=31.2, low=28.0, high=34.5)


def result(**changes: object) -> BisectResult:
    fields: dict[str, object] = {
        "config": "canary.yaml", "check": "step_time", "unit": "%", "good": GOOD, "bad": BAD, "commits": 3,
        "status": "found", "summary": "cccccccccc 'trainer: a `debug` forward pass' changed step_time",
        "steps": [
            PairStep(commit=BAD, call="confirm", effect=SLOW, verdict="regression", wall_s=20.0),
            PairStep(commit=MIDDLE, call="before", effect=ZERO, verdict="pass", wall_s=19.0),
            PairStep(commit=CULPRIT, call="after", effect=SLOW, verdict="regression", wall_s=21.0),
        ],
        "findings": [Finding(commits=[CULPRIT], clear=True, before=ZERO, after=SLOW)],
        "pairs": 3, "max_pairs": 3, "wall_s": 61.0,
    }  # fmt: skip
    return BisectResult.model_validate({**fields, **changes})


def test_the_terminal_report_lists_every_pair_and_names_the_commit() -> None:
    text = render_terminal(result())
    assert text.startswith("canary bisect: found the commit\n")
    assert "3 commits after the good aaaaaaaaaa up to the bad dddddddddd; following step_time" in text
    assert "bbbbbbbbbb  +0.4 % [-1.5, +2.3]" in text
    assert "like the good commit: the change comes after it" in text
    assert "cccccccccc trainer: a `debug` forward pass: step_time +0.4 % [-1.5, +2.3] → +31.2 % [+28.0, +34.5]" in text
    assert "3 pairs (at most 3), 1 min 01 s" in text


def test_the_markdown_report_starts_with_its_marker_and_escapes_table_cells() -> None:
    text = render_markdown(result())
    assert text.splitlines()[0] == MARKER
    assert "## rlhf-canary bisect: found the commit" in text
    assert "| 2 | `bbbbbbbbbb` docs \\| words | +0.4 % [-1.5, +2.3] |" in text
    assert "`cccccccccc` trainer: a 'debug' forward pass" in text  # a backtick would end the code span


def test_a_range_left_says_why_and_counts_its_commits() -> None:
    finding = Finding(commits=[MIDDLE, CULPRIT], clear=False, before=ZERO, after=SLOW, why="out of pairs (1)")
    text = render_terminal(result(status="not-clear", findings=[finding], summary="not narrowed"))
    assert "one of 2 commits, bbbbbbbbbb..cccccccccc" in text
    assert "stopped: out of pairs (1)" in text
    assert "canary bisect: narrowed, not to one commit" in text


def test_a_single_commit_range_is_one_commit() -> None:
    finding = Finding(commits=[CULPRIT], clear=False, before=ZERO, after=SLOW, why="intervals overlap")
    text = render_terminal(result(status="not-clear", findings=[finding]))
    assert "cccccccccc trainer: a `debug` forward pass, not clearly: step_time" in text
    assert "stopped: intervals overlap" in text


def test_bisect_json_is_closed() -> None:
    with pytest.raises(ValidationError):
        BisectResult.model_validate({**result().model_dump(), "surprise": 1})
    with pytest.raises(ValidationError):
        BisectResult.model_validate({**result().model_dump(), "bisect_schema_version": 2})


def test_the_good_commits_level_reads_as_such() -> None:
    zero = EffectRecord(pct=0.0, low=0.0, high=0.0)
    finding = Finding(commits=[CULPRIT], clear=True, before=zero, after=SLOW)
    assert "step_time 0 (the good commit) → +31.2 % [+28.0, +34.5]" in render_terminal(result(findings=[finding]))
