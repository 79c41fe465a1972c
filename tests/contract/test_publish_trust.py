"""Where results are published, and by whom (issue 14 items 3-7), end to end against the fake GitHub.

- measure → report: the job that runs pull request code makes no request and holds no token; the publish job
  of the same run compares the uploaded measurement and publishes it on the commit the trusted side chose;
- the measured commit: a merge checkout stands for its second parent, and a head that moved on is refused
  (before training: nothing published; during: the started check is completed as superseded);
- a hostile measured run: another workflow file, a flood of artifacts, a forged config name, a commit that
  heads several pull requests, a run of another repository;
- one new check run per run (an earlier or foreign check run is never touched), and the sticky comment found
  by the token's own identity (a personal access token's user).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from canary_action.github.client import GitHubClient
from tests.contract.fake_github import FakeGitHub, make_zip
from tests.contract.test_action_e2e import (
    ARTIFACT,
    CHECK,
    MARKER,
    PR_HEAD,
    REPO,
    SAME_CONFIG,
    SAME_DATA,
    FakeTrainer,
    Runner,
    _workflow_run_payload,
    _zip_dir,
    baselines,
    writes,
)
from tests.factories import make_metrics

FORK = "octo-fork/Hello-World"


BASE_COMMIT = "b" * 40  # a pull_request_target run's head_sha: the base branch's commit, not the PR's


def _pull_request_target(runner: Runner) -> Path:
    """pull_request.opened as pull_request_target delivers it (the same payload; the workflow is the base's)."""
    return Path(__file__).parents[1] / "fixtures" / "webhooks" / "pull_request.opened.json"


def _measure_then_upload(runner: Runner, fake: FakeGitHub) -> tuple[int, Any]:
    """The measure job: no token, mode measure; its output-dir uploaded as the run's artifact."""
    measured = runner.run("pull_request_target", _pull_request_target(runner), mode="measure", github_token="")
    run_id = fake.add_workflow_run(event="pull_request_target", head_sha=BASE_COMMIT)
    fake.add_artifact(
        run_id, name=measured.outputs["artifact-name"], content=_zip_dir(runner.workspace / "canary-output")
    )
    return run_id, measured


def _report_same_run(runner: Runner, run_id: int, **inputs: str) -> Any:
    runner.run_id = run_id
    return runner.run(
        "pull_request_target",
        _pull_request_target(runner),
        mode="report",
        measured_run_id=str(run_id),
        output_dir="canary-report",
        **inputs,
    )


# -- measure, then report in the same run ----------------------------------------------------------------------


def test_the_measure_job_makes_no_request_and_the_publish_job_reports_on_the_chosen_commit(
    runner: Runner, fake_github: FakeGitHub
) -> None:
    fake_github.add_pull(number=2, head_sha=PR_HEAD)
    baselines(fake_github, 2)

    run_id, measured = _measure_then_upload(runner, fake_github)
    assert measured.code == 0, measured.log
    assert fake_github.requests == []  # no token, no request: nothing for the PR's code to take
    assert "measured" in measured.summary
    assert (runner.workspace / measured.outputs["metrics-path"]).is_file()
    assert fake_github.token not in measured.log

    done = _report_same_run(runner, run_id, head_sha=PR_HEAD, pr_number="2")

    assert done.code == 0, done.log
    [check] = fake_github.check_runs
    assert (check["name"], check["head_sha"], check["conclusion"]) == (CHECK, PR_HEAD, "success")
    [comment] = fake_github.comments[2]
    assert comment["body"].startswith(MARKER)
    assert len(done.result().baselines) == 2  # compared by the publish job, with the default branch's runs
    assert done.outputs["verdict"] == "pass"


def test_a_token_given_to_the_measure_job_is_not_used_and_said(runner: Runner, fake_github: FakeGitHub) -> None:
    done = runner.run("pull_request_target", _pull_request_target(runner), mode="measure")
    assert done.code == 0
    assert fake_github.requests == []
    assert "::warning title=rlhf-canary%3A a token in the measure job::" in done.log


def test_a_crashed_measurement_is_still_reported_as_crashed(runner: Runner, fake_github: FakeGitHub) -> None:
    fake_github.add_pull(number=2, head_sha=PR_HEAD)
    runner.trainer.crash = True
    run_id, measured = _measure_then_upload(runner, fake_github)
    assert measured.code == 3
    done = _report_same_run(runner, run_id, head_sha=PR_HEAD, pr_number="2")
    assert done.code == 3
    [check] = fake_github.check_runs
    assert check["conclusion"] == "failure"


def test_report_refuses_a_pull_request_that_moved_on(runner: Runner, fake_github: FakeGitHub) -> None:
    fake_github.add_pull(number=2, head_sha=PR_HEAD)
    run_id, _ = _measure_then_upload(runner, fake_github)
    fake_github.pulls[2]["head"]["sha"] = "d" * 40  # pushed to while the canary trained

    done = _report_same_run(runner, run_id, head_sha=PR_HEAD, pr_number="2")

    assert done.code == 0
    assert writes(fake_github) == []
    assert "::notice title=rlhf-canary%3A the pull request moved on::" in done.log


def test_report_of_the_same_run_needs_the_commit_from_the_trusted_side(runner: Runner, fake_github: FakeGitHub) -> None:
    fake_github.add_pull(number=2, head_sha=PR_HEAD)
    run_id, _ = _measure_then_upload(runner, fake_github)
    done = _report_same_run(runner, run_id, pr_number="2")
    assert done.code == 2
    assert "needs head-sha" in done.log
    assert writes(fake_github) == []


# -- the measured commit in run mode -----------------------------------------------------------------------------


def _git(workspace: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(workspace), "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def _merge_checkout(workspace: Path) -> tuple[str, str]:
    """What actions/checkout leaves on pull_request: GitHub's merge commit of the PR's head into its base."""
    _git(workspace, "init", "-q", "-b", "master")
    _git(workspace, "add", "-A")
    _git(workspace, "commit", "-qm", "base")
    _git(workspace, "checkout", "-qb", "changes")
    (workspace / "change.txt").write_text("the pull request\n")
    _git(workspace, "add", "-A")
    _git(workspace, "commit", "-qm", "change")
    head = _git(workspace, "rev-parse", "HEAD")
    _git(workspace, "checkout", "-q", "master")
    _git(workspace, "merge", "-q", "--no-ff", "changes", "-m", "merge")
    return head, _git(workspace, "rev-parse", "HEAD")


def test_the_check_goes_on_the_commit_that_was_checked_out_not_the_events(
    runner: Runner, fake_github: FakeGitHub
) -> None:
    """The event named PR_HEAD, but by checkout time the PR had a newer head: that newer commit was measured."""
    measured_head, merge = _merge_checkout(runner.workspace)
    runner.merge_sha = merge
    fake_github.add_pull(number=2, head_sha=measured_head)
    baselines(fake_github, 2)

    done = runner.run("pull_request", "pull_request.opened.json")

    assert done.code == 0, done.log
    [check] = fake_github.check_runs
    assert check["head_sha"] == measured_head != PR_HEAD
    assert len(fake_github.comments[2]) == 1


def test_a_head_that_moved_before_training_gets_nothing(runner: Runner, fake_github: FakeGitHub) -> None:
    _, merge = _merge_checkout(runner.workspace)
    runner.merge_sha = merge
    fake_github.add_pull(number=2, head_sha="d" * 40)
    done = runner.run("pull_request", "pull_request.opened.json")
    assert done.code == 0
    assert writes(fake_github) == []
    assert "not published on it" in done.log
    assert (runner.workspace / done.outputs["result-path"]).is_file()  # measured and kept all the same


class _PushDuringTraining(FakeTrainer):
    fake: FakeGitHub | None = None

    def __call__(self, loaded: Any, output_dir: Path) -> Path:
        assert self.fake is not None
        self.fake.pulls[2]["head"]["sha"] = "e" * 40
        return super().__call__(loaded, output_dir)


def test_a_head_that_moves_during_training_completes_the_check_as_superseded(
    fake_github: FakeGitHub, tmp_path: Path
) -> None:
    trainer = _PushDuringTraining()
    trainer.fake = fake_github
    runner = Runner(fake_github, tmp_path, trainer=trainer)
    fake_github.add_pull(number=2, head_sha=PR_HEAD)

    done = runner.run("pull_request", "pull_request.opened.json")

    assert done.code == 0, done.log
    [check] = fake_github.check_runs
    assert (check["head_sha"], check["status"], check["conclusion"]) == (PR_HEAD, "completed", "neutral")
    assert check["output"]["title"] == "rlhf-canary: superseded"
    assert 2 not in fake_github.comments


# -- a hostile measured run ----------------------------------------------------------------------------------------


def _fork_run(fake: FakeGitHub, *, workflow_file: str = "canary.yml", head_repo: str = FORK) -> int:
    return fake.add_workflow_run(
        workflow_file=workflow_file, event="pull_request", branch="changes", head_sha=PR_HEAD, head_repo=head_repo
    )


def _metrics_zip(config_name: str = "sft-smoke") -> bytes:
    run = {"run_id": "pr-1", "config_name": config_name, "started_at": "2026-11-20T10:00:00Z"}
    metrics = make_metrics(run=run, workload=SAME_DATA, config=SAME_CONFIG)
    return make_zip({"pr-1/metrics.json": metrics.model_dump_json().encode()})


def test_a_run_of_another_workflow_file_with_a_flood_of_artifacts_is_refused_cheaply(
    runner: Runner, fake_github: FakeGitHub
) -> None:
    """A fork adds its own workflow, named like the real one, whose run uploads 25 artifacts."""
    fake_github.add_pull(number=2, head_sha=PR_HEAD, head_repo=FORK)
    run_id = _fork_run(fake_github, workflow_file="evil.yml")
    for i in range(25):
        name = ARTIFACT if i == 0 else f"rlhf-canary-gate-{i}"
        fake_github.add_artifact(run_id, name=name, content=_metrics_zip(name))
    payload = _workflow_run_payload(runner.tmp, run_id, PR_HEAD, fork="octo-fork")

    done = runner.run("workflow_run", payload, measured_workflow="canary.yml")

    assert done.code == 2
    assert "not the measured-workflow canary.yml" in done.log
    assert writes(fake_github) == []
    assert len(fake_github.requests) <= 2


def test_only_the_trusted_configs_artifact_is_read_and_named(runner: Runner, fake_github: FakeGitHub) -> None:
    fake_github.add_pull(number=2, head_sha=PR_HEAD, head_repo=FORK)
    run_id = _fork_run(fake_github)
    fake_github.add_artifact(run_id, name=ARTIFACT, content=_metrics_zip("release-gate"))  # forged name inside
    for i in range(5):
        fake_github.add_artifact(run_id, name=f"rlhf-canary-release-gate-{i}", content=_metrics_zip("release-gate"))
    payload = _workflow_run_payload(runner.tmp, run_id, PR_HEAD, fork="octo-fork")

    done = runner.run("workflow_run", payload, measured_workflow="canary.yml")

    assert done.code == 0, done.log
    [check] = fake_github.check_runs
    assert check["name"] == CHECK
    [comment] = fake_github.comments[2]
    assert comment["body"].startswith(MARKER)
    assert any("reported under 'sft-smoke'" in n for n in done.result().notes)
    downloads = [r for r in fake_github.requests if r.path.endswith("/zip")]
    assert len(downloads) == 1


def test_a_commit_heading_several_pull_requests_is_not_published(runner: Runner, fake_github: FakeGitHub) -> None:
    fake_github.add_pull(number=2, head_sha=PR_HEAD, head_repo=FORK)
    fake_github.add_pull(number=3, head_sha=PR_HEAD, head_repo=FORK, base_ref="release")
    run_id = _fork_run(fake_github)
    fake_github.add_artifact(run_id, name=ARTIFACT, content=_metrics_zip())
    payload = _workflow_run_payload(runner.tmp, run_id, PR_HEAD, fork="octo-fork")

    done = runner.run("workflow_run", payload, measured_workflow="canary.yml")

    assert done.code == 0
    assert writes(fake_github) == []
    assert "2 open pull requests have head commit" in done.log


def test_a_run_of_another_repository_than_the_pull_requests_head_is_refused(
    runner: Runner, fake_github: FakeGitHub
) -> None:
    fake_github.add_pull(number=2, head_sha=PR_HEAD, head_repo=FORK)
    run_id = _fork_run(fake_github, head_repo="mallory/Hello-World")
    fake_github.add_artifact(run_id, name=ARTIFACT, content=_metrics_zip())
    payload = _workflow_run_payload(runner.tmp, run_id, PR_HEAD, fork="mallory")
    data = json.loads(payload.read_text())
    data["workflow_run"]["pull_requests"] = [{"number": 2, "id": 1, "url": "https://api.github.com/x"}]
    payload.write_text(json.dumps(data))

    done = runner.run("workflow_run", payload, measured_workflow="canary.yml")

    assert done.code == 2
    assert "head is in octo-fork/Hello-World" in done.log
    assert writes(fake_github) == []


# -- check runs and comments ---------------------------------------------------------------------------------------


def test_a_check_run_this_run_did_not_create_is_never_touched(runner: Runner, fake_github: FakeGitHub) -> None:
    fake_github.add_pull(number=2, head_sha=PR_HEAD)
    client_body = {"name": CHECK, "head_sha": PR_HEAD, "status": "completed", "conclusion": "success"}
    foreign = GitHubClient(fake_github.api_url, fake_github.token).request(
        "POST", f"/repos/{REPO}/check-runs", body=client_body
    )
    foreign_id = int(foreign.body["id"])

    done = runner.run("pull_request", "pull_request.opened.json")

    assert done.code == 0
    assert not [r for r in fake_github.requests if r.method == "PATCH" and r.path.endswith(f"/check-runs/{foreign_id}")]
    assert len(fake_github.check_runs) == 2


def test_with_a_personal_access_token_the_comment_is_found_by_its_user(runner: Runner, fake_github: FakeGitHub) -> None:
    fake_github.token_user = "octocat"
    fake_github.add_pull(number=2, head_sha=PR_HEAD)
    other_bot = fake_github.add_comment(issue_number=2, body=f"{MARKER}\nanother app", user="other-app[bot]")
    first = runner.run("pull_request", "pull_request.opened.json")
    again = runner.run("pull_request", "pull_request.synchronize.json")

    assert (first.code, again.code) == (0, 0)
    comments = fake_github.comments[2]
    assert [c["user"]["login"] for c in comments] == ["other-app[bot]", "octocat"]  # one of ours, updated in place
    assert comments[0]["id"] == other_bot
    assert comments[0]["body"].endswith("another app")
    assert first.outputs["comment-url"] == again.outputs["comment-url"]


def test_with_an_installation_token_another_apps_sticky_comment_is_not_taken_over(
    runner: Runner, fake_github: FakeGitHub
) -> None:
    """The sticky comment of GITHUB_TOKEN's bot matched any bot's: another app's token took over github-actions'
    comment (and GITHUB_TOKEN another app's). Now by the bot GraphQL's viewer names; with no identity told, no comment
    at all (a new one every run would spam), and a warning says why."""
    fake_github.add_pull(number=2, head_sha=PR_HEAD)
    theirs = fake_github.add_comment(issue_number=2, body=f"{MARKER}\nactions' own", user="github-actions[bot]")
    fake_github.installation_bot = "other-app[bot]"
    first = runner.run("pull_request", "pull_request.opened.json")
    again = runner.run("pull_request", "pull_request.synchronize.json")

    assert (first.code, again.code) == (0, 0)
    comments = fake_github.comments[2]
    assert [c["user"]["login"] for c in comments] == ["github-actions[bot]", "other-app[bot]"]
    assert comments[0]["id"] == theirs
    assert comments[0]["body"].endswith("actions' own")

    fake_github.viewer_refused = True
    unknown = runner.run("pull_request", "pull_request.synchronize.json")
    assert unknown.code == 0, unknown.log
    assert len(fake_github.comments[2]) == 2
    assert "so no comment was written" in unknown.log
    assert fake_github.check_runs[-1]["head_sha"] == PR_HEAD


def test_metrics_of_the_measure_job_are_written_for_upload_even_when_training_crashes(
    runner: Runner, fake_github: FakeGitHub
) -> None:
    runner.trainer.crash = True
    done = runner.run("pull_request_target", _pull_request_target(runner), mode="measure", github_token="")
    assert done.code == 3
    assert (runner.workspace / done.outputs["metrics-path"]).is_file()
    assert fake_github.requests == []


def test_an_output_dir_leading_out_of_the_workspace_is_refused(runner: Runner, fake_github: FakeGitHub) -> None:
    """A checked-out repository can hold a symbolic link where output-dir points: never written through."""
    outside = runner.tmp / "outside"
    outside.mkdir()
    (runner.workspace / "canary-output").symlink_to(outside)
    linked = runner.run("pull_request_target", _pull_request_target(runner), mode="measure", github_token="")
    dotted = runner.run("push", "push.json", ref="refs/heads/master", output_dir="../outside")

    for done in (linked, dotted):
        assert done.code == 2, done.log
        assert "not to a folder inside the workspace" in done.log
    assert list(outside.iterdir()) == []
    assert runner.trainer.calls == 0


def test_a_measure_job_that_left_nothing_gets_a_failed_check_saying_so(runner: Runner, fake_github: FakeGitHub) -> None:
    """A setup command that failed, a process killed while loading: no artifact, and still an answer on the PR."""
    fake_github.add_pull(number=2, head_sha=PR_HEAD)
    run_id = fake_github.add_workflow_run(event="pull_request_target", head_sha=BASE_COMMIT)

    done = _report_same_run(runner, run_id, head_sha=PR_HEAD, pr_number="2")

    assert done.code == 3, done.log
    [check] = fake_github.check_runs
    assert (check["head_sha"], check["conclusion"]) == (PR_HEAD, "failure")
    assert "ended before it measured anything" in check["output"]["summary"]
    assert 2 not in fake_github.comments


def test_a_run_listing_two_pull_requests_is_not_published_on_the_first(runner: Runner, fake_github: FakeGitHub) -> None:
    fake_github.add_pull(number=2, head_sha=PR_HEAD)
    fake_github.add_pull(number=3, head_sha=PR_HEAD, base_ref="release")
    run_id = fake_github.add_workflow_run(event="pull_request", branch="changes", head_sha=PR_HEAD)
    fake_github.add_artifact(run_id, name=ARTIFACT, content=_metrics_zip())
    payload = _workflow_run_payload(runner.tmp, run_id, PR_HEAD, fork=None)
    data = json.loads(payload.read_text())
    data["workflow_run"]["pull_requests"] = [{"number": n, "id": n, "url": "https://api.github.com/x"} for n in (2, 3)]
    payload.write_text(json.dumps(data))

    done = runner.run("workflow_run", payload, measured_workflow=".github/workflows/canary.yml")

    assert done.code == 0
    assert writes(fake_github) == []
    assert "2 open pull requests have head commit" in done.log


def test_a_measurement_that_does_not_read_gets_a_failed_check(runner: Runner, fake_github: FakeGitHub) -> None:
    fake_github.add_pull(number=2, head_sha=PR_HEAD, head_repo=FORK)
    run_id = _fork_run(fake_github)
    fake_github.add_artifact(run_id, name=ARTIFACT, content=make_zip({"pr-1/metrics.json": b'{"schema_version": 9}'}))
    payload = _workflow_run_payload(runner.tmp, run_id, PR_HEAD, fork="octo-fork")

    done = runner.run("workflow_run", payload, measured_workflow="canary.yml")

    assert done.code == 2, done.log
    [check] = fake_github.check_runs
    assert (check["conclusion"], check["output"]["title"]) == ("failure", "rlhf-canary: nothing to compare")


def test_a_pull_request_cannot_loosen_the_limits_it_is_judged_by(runner: Runner, fake_github: FakeGitHub) -> None:
    """The measured config's thresholds block is the pull request's: report mode judges by the default branch's."""
    fake_github.add_pull(number=2, head_sha=PR_HEAD, head_repo=FORK)
    baselines(fake_github, 3)
    run_id = _fork_run(fake_github)
    loose = {**SAME_CONFIG, "thresholds": {"max_step_time_increase_pct": 1000.0}}
    run = {"run_id": "pr-1", "started_at": "2026-11-20T10:00:00Z"}
    slow = make_metrics(step_time_s=0.2, seed=11, run=run, workload=SAME_DATA, config=loose)
    fake_github.add_artifact(
        run_id, name=ARTIFACT, content=make_zip({"pr-1/metrics.json": slow.model_dump_json().encode()})
    )
    payload = _workflow_run_payload(runner.tmp, run_id, PR_HEAD, fork="octo-fork")

    done = runner.run("workflow_run", payload, measured_workflow="canary.yml")

    assert done.code == 1, done.log
    assert done.result().verdict == "regression"
    assert any("thresholds block is not used" in n for n in done.result().notes)


def _forked_slow_run(fake: FakeGitHub, config: dict[str, Any], workload: dict[str, Any] | None = None) -> int:
    """A fork's run, 2x slower than the baselines, measured with `config` (and `workload`: the recorded data)."""
    run_id = _fork_run(fake)
    run = {"run_id": "pr-1", "started_at": "2026-11-20T10:00:00Z"}
    slow = make_metrics(step_time_s=0.2, seed=11, run=run, workload=workload or SAME_DATA, config=config)
    fake.add_artifact(run_id, name=ARTIFACT, content=make_zip({"pr-1/metrics.json": slow.model_dump_json().encode()}))
    return run_id


def test_a_pull_request_that_changes_its_config_is_a_failed_check_not_a_neutral_one(
    runner: Runner, fake_github: FakeGitHub
) -> None:
    """An honest 2x slowdown with `batch_size: 16` in the pull request's config is not comparable with the
    baselines, so it was neutral — and neutral passes a required check. It is a failed check naming the change."""
    fake_github.add_pull(number=2, head_sha=PR_HEAD, head_repo=FORK)
    baselines(fake_github, 3)
    run_id = _forked_slow_run(fake_github, {**SAME_CONFIG, "batch_size": 16, "max_steps": 6})
    payload = _workflow_run_payload(runner.tmp, run_id, PR_HEAD, fork="octo-fork")

    done = runner.run("workflow_run", payload, measured_workflow="canary.yml")

    assert done.code == 2, done.log
    [check] = fake_github.check_runs
    assert (check["head_sha"], check["name"], check["conclusion"]) == (PR_HEAD, CHECK, "failure")
    assert check["output"]["title"] == "rlhf-canary: the pull request changes its canary config"
    said = check["output"]["summary"].replace("\\", "")  # markdown-escaped
    assert "batch_size: 4 → 16" in said
    assert "max_steps: 30 → 6" in said
    assert f"accept-config-change: {PR_HEAD}" in said
    assert 2 not in fake_github.comments


def test_a_run_made_incomparable_without_changing_the_config_is_a_failed_check_too(
    runner: Runner, fake_github: FakeGitHub
) -> None:
    """The config the same, but the data it names changed (a data file in the repository, or a forged fingerprint:
    the artifact is the pull request's to write): not comparable, so neutral before — which passes a required
    check. A failed check naming the difference, unless a maintainer accepts that commit."""
    fake_github.add_pull(number=2, head_sha=PR_HEAD, head_repo=FORK)
    baselines(fake_github, 3)
    run_id = _forked_slow_run(fake_github, SAME_CONFIG, workload={"dataset_fingerprint": "e" * 64})
    payload = _workflow_run_payload(runner.tmp, run_id, PR_HEAD, fork="octo-fork")

    done = runner.run("workflow_run", payload, measured_workflow="canary.yml")
    accepted = runner.run("workflow_run", payload, measured_workflow="canary.yml", accept_config_change=PR_HEAD)

    assert done.code == 2, done.log
    first = fake_github.check_runs[0]
    assert first["conclusion"] == "failure"
    assert first["output"]["title"] == "rlhf-canary: the pull request's run is not comparable with the default branch's"
    assert "dataset" in first["output"]["summary"]
    assert accepted.code == 0, accepted.log
    assert accepted.result().verdict == "neutral"
    assert any("accepted by a maintainer for this commit" in n for n in accepted.result().notes)


def test_a_maintainer_accepts_a_config_change_for_that_commit_only(runner: Runner, fake_github: FakeGitHub) -> None:
    """`accept-config-change` names the commit a maintainer read: another SHA accepts nothing."""
    fake_github.add_pull(number=2, head_sha=PR_HEAD, head_repo=FORK)
    baselines(fake_github, 3)
    run_id = _forked_slow_run(fake_github, {**SAME_CONFIG, "batch_size": 16})
    payload = _workflow_run_payload(runner.tmp, run_id, PR_HEAD, fork="octo-fork")

    other = runner.run("workflow_run", payload, measured_workflow="canary.yml", accept_config_change="a" * 40)
    accepted = runner.run("workflow_run", payload, measured_workflow="canary.yml", accept_config_change=PR_HEAD)

    assert other.code == 2, other.log
    assert accepted.code == 0, accepted.log
    result = accepted.result()
    assert result.verdict == "neutral"  # judged as measured: another batch size is not comparable
    assert any("accepted by a maintainer for this commit: batch_size: 4 → 16" in n for n in result.notes)
    assert [c["conclusion"] for c in fake_github.check_runs] == ["failure", "neutral"]


PAIR_ID = "sft-smoke-pair-20261120T100000Z"


def _pair_zip(*, head_s: float, base_s: float, steps: int = 40, confirmed: bool = False) -> bytes:
    """A measure job's lockstep pair as its artifact holds it: base/ and head/ metrics.json and pair.json, both
    sides written by the job that ran the pull request's code; `confirmed`: with a confirming pair of the same
    figures in its confirmation/ folder."""
    files = _pair_files(
        PAIR_ID, head_s=head_s, base_s=base_s, steps=steps, confirmation=CONFIRMING if confirmed else None
    )
    if confirmed:
        inner = _pair_files(CONFIRMING, head_s=head_s, base_s=base_s, steps=steps, confirmation=None)
        files |= {f"{PAIR_ID}/confirmation/{name}": data for name, data in inner.items()}
    return make_zip(files)


CONFIRMING = "sft-smoke-pair-20261120T100100Z"


def _pair_files(
    pair_id: str, *, head_s: float, base_s: float, steps: int, confirmation: str | None
) -> dict[str, bytes]:
    from canary_action.metrics import schema
    from canary_action.metrics.pair import PairRecord, Round, SideEnd

    files: dict[str, bytes] = {}
    for side, step_s in (("base", base_s), ("head", head_s)):
        pair = {"pair_id": pair_id, "side": side, "chunk_steps": 2, "tree": f"/trees/{side}"}
        series = {schema.PAIR_ROUND: [float(i // 2) for i in range(steps)]}
        run = {"run_id": f"{pair_id}-{side}", "started_at": "2026-11-20T10:00:00Z"}
        metrics = make_metrics(
            num_steps=steps, step_time_s=step_s, seed=11, run=run, workload=SAME_DATA, config=SAME_CONFIG, pair=pair,
            series=series,
        )  # fmt: skip
        files[f"{pair_id}/{side}/metrics.json"] = metrics.model_dump_json().encode()
    ends = {
        side: SideEnd(tree=f"/trees/{side}", config_path="canary.yaml", metrics_path=f"{side}/metrics.json",
                      exit_code=0, steps=steps)
        for side in ("base", "head")
    }  # fmt: skip
    record = PairRecord(pair_id=pair_id, chunk_steps=2, seed=1, started_at="t", finished_at="t", wall_s=1.0,
                        rounds=[Round(index=0, order=["head", "base"])], confirmation=confirmation, **ends)  # fmt: skip
    files[f"{pair_id}/pair.json"] = record.model_dump_json().encode()
    return files


def _report_a_forks_pair(
    runner: Runner, fake_github: FakeGitHub, *, head_s: float, base_s: float, confirmed: bool = False
) -> Any:
    """Report mode on a fork's measured run whose artifact holds a pair of those step times, beside three
    default-branch runs."""
    fake_github.add_pull(number=2, head_sha=PR_HEAD, head_repo=FORK)
    baselines(fake_github, 3)
    run_id = _fork_run(fake_github)
    content = _pair_zip(head_s=head_s, base_s=base_s, confirmed=confirmed)
    fake_github.add_artifact(run_id, name=ARTIFACT, content=content)
    payload = _workflow_run_payload(runner.tmp, run_id, PR_HEAD, fork="octo-fork")
    return runner.run("workflow_run", payload, measured_workflow="canary.yml")


def test_a_forged_base_side_cannot_pass_a_slowdown_that_the_default_branchs_runs_fail(
    runner: Runner, fake_github: FakeGitHub
) -> None:
    """The pull request's job wrote both sides: a 2x slower head beside a base side made as slow passes paired.
    The default branch's three runs fail it, and a paired pass never overrides that; the base side is the pair's
    partner only, not one more baseline."""
    done = _report_a_forks_pair(runner, fake_github, head_s=0.2, base_s=0.2)

    assert done.code == 1, done.log
    result = done.result()
    step = next(c for c in result.checks if c.name == "step_time")
    assert step.status == "fail"
    assert "against 3 baselines" in step.message
    assert "whatever the lockstep pair says" in step.message
    assert result.pairing is not None
    assert f"{PAIR_ID}-base" not in [b.run_id for b in result.baselines]
    assert [c["conclusion"] for c in fake_github.check_runs] == ["failure"]


def test_an_honest_pair_still_passes_in_report_mode(runner: Runner, fake_github: FakeGitHub) -> None:
    done = _report_a_forks_pair(runner, fake_github, head_s=0.1, base_s=0.1)

    assert done.code == 0, done.log
    assert done.result().verdict == "pass"
    assert done.result().pairing is not None


def test_a_pair_with_its_confirming_pair_is_one_measurement(runner: Runner, fake_github: FakeGitHub) -> None:
    """A measure job whose pair failed a speed check uploads the confirming pair inside it (confirmation/): one
    measurement, judged with its confirmation, not an artifact of two pairs."""
    done = _report_a_forks_pair(runner, fake_github, head_s=0.1, base_s=0.1, confirmed=True)

    assert done.code == 0, done.log
    assert done.result().verdict == "pass"
    assert done.result().pairing is not None


def test_a_pair_the_report_did_not_expect_is_refused(runner: Runner, fake_github: FakeGitHub) -> None:
    """`baseline: artifacts` on the publish job (the trusted side): the pull request's workflow cannot choose to
    be judged as a pair."""
    fake_github.add_pull(number=2, head_sha=PR_HEAD, head_repo=FORK)
    baselines(fake_github, 3)
    run_id = _fork_run(fake_github)
    fake_github.add_artifact(run_id, name=ARTIFACT, content=_pair_zip(head_s=0.1, base_s=0.1))
    payload = _workflow_run_payload(runner.tmp, run_id, PR_HEAD, fork="octo-fork")

    done = runner.run("workflow_run", payload, measured_workflow="canary.yml", baseline="artifacts")

    assert done.code == 2, done.log
    [check] = fake_github.check_runs
    assert (check["conclusion"], check["output"]["title"]) == ("failure", "rlhf-canary: nothing to compare")
    assert "expects artifact baselines alone" in check["output"]["summary"]


# -- mode auto on pull_request_target ------------------------------------------------------------------------------


def test_auto_on_pull_request_target_measures_and_makes_no_request(runner: Runner, fake_github: FakeGitHub) -> None:
    """pull_request_target's job holds a write token while a workflow may have checked out the pull request's
    code: auto ran mode run there (training beside the token, and publishing). It measures now, and says so."""
    fake_github.add_pull(number=2, head_sha=PR_HEAD)
    done = runner.run("pull_request_target", _pull_request_target(runner))
    assert done.code == 0, done.log
    assert fake_github.requests == []
    assert "mode auto on pull_request_target is measure" in done.log
    assert "token is read-only" not in done.log  # under this event it is not
    assert (runner.workspace / done.outputs["metrics-path"]).is_file()


def test_mode_run_on_pull_request_target_refuses_a_checkout_that_is_not_the_events_commit(
    runner: Runner, fake_github: FakeGitHub
) -> None:
    """The workspace here is no checkout of the event's commit (the base branch): it may be the pull request's."""
    fake_github.add_pull(number=2, head_sha=PR_HEAD)
    done = runner.run("pull_request_target", _pull_request_target(runner), mode="run")
    assert done.code == 2, done.log
    assert "mode run on pull_request_target with no git checkout checked out" in done.log
    assert [r for r in fake_github.requests if r.method != "GET"] == []


@pytest.mark.parametrize(
    ("event", "payload", "inputs"),
    [
        ("issue_comment", "workflow_dispatch.json", {}),
        ("workflow_dispatch", "workflow_dispatch.json", {"pr_number": "2"}),
    ],
)
def test_other_events_that_hold_a_token_and_name_a_pull_request_are_guarded_as_pull_request_target(
    runner: Runner, fake_github: FakeGitHub, event: str, payload: str, inputs: dict[str, str]
) -> None:
    """`auto` guarded pull_request_target only: on issue_comment, and on a workflow_dispatch given pr-number, it
    still resolved to run where the job may hold a pull request's code beside a token. Both now measure, and an
    explicit run is refused unless the event's own commit is checked out."""
    fake_github.add_pull(number=2, head_sha=PR_HEAD)
    done = runner.run(event, payload, ref="refs/heads/master", **inputs)
    assert done.code == 0, done.log
    assert f"mode auto on {event}" in done.log
    assert [r for r in fake_github.requests if r.method != "GET"] == []
    refused = runner.run(event, payload, ref="refs/heads/master", mode="run", **inputs)
    assert refused.code == 2, refused.log
    assert f"mode run on {event}" in refused.log
    assert [r for r in fake_github.requests if r.method != "GET"] == []
