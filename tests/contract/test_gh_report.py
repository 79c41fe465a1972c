"""`canary gh-report` (rlhf-canary 0.1's command) as a workflow step calls it: a `canary` process with the runner's
variables, against the fake GitHub that checks every request against GitHub's OpenAPI description."""

from __future__ import annotations

import io
import os
import shutil
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from canary_action.github.commands import escape_property
from canary_action.github.gh_report import GhReportRequest, gh_report
from tests.contract.fake_github import FakeGitHub
from tests.contract.test_action_e2e import CHECK, HOOKS, MARKER, MERGE_SHA, PR_HEAD, REPO, writes
from tests.integration.test_compare_cli import save

ROOT = Path(__file__).parents[2]
LEGACY_0_1 = ROOT / "tests" / "fixtures" / "baselines" / "legacy_0_1.json"
PUSH_SHA = "6113728f27ae82c7b1a177c8d03f9e96e0adf246"  # push.json's `after`
RUN_URL = f"https://github.com/{REPO}/actions/runs/901"
NO_TOKEN: dict[str, str] = {}
_RUNNER_PREFIXES = ("GITHUB_", "GH_", "RUNNER_", "INPUT_", "ACTIONS_")


@dataclass
class Done:
    code: int
    stdout: str
    stderr: str
    summary: str

    @property
    def log(self) -> str:
        return self.stdout + self.stderr


