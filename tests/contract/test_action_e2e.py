"""The action end to end, from real webhook payloads (tests/fixtures/webhooks) and the environment the runner
sets, against a fake GitHub that checks every request against GitHub's OpenAPI description.

Training is the one thing replaced here: `FakeTrainer` writes the metrics.json a run would (tests/factories
documents, the same schema), so these tests are about GitHub; tests/integration/test_action_training.py runs
the entrypoint with a real tiny training.
"""

from __future__ import annotations

import io
import json
import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from pytest_httpserver import HTTPServer

from canary_action.compare.result import CompareResult
from canary_action.config.load import parse_config
from canary_action.errors import TrainingError
from canary_action.github.action import main
from canary_action.metrics.io import write_metrics
from tests.contract.fake_github import FakeGitHub, make_zip
from tests.factories import make_metrics
from tests.unit.test_action_parts import parse_outputs

ROOT = Path(__file__).parents[2]
HOOKS = ROOT / "tests" / "fixtures" / "webhooks"
REPO = "Codertocat/Hello-World"
PR_HEAD = "ec26c3e57ca3a959ca5aad62de7213c562f8c821"  # pull_request.*.json: the head commit of PR 2
MERGE_SHA = "f" * 40  # GITHUB_SHA on pull_request: the merge commit, which must never get the check
ARTIFACT = "rlhf-canary-sft-smoke"
CHECK = "rlhf-canary (sft-smoke)"
MARKER = "<!-- rlhf-canary:sticky:sft-smoke -->"
SAME_DATA = {"dataset_fingerprint": "d" * 64}  # factories derive it from the seed; one canary has one dataset


def _workspace_config() -> dict[str, Any]:
    """The canary.yaml every Runner's workspace holds: the tiny SFT config, named sft-smoke."""
    config: dict[str, Any] = yaml.safe_load((ROOT / "configs" / "tiny" / "sft.yaml").read_text())
    return {**config, "name": "sft-smoke"}


#: The resolved config a run of the workspace's canary.yaml records, as `canary run` writes it: one config for the
#: baselines and the pull request (the factory seed draws other noise, not another experiment). Report mode compares
#: it with the default branch's.
SAME_CONFIG = parse_config(_workspace_config(), source="canary.yaml").config.model_dump(mode="json")


@dataclass
class FakeTrainer:
    """Writes what `canary run` writes: DIR/<run_id>/metrics.json (also for a crash, then raises)."""

    step_time_s: float = 0.1
    seed: int = 11
    crash: bool = False
    calls: int = 0

    def __call__(self, loaded: Any, output_dir: Path) -> Path:
        self.calls += 1
        run_id = f"sft-smoke-pr-{self.calls}"
        status = {"state": "failed", "reason": "error", "stage": "train", "exception_type": "RuntimeError"}
        metrics = make_metrics(
            step_time_s=self.step_time_s,
            seed=self.seed,
            run={"run_id": run_id, "started_at": "2026-11-20T10:00:00Z"},
            workload=SAME_DATA,
            config=loaded.config.model_dump(mode="json"),
            **({"status": status} if self.crash else {}),
        )
        path = output_dir / run_id / "metrics.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        write_metrics(metrics, path)
        if self.crash:
            raise TrainingError("RuntimeError during train: CUDA error: an illegal memory access", metrics_path=path)
        return path


@dataclass
class Outcome:
    code: int
    log: str
    outputs: dict[str, str]
    summary: str
    sleeps: list[float]
    workspace: Path

    def result(self) -> CompareResult:
        return CompareResult.model_validate_json((self.workspace / self.outputs["result-path"]).read_text())


@dataclass
class Runner:
    """Calls the action as the Actions runner does: every declared input as INPUT_<NAME> (hyphens kept),
    defaults filled in, the GITHUB_* variables, and a fresh GITHUB_OUTPUT and job summary per step."""

    fake: FakeGitHub
    tmp: Path
    trainer: FakeTrainer = field(default_factory=FakeTrainer)
    steps: int = 0
    run_id: int | None = None
    """GITHUB_RUN_ID of the next steps; None: 900 + the step's number."""
    merge_sha: str = MERGE_SHA
    """GITHUB_SHA: on pull_request, the merge commit actions/checkout checks out."""

    @property
    def workspace(self) -> Path:
        return self.tmp / "workspace"

    def __post_init__(self) -> None:
        self.workspace.mkdir(parents=True, exist_ok=True)
        (self.workspace / "canary.yaml").write_text(yaml.safe_dump(_workspace_config()))

    def env(self, event: str, payload: Path | None, inputs: dict[str, str], ref: str) -> dict[str, str]:
        declared = yaml.safe_load((ROOT / "action.yml").read_text())["inputs"]
        env = {
            f"INPUT_{name.upper()}": str(spec.get("default", "")).replace("${{ github.token }}", self.fake.token)
            for name, spec in declared.items()
        }
        env.update({f"INPUT_{name.upper()}": value for name, value in inputs.items()})
        self.steps += 1
        env.update(
            GITHUB_EVENT_NAME=event,
            GITHUB_REPOSITORY=self.fake.repo,
            GITHUB_API_URL=self.fake.api_url,
            GITHUB_SERVER_URL="https://github.com",
            GITHUB_RUN_ID=str(self.run_id or 900 + self.steps),
            GITHUB_WORKFLOW_REF=f"{self.fake.repo}/.github/workflows/canary.yml@{ref}",
            GITHUB_SHA=self.merge_sha,
            GITHUB_REF=ref,
            GITHUB_WORKSPACE=str(self.workspace),
            GITHUB_OUTPUT=str(self.tmp / f"output-{self.steps}"),
            GITHUB_STEP_SUMMARY=str(self.tmp / f"summary-{self.steps}"),
        )
        if payload is not None:
            env["GITHUB_EVENT_PATH"] = str(payload)
        return env

    def run(self, event: str, payload: str | Path | None, ref: str = "refs/pull/2/merge", **inputs: str) -> Outcome:
        path = HOOKS / payload if isinstance(payload, str) else payload
        env = self.env(event, path, {k.replace("_", "-"): v for k, v in inputs.items()}, ref)
        out, sleeps = io.StringIO(), []
        code = main(env, trainer=self.trainer, out=out, sleep=sleeps.append)
        output_file, summary_file = Path(env["GITHUB_OUTPUT"]), Path(env["GITHUB_STEP_SUMMARY"])
        return Outcome(
            code=code,
            log=out.getvalue(),
            outputs=parse_outputs(output_file.read_text()) if output_file.exists() else {},
            summary=summary_file.read_text() if summary_file.exists() else "",
            sleeps=sleeps,
            workspace=self.workspace,
        )


