"""The event context from real webhook payloads (tests/fixtures/webhooks, @octokit/webhooks-examples) and the
variables the runner sets: which PR, which commit the check goes on, fork or not, baseline push or not."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from canary_action.errors import UsageError
from canary_action.github.context import MAX_PAYLOAD_BYTES, EventContext, event_context
from canary_action.github.inputs import ActionInputs, read_inputs, read_runner

HOOKS = Path(__file__).parents[1] / "fixtures" / "webhooks"


def runner_env(event: str, payload: str | None, **extra: str) -> dict[str, str]:
    env = {
        "GITHUB_EVENT_NAME": event,
        "GITHUB_REPOSITORY": "Codertocat/Hello-World",
        "GITHUB_RUN_ID": "4242",
        "GITHUB_SHA": "f" * 40,  # on pull_request: the merge commit, which must never get the check
        "GITHUB_REF": "refs/pull/2/merge",
        "GITHUB_WORKFLOW_REF": "Codertocat/Hello-World/.github/workflows/canary.yml@refs/pull/2/merge",
        "GITHUB_WORKSPACE": "/github/workspace",
        **extra,
    }
    if payload is not None:
        env["GITHUB_EVENT_PATH"] = str(HOOKS / payload)
    return env


def context(event: str, payload: str | None, inputs: ActionInputs | None = None, **extra: str) -> EventContext:
    return event_context(read_runner(runner_env(event, payload, **extra)), inputs or ActionInputs())


@pytest.mark.parametrize(
    "payload", ["pull_request.opened.json", "pull_request.synchronize.json", "pull_request.reopened.json"]
)
def test_a_same_repo_pull_request_checks_its_head_sha(payload: str) -> None:
    ctx = context("pull_request", payload)
    raw = json.loads((HOOKS / payload).read_text())
    assert ctx.pr_number == raw["number"]
    assert ctx.head_sha == raw["pull_request"]["head"]["sha"]
    assert ctx.head_sha != "f" * 40
    assert not ctx.is_fork
    assert not ctx.is_default_branch_push
    assert ctx.action == raw["action"]
    assert ctx.workflow_file == ".github/workflows/canary.yml"
    assert ctx.default_branch == "master"


def test_a_fork_pull_request_is_marked() -> None:
    ctx = context("pull_request", "pull_request.fork.json")
    assert ctx.is_fork
    assert ctx.head_sha is not None


def test_a_push_to_the_default_branch_makes_a_baseline() -> None:
    on_default = context("push", "push.json", GITHUB_REF="refs/heads/master")
    assert on_default.is_default_branch_push
    assert on_default.head_sha == json.loads((HOOKS / "push.json").read_text())["after"]
    assert not context("push", "push.json", GITHUB_REF="refs/tags/simple-tag").is_default_branch_push


def test_workflow_dispatch_takes_the_pr_number_input() -> None:
    inputs, _ = read_inputs({"INPUT_PR-NUMBER": "17"})
    ctx = context("workflow_dispatch", "workflow_dispatch.json", inputs, GITHUB_REF="refs/heads/main")
    assert ctx.pr_number == 17
    assert ctx.head_sha == "f" * 40
    assert context("workflow_dispatch", "workflow_dispatch.json").pr_number is None


def test_workflow_run_reports_on_the_finished_run() -> None:
    raw = json.loads((HOOKS / "workflow_run.completed.json").read_text())["workflow_run"]
    ctx = context("workflow_run", "workflow_run.completed.json", ActionInputs(pr_number=5))
    assert ctx.triggering_run_id == raw["id"]
    assert ctx.head_sha == raw["head_sha"]
    assert ctx.pr_number == 5


def test_schedule_has_no_payload_to_speak_of() -> None:
    ctx = context("schedule", None, GITHUB_REF="refs/heads/main")
    assert ctx.pr_number is None
    assert ctx.head_sha == "f" * 40
    assert not ctx.is_default_branch_push


def test_outside_actions_the_error_says_so() -> None:
    with pytest.raises(UsageError, match="not running inside GitHub Actions"):
        read_runner({})


@pytest.mark.parametrize("content", ["{not json", "[1, 2]"])
def test_a_broken_payload_is_a_clear_error(tmp_path: Path, content: str) -> None:
    bad = tmp_path / "event.json"
    bad.write_text(content)
    with pytest.raises(UsageError, match="event payload"):
        context("pull_request", None, GITHUB_EVENT_PATH=str(bad))


def test_a_deeply_nested_payload_is_a_usage_error(tmp_path: Path) -> None:
    nested = tmp_path / "event.json"
    nested.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(UsageError, match="nested too deeply to be a GitHub event"):
        context("pull_request", None, GITHUB_EVENT_PATH=str(nested))


def test_an_integer_past_pythons_digit_limit_is_a_usage_error(tmp_path: Path) -> None:
    huge = tmp_path / "event.json"
    huge.write_text('{"number": ' + "9" * 5000 + "}")
    with pytest.raises(UsageError, match="cannot read the event payload"):
        context("pull_request", None, GITHUB_EVENT_PATH=str(huge))


def test_a_payload_over_githubs_limit_is_refused_before_reading(tmp_path: Path) -> None:
    big = tmp_path / "event.json"
    with big.open("wb") as file:
        file.truncate(MAX_PAYLOAD_BYTES + 1)  # sparse: no disk used
    with pytest.raises(UsageError, match="larger than 25 MiB"):
        context("pull_request", None, GITHUB_EVENT_PATH=str(big))


@pytest.mark.parametrize("kind", ["fifo", "directory", "device"])
def test_a_payload_path_that_is_not_a_regular_file_is_refused_without_waiting(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "event.json"
    if kind == "fifo":
        os.mkfifo(path)  # opening it for reading would wait for a writer forever
    elif kind == "directory":
        path.mkdir()
    else:
        path.symlink_to("/dev/zero")  # reading it would never end
    with pytest.raises(UsageError, match="not a regular file") as caught:
        context("pull_request", None, GITHUB_EVENT_PATH=str(path))
    assert caught.value.fix