def runner_env(
    api_url: str, summary: Path, event: str, payload: str | None, token: dict[str, str] | None
) -> dict[str, str]:
    """The variables the runner gives a step (and a job container), without those of the machine running the tests."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(_RUNNER_PREFIXES)}
    env.update(
        GITHUB_ACTIONS="true",
        GITHUB_EVENT_NAME=event,
        GITHUB_REPOSITORY=REPO,
        GITHUB_API_URL=api_url,
        GITHUB_SERVER_URL="https://github.com",
        GITHUB_RUN_ID="901",
        GITHUB_SHA=MERGE_SHA,
        GITHUB_STEP_SUMMARY=str(summary),
    )
    if payload is not None:
        env["GITHUB_EVENT_PATH"] = str(HOOKS / payload)
    env.update({"GITHUB_TOKEN": "ghs_faketoken"} if token is None else token)
    return env


def gh_report_cli(
    fake: FakeGitHub,
    tmp: Path,
    *args: str | Path,
    event: str = "pull_request",
    payload: str | None = "pull_request.opened.json",
    token: dict[str, str] | None = None,
    cwd: Path = ROOT,
) -> Done:
    summary = tmp / "summary.md"
    summary.unlink(missing_ok=True)
    command = [sys.executable, "-c", "from canary_action.cli import main; main()", "gh-report", *map(str, args)]
    env = runner_env(fake.api_url, summary, event, payload, token)
    done = subprocess.run(command, capture_output=True, text=True, cwd=cwd, env=env, timeout=120, check=False)
    text = summary.read_text(encoding="utf-8") if summary.exists() else ""
    return Done(done.returncode, done.stdout, done.stderr, text)


@pytest.fixture
def history(tmp_path: Path) -> Path:
    folder = tmp_path / "history"
    for i in range(3):
        save(folder / f"base-{i}.json", 100 + i, run={"started_at": f"2026-01-0{i + 1}T00:00:00.000Z"})
    return folder


@pytest.fixture
def like(tmp_path: Path) -> Path:
    return save(tmp_path / "cur.json", 1)


@pytest.fixture
def slower(tmp_path: Path) -> Path:
    return save(tmp_path / "slow.json", 1, step_time_s=0.14)


def notice(title: str) -> str:
    return f"::notice title={escape_property(title)}::"


def warning(title: str) -> str:
    return f"::warning title={escape_property(title)}::"


def only_comment(fake: FakeGitHub) -> dict[str, Any]:
    [comment] = fake.comments[2]
    return comment


# -- a pull request ------------------------------------------------------------------------------------------------


def test_a_pull_request_gets_the_summary_a_check_run_and_one_sticky_comment_updated_in_place(
    fake_github: FakeGitHub, tmp_path: Path, like: Path, history: Path
) -> None:
    fake_github.add_pull(number=2, head_sha=PR_HEAD)

    first = gh_report_cli(fake_github, tmp_path, like, history, "-o", tmp_path / "report.md")

    assert first.code == 0, first.log
    assert "### ✅ rlhf-canary **pass** — `sft-smoke`" in first.summary
    assert "rlhf-canary **pass**" in (tmp_path / "report.md").read_text(encoding="utf-8")
    [check] = fake_github.check_runs
    assert (check["name"], check["head_sha"], check["status"], check["conclusion"]) == (
        CHECK,
        PR_HEAD,  # the pull request's head, never GITHUB_SHA (the merge commit)
        "completed",
        "success",
    )
    assert check["details_url"] == RUN_URL
    assert "rlhf-canary" in check["output"]["summary"]
    comment = only_comment(fake_github)
    assert comment["body"].split("\n", 1)[0] == MARKER
    assert f"comment: {comment['html_url']}" in first.stdout
    assert f"check run: {check['html_url']}" in first.stdout

    second = gh_report_cli(fake_github, tmp_path, like, history)

    assert second.code == 0, second.log
    assert only_comment(fake_github)["id"] == comment["id"]  # updated in place, not a second comment
    assert writes(fake_github).count(f"PATCH /repos/{REPO}/issues/comments/{comment['id']}") == 1
    assert [c["head_sha"] for c in fake_github.check_runs] == [PR_HEAD, PR_HEAD]  # a new check run per call


def test_a_regression_exits_1_with_a_failed_check_and_says_so_in_the_comment(
    fake_github: FakeGitHub, tmp_path: Path, slower: Path, history: Path
) -> None:
    fake_github.add_pull(number=2, head_sha=PR_HEAD)

    done = gh_report_cli(fake_github, tmp_path, slower, history)

    assert done.code == 1, done.log
    assert fake_github.check_runs[0]["conclusion"] == "failure"
    assert "step_time" in fake_github.check_runs[0]["output"]["title"]
    assert "rlhf-canary **regression**" in only_comment(fake_github)["body"]
    assert "rlhf-canary **regression**" in done.summary


def test_a_pull_requests_run_not_comparable_with_the_baselines_fails_as_in_the_action(
    fake_github: FakeGitHub, tmp_path: Path, history: Path
) -> None:
    """gh-report turned a run measured on other data (or with a forged fingerprint) into neutral, which passes a
    required check, where the action's report mode fails it. Now: exit 2, a failed check run saying why and how a
    maintainer accepts it; accepted for the head commit, neutral with the comparison's note."""
    fake_github.add_pull(number=2, head_sha=PR_HEAD)
    other_data = save(tmp_path / "other.json", 1, step_time_s=0.3, workload={"dataset_fingerprint": "e" * 64})

    done = gh_report_cli(fake_github, tmp_path, other_data, history)

    assert done.code == 2, done.log
    [check] = fake_github.check_runs
    assert (check["conclusion"], check["head_sha"]) == ("failure", PR_HEAD)
    assert "not comparable with the baselines" in check["output"]["summary"]
    assert f"--accept-config-change {PR_HEAD}" in done.log
    assert fake_github.comments.get(2, []) == []

    accepted = gh_report_cli(fake_github, tmp_path, other_data, history, "--accept-config-change", PR_HEAD)
    assert accepted.code == 0, accepted.log
    assert fake_github.check_runs[-1]["conclusion"] == "neutral"


def test_the_current_runs_own_thresholds_block_counts_only_with_trusted_config(
    fake_github: FakeGitHub, tmp_path: Path, history: Path
) -> None:
    """The current run may come from a pull request's code: its config's `thresholds:` block (here 1000 %) does not
    loosen the limits it is judged by unless the step says the config is trusted."""
    fake_github.add_pull(number=2, head_sha=PR_HEAD)
    loose = save(
        tmp_path / "loose.json", 1, step_time_s=0.14, config={"thresholds": {"max_step_time_increase_pct": 1000}}
    )

    untrusted = gh_report_cli(fake_github, tmp_path, loose, history)
    trusted = gh_report_cli(fake_github, tmp_path, loose, history, "--trusted-config")

    assert untrusted.code == 1, untrusted.log
    assert "thresholds block is not used" in untrusted.summary
    assert trusted.code == 0, trusted.log
    assert [c["conclusion"] for c in fake_github.check_runs] == ["failure", "success"]


