"""The action's pieces that need no GitHub: workflow commands and outputs as the runner reads them, when the
sticky comment is written, check conclusions, and the no-baseline workflow snippet in the reports."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
import yaml

from canary_action.compare.result import Verdict
from canary_action.github.commands import Log, escape_data, escape_property, write_outputs
from canary_action.github.context import EventContext
from canary_action.github.publish import CommentMode, _wanted, conclusion_of
from canary_action.github.run_mode import baseline_snippet
from canary_action.report.render import render
from canary_action.report.view import Links
from tests.report_cases import CASES


def parse_outputs(text: str) -> dict[str, str]:
    """GITHUB_OUTPUT read back the way the runner reads it (name<<DELIMITER ... DELIMITER, or name=value: the
    first of `=` and `<<` decides)."""
    values, lines = {}, iter(text.splitlines())
    for line in lines:
        if "=" in line and ("<<" not in line or line.index("=") < line.index("<<")):
            name, value = line.split("=", 1)
            values[name] = value
            continue
        name, delimiter = line.split("<<", 1)
        body = []
        for inner in lines:
            if inner == delimiter:
                break
            body.append(inner)
        values[name] = "\n".join(body)
    return values


def test_outputs_survive_values_that_look_like_delimiters(tmp_path: Path) -> None:
    out = tmp_path / "output"
    tricky = "line one\nverdict<<EOF\nEOF\nghadelimiter_x"
    write_outputs(out, {"verdict": "pass", "report-path": tricky})
    write_outputs(out, {"verdict": "regression"})  # a later write of the same name wins, as in the runner
    values = parse_outputs(out.read_text())
    assert values == {"verdict": "regression", "report-path": tricky}


def test_workflow_command_values_are_escaped_as_the_runner_unescapes_them() -> None:
    assert escape_data("50% done\r\nnext") == "50%25 done%0D%0Anext"
    assert escape_property("a:b,c") == "a%3Ab%2Cc"
    out = io.StringIO()
    Log(out).annotate("error", "two\nlines", title="t: x, y", file="canary.yaml")
    assert out.getvalue() == "::error title=t%3A x%2C y,file=canary.yaml::two%0Alines\n"


def test_untrusted_text_cannot_issue_workflow_commands() -> None:
    out = io.StringIO()
    Log(out).untrusted("fine\n::add-mask::x\n::error::forged")
    lines = out.getvalue().splitlines()
    token = lines[0].removeprefix("::stop-commands::")
    assert len(token) == 32
    assert lines[-1] == f"::{token}::"
    assert lines[1:-1] == ["fine", "::add-mask::x", "::error::forged"]  # inside the switched-off region


def test_the_token_is_masked_line_by_line() -> None:
    out = io.StringIO()
    Log(out).mask("ghs_abc\nsecond")
    assert out.getvalue() == "::add-mask::ghs_abc\n::add-mask::second\n"


@pytest.mark.parametrize(
    ("mode", "verdict", "previous", "write"),
    [
        ("always", "pass", None, True),
        ("always", "pass", "pass", True),
        ("on-failure", "pass", None, False),
        ("on-failure", "regression", None, True),
        ("on-failure", "crashed", None, True),
        ("on-failure", "pass", "regression", True),  # recovered: the old failure must not stay on the PR
        ("on-change", "pass", None, False),
        ("on-change", "neutral", None, True),
        ("on-change", "regression", "regression", False),
        ("on-change", "pass", "regression", True),
    ],
)
def test_comment_modes(mode: CommentMode, verdict: Verdict, previous: str | None, write: bool) -> None:
    assert _wanted(mode, verdict, previous) is write


def test_conclusions() -> None:
    assert conclusion_of("pass", "regression") == "success"
    assert conclusion_of("regression", "regression") == "failure"
    assert conclusion_of("regression", "never") == "neutral"
    assert conclusion_of("crashed", "never") == "failure"  # a broken pipeline is not a perf opinion
    assert conclusion_of("neutral", "regression") == "neutral"


def _ctx(default_branch: str | None = "master") -> EventContext:
    return EventContext(
        event="pull_request",
        action="opened",
        repository="o/r",
        default_branch=default_branch,
        pr_number=2,
        head_sha="a" * 40,
        is_fork=False,
        is_default_branch_push=False,
        workflow_file=".github/workflows/canary.yml",
    )


def test_the_baseline_snippet_is_a_workflow_that_uploads_the_artifact_prs_look_for() -> None:
    snippet = baseline_snippet(_ctx(), "configs/tiny/dpo.yaml", "rlhf-canary-tiny-dpo", "canary-output")
    assert snippet is not None
    workflow = yaml.safe_load(snippet)
    assert workflow[True]["push"]["branches"] == ["master"]  # YAML 1.1 reads `on` as true
    steps = workflow["jobs"]["canary"]["steps"]
    assert steps[0]["with"]["config"] == "configs/tiny/dpo.yaml"
    assert steps[1]["with"] == {"name": "rlhf-canary-tiny-dpo", "path": "canary-output/"}
    assert re.fullmatch(r"actions/upload-artifact@[0-9a-f]{40}", steps[1]["uses"])
    assert steps[1]["if"] == "${{ !cancelled() }}"


def test_a_snippet_from_odd_names_is_not_made() -> None:
    assert baseline_snippet(_ctx(), "x`y.yaml", "a", "canary-output") is None
    assert baseline_snippet(_ctx("main\n  evil: 1"), "c.yaml", "a", "canary-output") is None


@pytest.mark.parametrize("kind", ["comment", "summary", "markdown"])
def test_a_neutral_no_baseline_report_shows_the_snippet_in_a_yaml_block(kind: str) -> None:
    result = CASES["neutral"]()
    assert not result.baselines
    snippet = baseline_snippet(_ctx(), "canary.yaml", "rlhf-canary-x", "canary-output")
    out = render(result, kind, Links(baseline_snippet=snippet))  # type: ignore[arg-type]
    assert f"```yaml\n{snippet}```" in out
    assert out.count("<!--") == (1 if kind == "comment" else 0)
    passing = render(CASES["passing"](), kind, Links(baseline_snippet=snippet))  # type: ignore[arg-type]
    assert "```yaml" not in passing  # there is a baseline: no instructions


def test_a_snippet_that_could_close_its_fence_is_dropped() -> None:
    out = render(CASES["neutral"](), "comment", Links(baseline_snippet="on:\n```\n<img src=x>"))
    assert "```yaml" not in out
    assert "<img" not in out


def test_the_comment_links_to_the_configs_history_page_when_one_is_published() -> None:
    page = "https://acme.github.io/trainer/config-sft-smoke.html"
    assert f"[history]({page})" in render(CASES["passing"](), "comment", Links(history=page))
    assert "[history]" not in render(CASES["passing"](), "comment", Links())


@pytest.mark.parametrize("url", ["javascript:alert(1)", "http://acme.github.io/", "https://a.io/x?y=<b>", "file:///x"])
def test_history_url_is_an_https_page_or_refused(url: str) -> None:
    from canary_action.errors import UsageError
    from canary_action.github.inputs import read_inputs

    with pytest.raises(UsageError, match="history-url"):
        read_inputs({"INPUT_HISTORY-URL": url})
    inputs, _ = read_inputs({"INPUT_HISTORY-URL": "https://acme.github.io/trainer/"})
    assert inputs.history_url == "https://acme.github.io/trainer/"