def add_baseline(fake: FakeGitHub, seed: int, *, created_at: str, expired: bool = False, **files: bytes) -> int:
    """A successful default-branch push run that uploaded the canary's output-dir as the baseline artifact."""
    run_id = fake.add_workflow_run(event="push", created_at=created_at)
    run = {"run_id": f"sft-smoke-main-{seed}", "started_at": created_at}
    metrics = make_metrics(seed=seed, run=run, workload=SAME_DATA, config=SAME_CONFIG)
    content = files or {f"sft-smoke-main-{seed}/metrics.json": metrics.model_dump_json().encode()}
    fake.add_artifact(run_id, name=ARTIFACT, content=make_zip(content), expired=expired)
    return run_id


def baselines(fake: FakeGitHub, n: int = 2) -> list[int]:
    return [add_baseline(fake, seed, created_at=f"2026-11-{10 + seed:02d}T00:00:00Z") for seed in range(1, n + 1)]


def writes(fake: FakeGitHub) -> list[str]:
    """What was written: POSTs and PATCHes, but a GraphQL query (a POST that reads: who the token is)."""
    return [f"{r.method} {r.path}" for r in fake.requests if r.method in ("POST", "PATCH") and r.path != "/graphql"]


# -- pull requests from the same repository ------------------------------------------------------------------------


def test_a_pull_request_gets_a_check_on_its_head_sha_and_one_sticky_comment(
    runner: Runner, fake_github: FakeGitHub
) -> None:
    fake_github.add_pull(number=2, head_sha=PR_HEAD)
    baselines(fake_github, 2)

    done = runner.run("pull_request", "pull_request.opened.json")

    assert done.code == 0, done.log
    assert done.outputs["verdict"] == "pass"
    [check] = fake_github.check_runs
    assert (check["name"], check["head_sha"], check["status"], check["conclusion"]) == (
        CHECK,
        PR_HEAD,
        "completed",
        "success",
    )
    assert check["output"]["title"]
    assert "rlhf-canary" in check["output"]["summary"]
    assert check["details_url"] == f"https://github.com/{REPO}/actions/runs/901"
    [comment] = fake_github.comments[2]
    assert comment["body"].split("\n", 1)[0] == MARKER
    assert done.outputs["comment-url"] == comment["html_url"]
    assert done.outputs["check-run-url"] == check["html_url"]
    # the check was shown running before the training started
    first_write = next(r for r in fake_github.requests if r.method == "POST")
    assert first_write.path.endswith("/check-runs")
    assert first_write.body["status"] == "in_progress"
    # both baselines were found on the default branch, successful push runs only, and used
    searched = next(r for r in fake_github.requests if "/actions/workflows/" in r.path)
    assert searched.path == f"/repos/{REPO}/actions/workflows/canary.yml/runs"
    assert searched.query["branch"] == "master"
    assert searched.query["status"] == "success"
    assert [b.run_id for b in done.result().baselines] == ["sft-smoke-main-2", "sft-smoke-main-1"]
    # the artifact download followed GitHub's redirect to storage without the token
    assert len(fake_github.blob_requests) == 2
    assert all("authorization" not in r.headers for r in fake_github.blob_requests)
    # results on disk and in the outputs, relative to the workspace (the container's paths are not the host's)
    for key in ("metrics-path", "result-path", "report-path"):
        assert not Path(done.outputs[key]).is_absolute()
        assert (runner.workspace / done.outputs[key]).is_file()
    assert done.outputs["artifact-name"] == ARTIFACT
    assert "rlhf-canary **pass**" in done.summary
    assert f"::add-mask::{fake_github.token}" in done.log
    assert done.log.count(fake_github.token) == 1  # only in the mask command itself