def test_no_comment_writes_only_the_check_run(
    fake_github: FakeGitHub, tmp_path: Path, like: Path, history: Path
) -> None:
    fake_github.add_pull(number=2, head_sha=PR_HEAD)

    done = gh_report_cli(fake_github, tmp_path, like, history, "--no-comment")

    assert done.code == 0, done.log
    assert len(fake_github.check_runs) == 1
    assert fake_github.comments.get(2, []) == []
    assert not [r for r in fake_github.requests if "/issues/" in r.path or "/pulls/" in r.path]


def test_no_status_writes_only_the_comment_with_a_gh_token(
    fake_github: FakeGitHub, tmp_path: Path, like: Path, history: Path
) -> None:
    fake_github.add_pull(number=2, head_sha=PR_HEAD)

    done = gh_report_cli(fake_github, tmp_path, like, history, "--no-status", token={"GH_TOKEN": fake_github.token})

    assert done.code == 0, done.log
    assert fake_github.check_runs == []
    assert only_comment(fake_github)["body"].startswith(MARKER)
    assert not [r for r in fake_github.requests if "/check-runs" in r.path]


def test_no_comment_and_no_status_post_nothing_and_still_write_the_summary(
    fake_github: FakeGitHub, tmp_path: Path, slower: Path, history: Path
) -> None:
    done = gh_report_cli(fake_github, tmp_path, slower, history, "--no-comment", "--no-status", token=NO_TOKEN)

    assert done.code == 1, done.log
    assert "rlhf-canary **regression**" in done.summary
    assert fake_github.requests == []
    assert "no token" not in done.log  # nothing was asked to be posted: no token needed


def test_comment_mode_on_failure_keeps_a_pass_quiet_but_writes_the_check(
    fake_github: FakeGitHub, tmp_path: Path, like: Path, history: Path
) -> None:
    fake_github.add_pull(number=2, head_sha=PR_HEAD)

    done = gh_report_cli(fake_github, tmp_path, like, history, "--comment-mode", "on-failure")

    assert done.code == 0, done.log
    assert fake_github.comments.get(2, []) == []
    assert fake_github.check_runs[0]["conclusion"] == "success"


def test_a_pull_request_that_moved_on_gets_the_check_on_the_measured_commit_but_no_comment(
    fake_github: FakeGitHub, tmp_path: Path, like: Path, history: Path
) -> None:
    fake_github.add_pull(number=2, head_sha="a" * 40)  # pushed to since the event

    done = gh_report_cli(fake_github, tmp_path, like, history)

    assert done.code == 0, done.log
    assert [c["head_sha"] for c in fake_github.check_runs] == [PR_HEAD]
    assert fake_github.comments.get(2, []) == []
    assert notice("rlhf-canary: the pull request moved on") in done.stdout


# -- other events, no token, forks ---------------------------------------------------------------------------------


def test_a_push_gets_a_check_run_on_the_pushed_commit_and_no_comment(
    fake_github: FakeGitHub, tmp_path: Path, like: Path, history: Path
) -> None:
    done = gh_report_cli(fake_github, tmp_path, like, history, event="push", payload="push.json")

    assert done.code == 0, done.log
    [check] = fake_github.check_runs
    assert (check["head_sha"], check["conclusion"]) == (PUSH_SHA, "success")
    assert fake_github.comments == {}
    assert "push event, not a pull request: no comment" in done.stdout
    assert done.summary


@pytest.mark.parametrize(("current", "code"), [("like", 0), ("slower", 1)])
def test_no_token_says_so_writes_the_summary_posts_nothing_and_exits_as_compare(
    *, fake_github: FakeGitHub, tmp_path: Path, history: Path, current: str, code: int, request: pytest.FixtureRequest
) -> None:
    fake_github.add_pull(number=2, head_sha=PR_HEAD)
    report = tmp_path / "out" / "report.md"

    done = gh_report_cli(fake_github, tmp_path, request.getfixturevalue(current), history, "-o", report, token=NO_TOKEN)

    assert done.code == code, done.log
    assert warning("rlhf-canary gh-report: no token") + "GITHUB_TOKEN and GH_TOKEN are unset" in done.stdout
    assert "env: GITHUB_TOKEN: ${{ github.token }}" in done.stdout
    assert "permissions: pull-requests: write, checks: write" in done.stdout
    assert "rlhf-canary **" in done.summary
    assert report.is_file()
    assert fake_github.requests == []


def test_a_fork_pull_request_posts_nothing_and_says_how_to_publish(
    fake_github: FakeGitHub, tmp_path: Path, like: Path, history: Path
) -> None:
    fake_github.add_pull(number=2, head_sha=PR_HEAD, head_repo="octo-fork/Hello-World")

    done = gh_report_cli(fake_github, tmp_path, like, history, payload="pull_request.fork.json")

    assert done.code == 0, done.log
    assert notice("rlhf-canary gh-report: fork pull request") in done.stdout
    assert "read-only" in done.stdout
    assert "workflow_run" in done.stdout
    assert fake_github.requests == []
    assert done.summary


# -- GitHub refusing or failing ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("current", "code"), [("like", 0), ("slower", 1)])
def test_a_read_only_token_warns_naming_the_permissions_and_keeps_the_compare_exit_code(
    *, fake_github: FakeGitHub, tmp_path: Path, history: Path, current: str, code: int, request: pytest.FixtureRequest
) -> None:
    fake_github.add_pull(number=2, head_sha=PR_HEAD)
    fake_github.read_only = True

    done = gh_report_cli(fake_github, tmp_path, request.getfixturevalue(current), history)

    assert done.code == code, done.log  # as the action: a refused write is a warning, not a failure
    assert fake_github.check_runs == []
    assert fake_github.comments.get(2, []) == []
    assert warning("rlhf-canary could not complete the check run") in done.stdout
    assert warning("rlhf-canary could not write the PR comment") in done.stdout
    assert "add `checks: write` to the job's `permissions:` block" in done.stdout
    assert "add `pull-requests: write` to the job's `permissions:` block" in done.stdout
    assert "rlhf-canary **" in done.summary


def test_github_down_exits_3_after_writing_the_summary_and_the_report(
    fake_github: FakeGitHub, tmp_path: Path, like: Path, history: Path
) -> None:
    fake_github.add_pull(number=2, head_sha=PR_HEAD)
    fake_github.fail_next(status=502, times=100, headers={"Retry-After": "0"})
    report = tmp_path / "report.md"

    done = gh_report_cli(fake_github, tmp_path, like, history, "-o", report)

    assert done.code == 3, done.log
    assert "rlhf-canary **pass**" in done.summary
    assert "rlhf-canary **pass**" in report.read_text(encoding="utf-8")
    assert "::error title=GitHub request failed::" in done.stdout
    assert "the measured results are already written" in done.stdout
    assert fake_github.check_runs == []


def test_github_unreachable_exits_3_after_writing_the_summary_and_the_report(
    tmp_path: Path, like: Path, history: Path
) -> None:
    with socket.socket() as probe:  # a port nothing listens on: connection refused
        probe.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{probe.getsockname()[1]}"
    summary, report, out, sleeps = tmp_path / "summary.md", tmp_path / "report.md", io.StringIO(), []
    env = runner_env(closed, summary, "pull_request", "pull_request.opened.json", None)

    code = gh_report(GhReportRequest(like, (history,), output=report), env, out, sleep=sleeps.append)

    assert code == 3, out.getvalue()
    assert "rlhf-canary **pass**" in summary.read_text(encoding="utf-8")
    assert report.is_file()
    assert "cannot reach 127.0.0.1" in out.getvalue()
    assert sum(sleeps) <= 120  # bounded: an outage costs minutes, not the job's hours


def test_a_bad_token_exits_3_naming_the_variable(
    fake_github: FakeGitHub, tmp_path: Path, like: Path, history: Path
) -> None:
    fake_github.add_pull(number=2, head_sha=PR_HEAD)

    done = gh_report_cli(fake_github, tmp_path, like, history, token={"GITHUB_TOKEN": "ghs_wrong"})

    assert done.code == 3, done.log
    assert "401" in done.stdout
    assert "GITHUB_TOKEN" in done.stdout
    assert "ghs_wrong" not in done.log
    assert done.summary


# -- bad input -----------------------------------------------------------------------------------------------------


def test_a_team_s_templates_shape_the_comment_and_keep_the_marker_first(
    fake_github: FakeGitHub, tmp_path: Path, like: Path, history: Path
) -> None:
    fake_github.add_pull(number=2, head_sha=PR_HEAD)
    team = tmp_path / "team"
    team.mkdir()
    (team / "pr_comment.md.j2").write_text("Our layout: {{ v.title }}\n", encoding="utf-8")

    done = gh_report_cli(fake_github, tmp_path, like, history, "--templates", team)

    assert done.code == 0, done.log
    first_line, rest = only_comment(fake_github)["body"].split("\n", 1)
    assert first_line == MARKER
    assert rest.startswith("Our layout: ")