def test_a_rerun_creates_a_new_check_run_and_updates_the_comment(runner: Runner, fake_github: FakeGitHub) -> None:
    """GitHub refuses to take a completed check run back to in_progress: every run creates its own."""
    fake_github.add_pull(number=2, head_sha=PR_HEAD)
    baselines(fake_github, 2)
    first = runner.run("pull_request", "pull_request.opened.json")
    first_check = dict(fake_github.check_runs[0])
    runner.trainer.step_time_s = 0.2  # the rerun finds a regression: the same comment must now say so
    again = runner.run("pull_request", "pull_request.synchronize.json")

    assert (first.code, again.code) == (0, 1)
    old, new = fake_github.check_runs
    assert old == first_check  # the earlier run's check is never touched
    assert (old["conclusion"], new["conclusion"]) == ("success", "failure")
    assert new["head_sha"] == old["head_sha"] == PR_HEAD
    assert not [r for r in fake_github.requests if r.method == "PATCH" and r.path.endswith(f"/{old['id']}")][1:]
    [comment] = fake_github.comments[2]
    assert "rlhf-canary **regression**" in comment["body"]
    assert again.outputs["comment-url"] == first.outputs["comment-url"]
    assert writes(fake_github).count(f"POST /repos/{REPO}/check-runs") == 2
    assert writes(fake_github).count(f"POST /repos/{REPO}/issues/2/comments") == 1


def test_a_regression_fails_the_step_and_annotates_the_config(runner: Runner, fake_github: FakeGitHub) -> None:
    fake_github.add_pull(number=2, head_sha=PR_HEAD)
    baselines(fake_github, 3)
    runner.trainer.step_time_s = 0.13

    done = runner.run("pull_request", "pull_request.opened.json")

    assert done.code == 1
    assert done.outputs["verdict"] == "regression"
    [check] = fake_github.check_runs
    assert check["conclusion"] == "failure"
    annotations = fake_github.annotations[check["id"]]
    assert annotations
    assert {a["path"] for a in annotations} == {"canary.yaml"}
    assert any(a["annotation_level"] == "failure" and "step_time" in a["title"] for a in annotations)


def test_fail_on_never_reports_a_regression_without_failing(runner: Runner, fake_github: FakeGitHub) -> None:
    fake_github.add_pull(number=2, head_sha=PR_HEAD)
    baselines(fake_github, 3)
    runner.trainer.step_time_s = 0.13

    done = runner.run("pull_request", "pull_request.opened.json", fail_on="never")

    assert (done.code, done.outputs["verdict"]) == (0, "regression")
    assert fake_github.check_runs[0]["conclusion"] == "neutral"


def test_no_baseline_is_neutral_and_shows_the_workflow_that_makes_one(runner: Runner, fake_github: FakeGitHub) -> None:
    fake_github.add_pull(number=2, head_sha=PR_HEAD)

    done = runner.run("pull_request", "pull_request.opened.json")

    assert (done.code, done.outputs["verdict"]) == (0, "neutral")
    assert fake_github.check_runs[0]["conclusion"] == "neutral"
    body = fake_github.comments[2][0]["body"]
    snippet = body.split("```yaml\n", 1)[1].split("```", 1)[0]
    steps = yaml.safe_load(snippet)["jobs"]["canary"]["steps"]
    assert steps[0]["with"]["config"] == "canary.yaml"
    assert steps[1]["with"]["name"] == ARTIFACT  # exactly the name the search looks for


def test_an_expired_artifact_is_skipped_and_said(runner: Runner, fake_github: FakeGitHub) -> None:
    fake_github.add_pull(number=2, head_sha=PR_HEAD)
    add_baseline(fake_github, 1, created_at="2026-11-01T00:00:00Z")
    expired = add_baseline(fake_github, 2, created_at="2026-11-02T00:00:00Z", expired=True)

    done = runner.run("pull_request", "pull_request.opened.json")

    assert done.code == 0
    assert [b.run_id for b in done.result().baselines] == ["sft-smoke-main-1"]
    assert f"skipped run {expired}: its artifact {ARTIFACT} expired" in done.result().notes
    assert not any(r.path.endswith("/zip") and str(expired) in r.path for r in fake_github.requests)


def test_a_server_error_then_success_recovers(runner: Runner, fake_github: FakeGitHub) -> None:
    fake_github.add_pull(number=2, head_sha=PR_HEAD)
    baselines(fake_github, 1)
    fake_github.fail_next(method="GET", path_contains="/actions/workflows/", status=500, times=2)

    done = runner.run("pull_request", "pull_request.opened.json")

    assert done.code == 0
    assert len(done.result().baselines) == 1
    assert done.sleeps == [1.0, 2.0]  # exponential backoff