def test_a_broken_team_template_is_exit_2_naming_the_file_and_posts_nothing(
    fake_github: FakeGitHub, tmp_path: Path, like: Path, history: Path
) -> None:
    fake_github.add_pull(number=2, head_sha=PR_HEAD)
    team = tmp_path / "team"
    team.mkdir()
    (team / "pr_comment.md.j2").write_text("{% if %}", encoding="utf-8")

    done = gh_report_cli(fake_github, tmp_path, like, history, "--templates", team)

    assert done.code == 2, done.log
    assert "pr_comment.md.j2" in done.stderr
    assert "Traceback" not in done.log
    assert writes(fake_github) == []


def test_a_missing_baseline_is_exit_2_and_posts_nothing(fake_github: FakeGitHub, tmp_path: Path, like: Path) -> None:
    fake_github.add_pull(number=2, head_sha=PR_HEAD)

    done = gh_report_cli(fake_github, tmp_path, like, tmp_path / "nope.json")

    assert done.code == 2, done.log
    assert "does not exist" in done.stderr
    assert fake_github.requests == []


def test_outside_a_workflow_it_is_exit_2_pointing_at_compare(tmp_path: Path, like: Path, history: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(_RUNNER_PREFIXES)}
    command = [sys.executable, "-c", "from canary_action.cli import main; main()", "gh-report", str(like), str(history)]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120, check=False)
    assert done.returncode == 2, done.stderr
    assert "not running inside GitHub Actions" in done.stderr
    assert "compare" in done.stderr


# -- rlhf-canary 0.1's workflow ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("step_time_s", "verdict", "code", "conclusion"),
    [(0.1, "neutral", 0, "neutral"), (0.6, "regression", 1, "failure")],
)
def test_0_1s_workflow_line_with_a_0_1_baseline_posts_its_comment_and_check(
    fake_github: FakeGitHub, tmp_path: Path, *, step_time_s: float, verdict: str, code: int, conclusion: str
) -> None:
    """0.1's PR workflow ran exactly this (with `|| true`): a silent no-op here would stop its comments. Against a
    0.1 baseline a like run is neutral (0.1 recorded too little to pass every check); a slowdown still fails."""
    workload = {
        "model_name": "EleutherAI/pythia-70m", "dataset_name": "Anthropic/hh-rlhf", "batch_size": 2,
        "gradient_accumulation_steps": 4, "max_length": 256, "seed": 42,
    }  # fmt: skip
    a10g = {"gpus": [{"index": 0, "name": "NVIDIA A10G", "memory_total_mib": 23028.0}]}
    save(tmp_path / "current.json", 1, step_time_s=step_time_s, config=workload, env=a10g)
    shutil.copy(LEGACY_0_1, tmp_path / "baseline.json")
    fake_github.add_pull(number=2, head_sha=PR_HEAD)

    done = gh_report_cli(
        fake_github,
        tmp_path,
        *["current.json", "baseline.json", "--threshold-tier", "smoke", "--post-comment", "--update-status"],
        cwd=tmp_path,
    )

    assert done.code == code, done.log
    [check] = fake_github.check_runs
    assert (check["head_sha"], check["conclusion"]) == (PR_HEAD, conclusion)
    assert f"rlhf-canary **{verdict}**" in only_comment(fake_github)["body"]
    assert f"rlhf-canary **{verdict}**" in done.summary
    assert "tier smoke" in done.summary


def test_gh_report_imports_no_training_stack(
    fake_github: FakeGitHub, tmp_path: Path, like: Path, history: Path
) -> None:
    """A light reporter step (a GitHub-hosted runner, a slim container) has no torch."""
    fake_github.add_pull(number=2, head_sha=PR_HEAD)
    probe = (
        "import atexit, sys\n"
        "atexit.register(lambda: print('heavy:', [m for m in ('torch', 'transformers', 'trl', 'numpy')"
        " if m in sys.modules], file=sys.stderr))\n"
        "from canary_action.cli import main\n"
        "main()\n"
    )
    env = runner_env(fake_github.api_url, tmp_path / "summary.md", "pull_request", "pull_request.opened.json", None)
    command = [sys.executable, "-c", probe, "gh-report", str(like), str(history)]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "heavy: []" in done.stderr
    assert len(fake_github.comments[2]) == 1