def test_rate_limits_are_waited_out(runner: Runner, fake_github: FakeGitHub) -> None:
    fake_github.add_pull(number=2, head_sha=PR_HEAD)
    baselines(fake_github, 1)
    reset = int(time.time()) + 30
    fake_github.fail_next(
        method="GET",
        path_contains="/actions/workflows/",
        status=403,
        headers={"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(reset)},
        body={"message": "API rate limit exceeded for installation ID 1."},
    )
    fake_github.fail_next(
        method="POST",
        path_contains="/comments",
        status=403,
        headers={"retry-after": "7"},
        body={"message": "You have exceeded a secondary rate limit."},
    )

    done = runner.run("pull_request", "pull_request.opened.json")

    assert done.code == 0
    assert len(fake_github.comments[2]) == 1
    assert len(done.sleeps) == 2
    assert 25 <= done.sleeps[0] <= 31
    assert done.sleeps[1] == 7.0


def test_a_read_only_token_degrades_to_results_and_warnings(runner: Runner, fake_github: FakeGitHub) -> None:
    fake_github.add_pull(number=2, head_sha=PR_HEAD)
    baselines(fake_github, 1)
    fake_github.read_only = True

    done = runner.run("pull_request", "pull_request.opened.json")

    assert done.code == 0
    assert done.outputs["verdict"] == "pass"
    assert fake_github.check_runs == []
    assert fake_github.comments.get(2, []) == []
    assert "::warning title=rlhf-canary could not start the check run::" in done.log
    assert "checks: write" in done.log
    assert (runner.workspace / done.outputs["result-path"]).is_file()
    assert done.summary


def test_github_down_loses_nothing_measured_and_exits_3(runner: Runner, fake_github: FakeGitHub) -> None:
    fake_github.add_pull(number=2, head_sha=PR_HEAD)
    baselines(fake_github, 1)
    fake_github.fail_next(method="PATCH", status=502, times=50)

    done = runner.run("pull_request", "pull_request.opened.json")

    assert done.code == 3
    assert done.outputs["verdict"] == "pass"
    assert (runner.workspace / done.outputs["metrics-path"]).is_file()
    assert (runner.workspace / done.outputs["result-path"]).is_file()
    assert "::error title=GitHub request failed::" in done.log
    assert "measured results are already written" in done.log
    assert sum(done.sleeps) <= 120


def test_a_bad_token_is_exit_3_with_the_fix(runner: Runner, fake_github: FakeGitHub) -> None:
    fake_github.add_pull(number=2, head_sha=PR_HEAD)
    done = runner.run("pull_request", "pull_request.opened.json", github_token="ghs_wrong")
    assert done.code == 3
    assert "401" in done.log
    assert "github-token" in done.log
    assert "ghs_wrong" not in done.log.replace("::add-mask::ghs_wrong", "")


def test_a_crashed_run_is_reported_with_what_was_measured(runner: Runner, fake_github: FakeGitHub) -> None:
    fake_github.add_pull(number=2, head_sha=PR_HEAD)
    baselines(fake_github, 1)
    runner.trainer.crash = True

    done = runner.run("pull_request", "pull_request.opened.json")

    assert done.code == 3
    assert done.outputs["verdict"] == "crashed"
    assert fake_github.check_runs[0]["conclusion"] == "failure"
    assert "rlhf-canary **crashed**" in fake_github.comments[2][0]["body"]
    assert "CUDA error" in done.log


def test_a_bad_config_is_exit_2_annotated_on_the_file(runner: Runner, fake_github: FakeGitHub) -> None:
    (runner.workspace / "canary.yaml").write_text("name: x\ntraining_type: dpoo\n")
    done = runner.run("pull_request", "pull_request.opened.json")
    assert done.code == 2
    assert "::error title=invalid canary config,file=canary.yaml::" in done.log
    assert done.log.count("::error") == 1  # on the file, not again without it
    assert writes(fake_github) == []


@pytest.fixture
def gpu_machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A machine with the NVIDIA driver loaded whose job sees no GPU (a container started without it)."""
    from canary_action.github import gpu

    driver = tmp_path / "driver-version"
    driver.write_text("NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.95.05\n")
    monkeypatch.setattr(gpu, "NVIDIA_DRIVER", driver)
    monkeypatch.setattr(gpu, "torch_sees_cuda", lambda: False)


@pytest.mark.usefixtures("gpu_machine")
def test_a_job_that_must_see_a_gpu_and_does_not_fails_with_the_fix(runner: Runner, fake_github: FakeGitHub) -> None:
    """Issue 35: device auto on a GPU machine whose job sees none is a failed step and check, not a neutral CPU
    run; nothing trains."""
    fake_github.add_pull(number=2, head_sha=PR_HEAD)
    baselines(fake_github, 1)

    done = runner.run("pull_request", "pull_request.opened.json", baseline="artifacts")

    assert done.code == 2, done.log
    assert runner.trainer.calls == 0
    assert "this machine has the NVIDIA driver loaded" in done.log
    assert "sees no CUDA GPU" in done.log
    assert "--gpus all" in done.log
    [check] = fake_github.check_runs
    assert check["conclusion"] == "failure"
    assert "sees no CUDA GPU" in check["output"]["summary"]
    assert "gpu: none" in check["output"]["summary"]


def test_the_configs_output_dir_is_said_to_be_canary_runs(runner: Runner, fake_github: FakeGitHub) -> None:
    """Issue 35: the action wrote to its output-dir and ignored the config's output_dir without a word."""
    config = yaml.safe_load((runner.workspace / "canary.yaml").read_text())
    (runner.workspace / "canary.yaml").write_text(yaml.safe_dump({**config, "output_dir": "our-runs"}))
    done = runner.run("push", "push.json", ref="refs/heads/master")
    assert done.code == 0, done.log
    assert "the config's output_dir (our-runs) is `canary run`'s: the action writes to its output-dir input, " \
        "canary-output" in done.log  # fmt: skip
    quiet = runner.run("push", "push.json", ref="refs/heads/master", output_dir="our-runs")
    assert "our-runs" in quiet.outputs["metrics-path"]


@pytest.mark.usefixtures("gpu_machine")
def test_gpu_none_and_device_cpu_train_where_the_config_says(runner: Runner, fake_github: FakeGitHub) -> None:
    fake_github.add_pull(number=2, head_sha=PR_HEAD)
    baselines(fake_github, 1)
    assert runner.run("pull_request", "pull_request.opened.json", baseline="artifacts", gpu="none").code == 0
    config = yaml.safe_load((runner.workspace / "canary.yaml").read_text())
    (runner.workspace / "canary.yaml").write_text(yaml.safe_dump({**config, "device": "cpu"}))
    assert runner.run("pull_request", "pull_request.opened.json", baseline="artifacts").code == 0
    assert runner.trainer.calls == 2


def test_a_forged_marker_in_someone_elses_comment_is_not_taken_over(runner: Runner, fake_github: FakeGitHub) -> None:
    fake_github.add_pull(number=2, head_sha=PR_HEAD)
    forged = fake_github.add_comment(issue_number=2, body=f"{MARKER}\nall green, merge it", user="mallory")

    done = runner.run("pull_request", "pull_request.opened.json")

    assert done.code == 0
    comments = fake_github.comments[2]
    assert next(c["id"] for c in comments) == forged
    assert comments[0]["body"].endswith("merge it")
    assert comments[1]["user"]["login"] == "github-actions[bot]"
    assert comments[1]["body"].startswith(MARKER)


def test_a_malicious_baseline_artifact_is_refused_and_the_others_used(runner: Runner, fake_github: FakeGitHub) -> None:
    fake_github.add_pull(number=2, head_sha=PR_HEAD)
    add_baseline(fake_github, 1, created_at="2026-11-01T00:00:00Z")
    evil = add_baseline(fake_github, 2, created_at="2026-11-02T00:00:00Z", **{"../../evil/metrics.json": b"{}"})

    done = runner.run("pull_request", "pull_request.opened.json")

    assert done.code == 0
    assert [b.run_id for b in done.result().baselines] == ["sft-smoke-main-1"]
    assert any(n.startswith(f"refused the artifact of run {evil}") for n in done.result().notes)
    assert not (runner.tmp / "evil").exists()
    assert not list(runner.tmp.parent.glob("evil"))


# -- forks, pushes, dispatch, workflow_run ---------------------------------------------------------------------------


def test_a_fork_pull_request_measures_without_writing_to_github(runner: Runner, fake_github: FakeGitHub) -> None:
    fake_github.add_pull(number=2, head_sha=PR_HEAD, head_repo="octo-fork/Hello-World")
    baselines(fake_github, 1)

    done = runner.run("pull_request", "pull_request.fork.json")

    assert done.code == 0
    assert done.outputs["verdict"] == "pass"
    assert writes(fake_github) == []
    assert "::notice title=rlhf-canary%3A fork pull request::" in done.log
    assert (runner.workspace / "canary-output" / "result.json").is_file()


def test_a_push_to_the_default_branch_measures_a_baseline_without_publishing(
    runner: Runner, fake_github: FakeGitHub
) -> None:
    baselines(fake_github, 1)
    done = runner.run("push", "push.json", ref="refs/heads/master")
    assert done.code == 0
    assert writes(fake_github) == []
    assert done.outputs["artifact-name"] == ARTIFACT
    assert (runner.workspace / done.outputs["metrics-path"]).is_file()
    assert "rlhf-canary **pass**" in done.summary  # compared with the earlier baselines: the nightly trend


def test_a_workflow_dispatch_with_pr_number_measures_and_publishes_nothing_beside_its_token(
    httpserver: HTTPServer, tmp_path: Path
) -> None:
    """A workflow_dispatch given pr-number may have checked out that pull request's code in a job that holds a token:
    `auto` ran mode run there and published on the pull request. It measures now, as on pull_request_target, and
    says so; publishing is the report job's (docs/examples/rerun.yml)."""
    fake = FakeGitHub(httpserver, repo="octo-org/octo-repo", default_branch="main")
    head = "c" * 40
    fake.add_pull(number=7, head_sha=head)
    runner = Runner(fake, tmp_path)

    done = runner.run(
        "workflow_dispatch", "workflow_dispatch.json", ref="refs/heads/main", pr_number="7", head_sha=head
    )

    assert done.code == 0, done.log
    assert "mode auto on workflow_dispatch with pr-number is measure" in done.log
    assert writes(fake) == []
    assert (runner.workspace / done.outputs["metrics-path"]).is_file()
    assert fake.violations == []


def _workflow_run_payload(tmp: Path, run_id: int, head_sha: str, fork: str | None) -> Path:
    payload = json.loads((HOOKS / "workflow_run.completed.json").read_text())
    run = payload["workflow_run"]
    run.update(id=run_id, event="pull_request", head_sha=head_sha, head_branch="changes", pull_requests=[])
    run["html_url"] = f"https://github.com/{REPO}/actions/runs/{run_id}"
    run["repository"]["full_name"] = REPO
    payload["repository"]["default_branch"] = "master"  # the fake's, where the baselines are
    if fork:
        run["head_repository"]["full_name"] = f"{fork}/Hello-World"
        run["head_repository"]["owner"]["login"] = fork
    path = tmp / "workflow_run.json"
    path.write_text(json.dumps(payload))
    return path


def _zip_dir(folder: Path) -> bytes:
    return make_zip({str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()})


def test_the_fork_safe_pair_publishes_from_workflow_run(runner: Runner, fake_github: FakeGitHub) -> None:
    fake_github.add_pull(number=2, head_sha=PR_HEAD, head_repo="octo-fork/Hello-World")
    baselines(fake_github, 2)
    measured = runner.run("pull_request", "pull_request.fork.json")  # the fork's job: read-only, uploads
    assert measured.code == 0
    assert writes(fake_github) == []
    run_id = fake_github.add_workflow_run(
        event="pull_request", branch="changes", head_sha=PR_HEAD, head_repo="octo-fork/Hello-World"
    )
    fake_github.add_artifact(run_id, name=ARTIFACT, content=_zip_dir(runner.workspace / "canary-output"))
    payload = _workflow_run_payload(runner.tmp, run_id, PR_HEAD, fork="octo-fork")

    done = runner.run(
        "workflow_run", payload, ref="refs/heads/master", output_dir="canary-report", measured_workflow="canary.yml"
    )

    assert done.code == 0, done.log
    [check] = fake_github.check_runs
    assert (check["head_sha"], check["conclusion"], check["name"]) == (PR_HEAD, "success", CHECK)
    [comment] = fake_github.comments[2]
    assert comment["body"].startswith(MARKER)
    assert f"https://github.com/{REPO}/actions/runs/{run_id}" in comment["body"]
    # A fork's commit has no pull requests in GitHub's commit lookup (the fake answers as GitHub does: []): the
    # pull request was found by the run's head repository and branch, then confirmed by the API.
    assert any(r.path.endswith(f"/commits/{PR_HEAD}/pulls") for r in fake_github.requests)
    [lookup] = [r for r in fake_github.requests if r.path == f"/repos/{REPO}/pulls"]
    assert lookup.query["head"] == "octo-fork:changes"
    assert done.outputs["verdict"] == "pass"


def test_a_fork_lookup_takes_only_the_exact_head_commit_and_repository(runner: Runner, fake_github: FakeGitHub) -> None:
    """Another fork's pull request from a branch of the same name, and this fork's pull request at another commit,
    are not the measured one: nothing is published rather than the wrong pull request."""
    fake_github.add_pull(number=2, head_sha="c" * 40, head_repo="octo-fork/Hello-World")  # moved on since
    fake_github.add_pull(number=3, head_sha=PR_HEAD, head_repo="other-fork/Hello-World")  # same branch name
    run_id = fake_github.add_workflow_run(
        event="pull_request", branch="changes", head_sha=PR_HEAD, head_repo="octo-fork/Hello-World"
    )
    payload = _workflow_run_payload(runner.tmp, run_id, PR_HEAD, fork="octo-fork")
    done = runner.run("workflow_run", payload, ref="refs/heads/master", measured_workflow="canary.yml")
    assert done.code == 0, done.log
    assert "no open pull request has head commit" in done.log
    assert writes(fake_github) == []


def test_report_mode_ignores_runs_not_for_a_pull_request(runner: Runner, fake_github: FakeGitHub) -> None:
    payload = json.loads((HOOKS / "workflow_run.completed.json").read_text())  # a workflow_dispatch run
    path = runner.tmp / "dispatch_run.json"
    path.write_text(json.dumps(payload))
    done = runner.run("workflow_run", path)
    assert done.code == 0
    assert "nothing to publish" in done.log
    assert fake_github.requests == []


def test_report_mode_refuses_a_pull_request_whose_head_moved(runner: Runner, fake_github: FakeGitHub) -> None:
    fake_github.add_pull(number=2, head_sha="d" * 40)  # pushed to after the run
    run_id = fake_github.add_workflow_run(event="pull_request", branch="changes", head_sha=PR_HEAD)
    payload = _workflow_run_payload(runner.tmp, run_id, PR_HEAD, fork=None)
    data = json.loads(payload.read_text())
    data["workflow_run"]["pull_requests"] = [{"number": 2, "id": 1, "url": "https://api.github.com/x"}]
    payload.write_text(json.dumps(data))

    done = runner.run("workflow_run", payload, measured_workflow="canary.yml")

    assert done.code == 0
    assert writes(fake_github) == []
    assert "pull request #2 is now at dddddddddddd: not published" in done.log


def assert_only_a_failed_check(fake: FakeGitHub) -> None:
    """A refused measurement: the pull request learns it has no verdict (a failed check), and nothing else."""
    assert writes(fake) == [
        f"POST /repos/{REPO}/check-runs",
        f"PATCH /repos/{REPO}/check-runs/{fake.check_runs[0]['id']}",
    ]
    [check] = fake.check_runs
    assert (check["name"], check["conclusion"], check["output"]["title"]) == (
        CHECK,
        "failure",
        "rlhf-canary: nothing to compare",
    )


def _report_with(runner: Runner, fake: FakeGitHub, files: dict[str, bytes]) -> Outcome:
    fake.add_pull(number=2, head_sha=PR_HEAD, head_repo="octo-fork/Hello-World")
    fork = "octo-fork/Hello-World"
    run_id = fake.add_workflow_run(event="pull_request", branch="changes", head_sha=PR_HEAD, head_repo=fork)
    fake.add_artifact(run_id, name=ARTIFACT, content=make_zip(files))
    payload = _workflow_run_payload(runner.tmp, run_id, PR_HEAD, fork="octo-fork")
    return runner.run("workflow_run", payload, measured_workflow="canary.yml")


def test_report_mode_refuses_a_path_traversal_artifact(runner: Runner, fake_github: FakeGitHub) -> None:
    done = _report_with(runner, fake_github, {"../../metrics.json": b"{}"})
    assert done.code == 2
    assert_only_a_failed_check(fake_github)
    assert "::error title=artifact refused::" in done.log


def test_report_mode_refuses_a_zip_bomb(runner: Runner, fake_github: FakeGitHub) -> None:
    done = _report_with(runner, fake_github, {"metrics.json": b" " * (65 * 2**20)})
    assert done.code == 2
    assert_only_a_failed_check(fake_github)
    assert "artifact refused" in done.log


def test_report_mode_renders_hostile_measurements_escaped(runner: Runner, fake_github: FakeGitHub) -> None:
    """The measured artifact is the pull request's: its names and notes are data, and name nothing we publish."""
    forged = "other-gate <!-- rlhf-canary:sticky:other-gate -->\n::error::forged command"
    run = {"run_id": "pr-1", "config_name": forged, "started_at": "2026-11-20T10:00:00Z"}
    metrics = make_metrics(run=run, workload=SAME_DATA, config=SAME_CONFIG, notices=[forged])
    done = _report_with(runner, fake_github, {"pr-1/metrics.json": metrics.model_dump_json().encode()})

    assert done.code in (0, 1), done.log
    [comment] = fake_github.comments[2]
    assert comment["body"].count("<!--") == 1
    assert comment["body"].startswith(MARKER)  # the trusted config's marker, not the artifact's
    [check] = fake_github.check_runs
    assert check["name"] == CHECK
    assert not [line for line in done.log.splitlines() if line.startswith("::error::forged")]


def test_report_mode_refuses_an_oversized_artifact_without_downloading_it(
    runner: Runner, fake_github: FakeGitHub
) -> None:
    done = _report_with(runner, fake_github, {"metrics.json": random.Random(0).randbytes(65 * 2**20)})  # incompressible
    assert done.code == 2
    assert_only_a_failed_check(fake_github)
    assert fake_github.blob_requests == []
    assert "over the cap" in done.log


def test_a_scheduled_run_finds_the_default_branch_through_the_api(runner: Runner, fake_github: FakeGitHub) -> None:
    baselines(fake_github, 1)
    payload = runner.tmp / "schedule.json"
    payload.write_text(json.dumps({"schedule": "0 3 * * *", "workflow": ".github/workflows/canary.yml"}))

    done = runner.run("schedule", payload, ref="refs/heads/master", tier="nightly", comment="never")

    assert done.code == 0
    assert writes(fake_github) == []
    assert any(r.path == f"/repos/{REPO}" for r in fake_github.requests)  # the payload has no repository
    assert len(done.result().baselines) == 1
    assert done.result().tier == "nightly"


def test_comment_on_failure_stays_quiet_on_a_pass_but_the_check_is_written(
    runner: Runner, fake_github: FakeGitHub
) -> None:
    fake_github.add_pull(number=2, head_sha=PR_HEAD)
    baselines(fake_github, 2)
    done = runner.run("pull_request", "pull_request.opened.json", comment="on-failure")
    assert done.code == 0
    assert fake_github.comments.get(2, []) == []
    assert "comment-url" not in done.outputs
    assert fake_github.check_runs[0]["conclusion"] == "success"


def test_more_than_50_annotations_go_in_batches(fake_github: FakeGitHub) -> None:
    from canary_action.github.client import GitHubClient
    from canary_action.github.publish import Annotation, Publisher

    publisher = Publisher(GitHubClient(fake_github.api_url, fake_github.token), REPO)
    check = publisher.start_check(CHECK, PR_HEAD, None)
    notes = [Annotation("canary.yaml", i, "warning", f"check {i}", "why") for i in range(1, 121)]
    publisher.finish_check(check, "failure", {"title": "t", "summary": "s", "text": "x"}, notes)
    assert len(fake_github.annotations[check.id]) == 120
    patches = [r for r in fake_github.requests if r.method == "PATCH"]
    assert [len(r.body["output"].get("annotations", [])) for r in patches] == [50, 50, 20]
    assert fake_github.check_runs[0]["conclusion"] == "failure"


def test_report_mode_imports_no_training_stack(runner: Runner, fake_github: FakeGitHub) -> None:
    """The report-only action installs the light package on a GitHub-hosted runner: no torch there."""
    fake_github.add_pull(number=2, head_sha=PR_HEAD, head_repo="octo-fork/Hello-World")
    metrics = make_metrics(workload=SAME_DATA, config=SAME_CONFIG).model_dump_json().encode()
    fork = "octo-fork/Hello-World"
    run_id = fake_github.add_workflow_run(event="pull_request", branch="changes", head_sha=PR_HEAD, head_repo=fork)
    fake_github.add_artifact(run_id, name=ARTIFACT, content=make_zip({"pr/metrics.json": metrics}))
    payload = _workflow_run_payload(runner.tmp, run_id, PR_HEAD, "octo-fork")
    env = runner.env("workflow_run", payload, {"measured-workflow": "canary.yml"}, "x")
    probe = (
        "import atexit, runpy, sys\n"
        "atexit.register(lambda: print('heavy:', [m for m in ('torch', 'transformers', 'trl', 'numpy')"
        " if m in sys.modules], file=sys.stderr))\n"
        f"runpy.run_path({str(ROOT / 'entrypoint' / 'main.py')!r}, run_name='__main__')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], env={**env, "PATH": "/usr/bin:/bin"}, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "heavy: []" in done.stderr
    assert len(fake_github.comments[2]) == 1


def test_a_bug_is_exit_3_with_its_traceback_never_1(runner: Runner, fake_github: FakeGitHub) -> None:
    fake_github.add_pull(number=2, head_sha=PR_HEAD)

    def broken(loaded: Any, output_dir: Path) -> Path:
        raise KeyError("oops")

    runner.trainer = broken  # type: ignore[assignment]
    done = runner.run("pull_request", "pull_request.opened.json")
    assert done.code == 3
    assert "KeyError: 'oops'" in done.log
    assert "::error title=rlhf-canary::unexpected error" in done.log
    [check] = fake_github.check_runs  # never left "in progress"
    assert (check["status"], check["conclusion"]) == ("completed", "failure")


def test_a_cuda_config_without_a_visible_gpu_fails_fast_with_the_runtime_fix(
    runner: Runner, fake_github: FakeGitHub
) -> None:
    """The real trainer's preflight (this machine has no GPU): the check run started for it is completed."""
    from canary_action.github.training import ChildTrainer

    fake_github.add_pull(number=2, head_sha=PR_HEAD)
    config = yaml.safe_load((runner.workspace / "canary.yaml").read_text())
    (runner.workspace / "canary.yaml").write_text(yaml.safe_dump({**config, "device": "cuda"}))
    runner.trainer = ChildTrainer(runner.workspace)  # type: ignore[assignment]

    done = runner.run("pull_request", "pull_request.opened.json")

    assert done.code == 2
    assert "sees no CUDA GPU" in done.log
    assert "the config says device: cuda, but this job sees no CUDA GPU" in done.log  # before the child starts
    assert "`options: --gpus all`" in done.log
    [check] = fake_github.check_runs
    assert (check["status"], check["conclusion"]) == ("completed", "failure")
    assert "sees no CUDA GPU" in check["output"]["summary"]


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can give files away (the action runs as root)")
def test_the_output_dir_is_handed_back_to_the_workspace_owner(runner: Runner, fake_github: FakeGitHub) -> None:
    os.chown(runner.workspace, 4321, 4321)
    done = runner.run("pull_request", "pull_request.fork.json")
    assert done.code == 0
    out = runner.workspace / "canary-output"
    owners = {(p.stat().st_uid, p.stat().st_gid) for p in [out, *out.rglob("*")]}
    assert owners == {(4321, 4321)}


def test_a_cancelled_job_still_writes_its_outputs(runner: Runner, fake_github: FakeGitHub) -> None:
    """The runner stops a cancelled job's container with SIGTERM: an interrupt, not a silent death."""
    fake_github.add_pull(number=2, head_sha=PR_HEAD)

    def cancelled(loaded: Any, output_dir: Path) -> Path:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)  # the signal arrives before this ends
        raise AssertionError("not interrupted")

    runner.trainer = cancelled  # type: ignore[assignment]
    before = signal.getsignal(signal.SIGTERM)
    done = runner.run("pull_request", "pull_request.opened.json")
    assert done.code == 130
    assert "::error title=rlhf-canary::cancelled" in done.log
    assert done.outputs["artifact-name"] == ARTIFACT
    [check] = fake_github.check_runs  # never left "in progress"
    assert (check["status"], check["conclusion"]) == ("completed", "cancelled")
    assert signal.getsignal(signal.SIGTERM) is before  # the handler is the action's only while it runs


def test_report_mode_refuses_a_name_used_as_a_file_and_a_folder(runner: Runner, fake_github: FakeGitHub) -> None:
    done = _report_with(runner, fake_github, {"a": b"x", "a/metrics.json": b"{}"})
    assert done.code == 2, done.log
    assert "as a file and as a folder" in done.log
    assert_only_a_failed_check(fake_github)


def test_a_deeply_nested_event_payload_is_exit_2(runner: Runner, fake_github: FakeGitHub) -> None:
    payload = runner.tmp / "nested.json"
    payload.write_text("[" * 100_000 + "]" * 100_000)
    done = runner.run("pull_request", payload)
    assert done.code == 2, done.log
    assert "nested too deeply" in done.log
    assert fake_github.requests == []


def _hostile_zip(kind: str) -> bytes:
    """A canary artifact a pull request bent so that zipfile raises more than BadZipFile reading it."""
    raw = bytearray(make_zip({"pr-1/metrics.json": b"{}"}))
    central = raw.index(b"PK\x01\x02")
    if kind == "extract version 6.4":  # NotImplementedError
        raw[central + 6 : central + 8] = (64).to_bytes(2, "little")
    elif kind == "UTF-8 flag on bytes that are not":  # UnicodeDecodeError
        raw[central + 8 : central + 10] = (int.from_bytes(raw[central + 8 : central + 10], "little") | 0x800).to_bytes(
            2, "little"
        )
        raw[central + 46] = 0xFF
    else:  # a shifted central directory: ValueError (a negative seek)
        end = raw.rindex(b"PK\x05\x06")
        raw[end + 16 : end + 20] = (len(raw) * 4).to_bytes(4, "little")
    return bytes(raw)


@pytest.mark.parametrize("kind", ["extract version 6.4", "UTF-8 flag on bytes that are not", "shifted directory"])
def test_report_mode_refuses_a_hostile_zip_and_still_publishes_the_failed_check(
    kind: str, runner: Runner, fake_github: FakeGitHub
) -> None:
    """Each of these ended report mode as an unexpected error (exit 3) with no check run: the pull request's
    report vanished. Now each is an artifact refused: exit 2 and the failed check."""
    fake_github.add_pull(number=2, head_sha=PR_HEAD, head_repo="octo-fork/Hello-World")
    fork = "octo-fork/Hello-World"
    run_id = fake_github.add_workflow_run(event="pull_request", branch="changes", head_sha=PR_HEAD, head_repo=fork)
    fake_github.add_artifact(run_id, name=ARTIFACT, content=_hostile_zip(kind))
    done = runner.run("workflow_run", _workflow_run_payload(runner.tmp, run_id, PR_HEAD, fork="octo-fork"),
                      measured_workflow="canary.yml")  # fmt: skip
    assert done.code == 2, done.log[-3000:]
    assert_only_a_failed_check(fake_github)
    assert "artifact refused" in done.log
