"""Which runs become baselines (issue 15 item 18), end to end against the fake GitHub: `baseline-workflow` (the
runs of another workflow file, a nightly), and a pull request's merge base with the default branch, whose run
compares like with like — with the fallback to the newest default-branch runs, said in the report, when the
merge base has no run or GitHub cannot name it.
"""

from __future__ import annotations

import pytest

from tests.contract.fake_github import FakeGitHub, make_zip
from tests.contract.github_objects import sha
from tests.contract.test_action_e2e import (
    ARTIFACT,
    CHECK,
    PR_HEAD,
    REPO,
    SAME_CONFIG,
    SAME_DATA,
    Runner,
    _workflow_run_payload,
    _zip_dir,
    writes,
)
from tests.factories import make_metrics

FORK = "octo-fork/Hello-World"
MERGE_BASE = sha("where the pull request branched off master")


def add_run(
    fake: FakeGitHub,
    seed: int,
    *,
    day: int,
    workflow_file: str = "canary.yml",
    event: str = "push",
    head_sha: str | None = None,
    branch: str | None = None,
    head_repo: str | None = None,
) -> int:
    """A successful run of `workflow_file` that uploaded the canary's results as the baseline artifact."""
    created_at = f"2026-11-{day:02d}T00:00:00Z"
    run_id = fake.add_workflow_run(
        workflow_file=workflow_file,
        event=event,
        created_at=created_at,
        head_sha=head_sha,
        branch=branch,
        head_repo=head_repo,
    )
    run = {"run_id": f"sft-smoke-{workflow_file.split('.', maxsplit=1)[0]}-{seed}", "started_at": created_at}
    metrics = make_metrics(seed=seed, run=run, workload=SAME_DATA, config=SAME_CONFIG)
    fake.add_artifact(
        run_id, name=ARTIFACT, content=make_zip({f"{seed}/metrics.json": metrics.model_dump_json().encode()})
    )
    return run_id


def searched(fake: FakeGitHub) -> list[str]:
    return [r.path for r in fake.requests if "/actions/workflows/" in r.path]


# -- baseline-workflow --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("given", ["nightly.yml", ".github/workflows/nightly.yml"])
def test_baseline_workflow_takes_the_baselines_of_that_file_only(
    runner: Runner, fake_github: FakeGitHub, given: str
) -> None:
    add_run(fake_github, 1, day=11)  # this workflow's own push runs: not asked for
    add_run(fake_github, 2, day=12, workflow_file="nightly.yml", event="schedule")
    add_run(fake_github, 3, day=13, workflow_file="nightly.yml", event="workflow_dispatch")
    add_run(fake_github, 4, day=14)

    done = runner.run("push", "push.json", ref="refs/heads/master", baseline_workflow=given)

    assert done.code == 0, done.log
    assert [b.run_id for b in done.result().baselines] == ["sft-smoke-nightly-3", "sft-smoke-nightly-2"]
    assert set(searched(fake_github)) == {f"/repos/{REPO}/actions/workflows/nightly.yml/runs"}


def test_baseline_workflow_leaves_out_pull_request_runs_and_forks_runs(runner: Runner, fake_github: FakeGitHub) -> None:
    trusted = add_run(fake_github, 1, day=11, workflow_file="nightly.yml", event="schedule")
    # newer, on a branch called master too: a pull request's run of the file, a fork's (event and repository)
    add_run(fake_github, 2, day=12, workflow_file="nightly.yml", event="pull_request")
    add_run(fake_github, 3, day=13, workflow_file="nightly.yml", event="pull_request_target")
    add_run(fake_github, 4, day=14, workflow_file="nightly.yml", event="pull_request", head_repo=FORK)
    add_run(fake_github, 5, day=15, workflow_file="nightly.yml", event="push", head_repo=FORK)
    add_run(fake_github, 6, day=16, workflow_file="nightly.yml", event="push", branch="changes")

    done = runner.run("push", "push.json", ref="refs/heads/master", baseline_workflow="nightly.yml")

    assert done.code == 0, done.log
    assert [b.run_id for b in done.result().baselines] == ["sft-smoke-nightly-1"]
    notes = done.result().notes
    assert "left out 3 runs of master started by other events (pull requests)" in notes
    assert "left out 1 run of another branch, commit or repository" in notes  # the fork's push run
    downloads = [r.path for r in fake_github.requests if r.path.endswith("/artifacts")]
    assert downloads == [f"/repos/{REPO}/actions/runs/{trusted}/artifacts"]


@pytest.mark.parametrize(
    "given",
    [
        "https://github.com/evil/repo/blob/main/.github/workflows/nightly.yml",
        "../nightly.yml",
        ".github/workflows/../../nightly.yml",
        ".github/workflows/sub/nightly.yml",
        "nightly",
        "nightly.json",
        "night..ly.yml",
    ],
)
def test_an_invalid_baseline_workflow_is_exit_2_with_the_fix(
    runner: Runner, fake_github: FakeGitHub, given: str
) -> None:
    done = runner.run("push", "push.json", ref="refs/heads/master", baseline_workflow=given)

    assert done.code == 2
    assert "::error title=usage error::" in done.log
    assert "baseline-workflow: " in done.log
    assert "nightly.yml" in done.log  # the form it takes
    assert "correct the `with:` block" in done.log
    assert fake_github.requests == []


def test_report_mode_takes_baselines_from_baseline_workflow_and_the_merge_base(
    runner: Runner, fake_github: FakeGitHub
) -> None:
    """The fork-safe pair: the measured run is of canary.yml, the baselines come from nightly.yml."""
    fake_github.add_pull(number=2, head_sha=PR_HEAD, head_repo=FORK)
    at_base = add_run(fake_github, 1, day=11, workflow_file="nightly.yml", event="schedule", head_sha=MERGE_BASE)
    add_run(fake_github, 2, day=12, workflow_file="nightly.yml", event="schedule")
    add_run(fake_github, 3, day=13)  # canary.yml's own: not asked for
    fake_github.add_merge_base(PR_HEAD, MERGE_BASE)
    measured = runner.run("pull_request", "pull_request.fork.json", mode="measure", github_token="")
    assert measured.code == 0, measured.log
    run_id = fake_github.add_workflow_run(event="pull_request", branch="changes", head_sha=PR_HEAD, head_repo=FORK)
    fake_github.add_artifact(run_id, name=ARTIFACT, content=_zip_dir(runner.workspace / "canary-output"))
    payload = _workflow_run_payload(runner.tmp, run_id, PR_HEAD, fork="octo-fork")

    done = runner.run(
        "workflow_run",
        payload,
        ref="refs/heads/master",
        output_dir="canary-report",
        measured_workflow="canary.yml",
        baseline_workflow="nightly.yml",
    )

    assert done.code == 0, done.log
    assert [b.run_id for b in done.result().baselines] == ["sft-smoke-nightly-1", "sft-smoke-nightly-2"]
    assert set(searched(fake_github)) == {f"/repos/{REPO}/actions/workflows/nightly.yml/runs"}
    assert any(n.startswith(f"first baseline: run {at_base} of {MERGE_BASE[:12]}") for n in done.result().notes)
    [check] = fake_github.check_runs
    assert (check["name"], check["head_sha"], check["conclusion"]) == (CHECK, PR_HEAD, "success")


# -- the merge base ----------------------------------------------------------------------------------------------


def test_the_merge_base_run_is_the_first_baseline_and_the_report_says_so(
    runner: Runner, fake_github: FakeGitHub
) -> None:
    fake_github.add_pull(number=2, head_sha=PR_HEAD)
    at_base = add_run(fake_github, 1, day=11, head_sha=MERGE_BASE)
    add_run(fake_github, 2, day=12)
    add_run(fake_github, 3, day=13)
    fake_github.add_merge_base(PR_HEAD, MERGE_BASE)

    done = runner.run("pull_request", "pull_request.opened.json", baseline_runs="2")

    assert done.code == 0, done.log
    # like with like first, then the newest runs of master as the history
    assert [b.run_id for b in done.result().baselines] == ["sft-smoke-canary-1", "sft-smoke-canary-3"]
    [note] = [n for n in done.result().notes if "merge base" in n]
    assert note.startswith(f"first baseline: run {at_base} of {MERGE_BASE[:12]}, the merge base of this pull request")
    assert MERGE_BASE[:12] in done.summary
    [check] = fake_github.check_runs
    assert MERGE_BASE[:12] in check["output"]["summary"] + (check["output"]["text"] or "")
    # bounded: one compare, one search by commit, then the usual search
    compares = [r for r in fake_github.requests if "/compare/" in r.path]
    assert [(r.path, r.query.get("per_page")) for r in compares] == [(f"/repos/{REPO}/compare/master...{PR_HEAD}", "1")]
    by_commit = [r.query for r in fake_github.requests if r.query.get("head_sha")]
    assert by_commit == [
        {
            "branch": "master",
            "status": "success",
            "exclude_pull_requests": "true",
            "head_sha": MERGE_BASE,
            "per_page": "100",
            "page": "1",
        }
    ]


def test_a_pull_request_run_at_the_merge_base_is_not_a_baseline(runner: Runner, fake_github: FakeGitHub) -> None:
    fake_github.add_pull(number=2, head_sha=PR_HEAD)
    add_run(fake_github, 1, day=11, head_sha=MERGE_BASE, event="pull_request")
    add_run(fake_github, 2, day=12, head_sha=MERGE_BASE, event="push", head_repo=FORK)
    add_run(fake_github, 3, day=13)
    fake_github.add_merge_base(PR_HEAD, MERGE_BASE)

    done = runner.run("pull_request", "pull_request.opened.json")

    assert done.code == 0, done.log
    assert [b.run_id for b in done.result().baselines] == ["sft-smoke-canary-3"]
    assert any(
        n.startswith(f"canary.yml has no successful master run of {MERGE_BASE[:12]}") for n in done.result().notes
    )


def test_a_merge_base_without_a_run_falls_back_to_the_newest_runs_and_says_so(
    runner: Runner, fake_github: FakeGitHub
) -> None:
    fake_github.add_pull(number=2, head_sha=PR_HEAD)
    add_run(fake_github, 1, day=11)
    add_run(fake_github, 2, day=12)
    fake_github.add_merge_base(PR_HEAD, MERGE_BASE)

    done = runner.run("pull_request", "pull_request.opened.json")

    assert done.code == 0, done.log
    assert [b.run_id for b in done.result().baselines] == ["sft-smoke-canary-2", "sft-smoke-canary-1"]
    [note] = [n for n in done.result().notes if "merge base" in n]
    assert note == (
        f"canary.yml has no successful master run of {MERGE_BASE[:12]}, the merge base of this pull request with "
        "master: compared with the newest runs of master instead (they may hold changes this pull request does not)"
    )
    assert "compared with the newest runs of master instead" in done.summary


def test_a_merge_base_run_without_a_usable_artifact_falls_back_and_says_so(
    runner: Runner, fake_github: FakeGitHub
) -> None:
    fake_github.add_pull(number=2, head_sha=PR_HEAD)
    at_base = fake_github.add_workflow_run(event="push", head_sha=MERGE_BASE, created_at="2026-11-11T00:00:00Z")
    add_run(fake_github, 2, day=12)
    fake_github.add_merge_base(PR_HEAD, MERGE_BASE)

    done = runner.run("pull_request", "pull_request.opened.json")

    assert done.code == 0, done.log
    assert [b.run_id for b in done.result().baselines] == ["sft-smoke-canary-2"]
    notes = done.result().notes
    assert f"skipped run {at_base}: it has no artifact named {ARTIFACT}" in notes
    assert (
        f"run {at_base} of the merge base {MERGE_BASE[:12]} gave no baseline (see above): compared with the newest "
        "runs of master instead"
    ) in notes


@pytest.mark.parametrize(("status", "times", "said"), [(500, 5, "failed after 5 attempts"), (404, 1, "404 Not Found")])
def test_a_failing_compare_falls_back_and_the_check_is_still_published(
    runner: Runner, fake_github: FakeGitHub, status: int, times: int, said: str
) -> None:
    fake_github.add_pull(number=2, head_sha=PR_HEAD)
    add_run(fake_github, 1, day=11, head_sha=MERGE_BASE)
    add_run(fake_github, 2, day=12)
    fake_github.add_merge_base(PR_HEAD, MERGE_BASE)
    fake_github.fail_next(method="GET", path_contains="/compare/", status=status, times=times)

    done = runner.run("pull_request", "pull_request.opened.json")

    assert done.code == 0, done.log
    assert [b.run_id for b in done.result().baselines] == ["sft-smoke-canary-2", "sft-smoke-canary-1"]  # newest first
    [note] = [n for n in done.result().notes if "merge base" in n]
    assert note.startswith("the merge base of this pull request with master could not be looked up (GET ")
    assert said in note
    assert note.endswith("): compared with the newest runs of master instead")
    [check] = fake_github.check_runs
    assert (check["head_sha"], check["conclusion"]) == (PR_HEAD, "success")
    assert "::error" not in done.log
    assert not [r for r in fake_github.requests if r.query.get("head_sha")]
    assert writes(fake_github)[-1].startswith("POST")  # the comment, after the check


def test_no_merge_base_lookup_outside_a_pull_request(runner: Runner, fake_github: FakeGitHub) -> None:
    add_run(fake_github, 1, day=11)
    done = runner.run("push", "push.json", ref="refs/heads/master")
    assert done.code == 0, done.log
    assert not [r for r in fake_github.requests if "/compare/" in r.path]
    assert not any("merge base" in n for n in done.result().notes)


def test_baseline_run_id_is_used_alone_without_a_merge_base_lookup(runner: Runner, fake_github: FakeGitHub) -> None:
    fake_github.add_pull(number=2, head_sha=PR_HEAD)
    chosen = add_run(fake_github, 1, day=11)
    add_run(fake_github, 2, day=12, head_sha=MERGE_BASE)
    fake_github.add_merge_base(PR_HEAD, MERGE_BASE)

    done = runner.run("pull_request", "pull_request.opened.json", baseline_run_id=str(chosen))

    assert done.code == 0, done.log
    assert [b.run_id for b in done.result().baselines] == ["sft-smoke-canary-1"]
    assert not [r for r in fake_github.requests if "/compare/" in r.path]


@pytest.mark.parametrize(
    ("run", "said"),
    [
        ({"event": "pull_request_target"}, "it was started by pull_request_target"),
        ({"conclusion": "failure"}, "it ended failure"),
        ({"branch": "changes"}, "it ran on changes"),
        ({"head_repo": FORK}, "it ran another repository's code"),
    ],
)
def test_a_baseline_run_id_that_names_no_baseline_is_left_out_and_said(
    runner: Runner, fake_github: FakeGitHub, run: dict[str, str], said: str
) -> None:
    """A pull request's run (its artifact holds the pull request's own numbers), a failed run, another branch's
    or a fork's: never a baseline, named or searched."""
    fake_github.add_pull(number=2, head_sha=PR_HEAD)
    conclusion = run.pop("conclusion", "success")
    named = add_run(fake_github, 1, day=11, **run)
    fake_github.workflow_runs[-1]["conclusion"] = conclusion

    done = runner.run("pull_request", "pull_request.opened.json", baseline_run_id=str(named))

    assert done.code == 0, done.log
    result = done.result()
    assert result.baselines == []
    assert result.verdict == "neutral"
    [note] = [n for n in result.notes if n.startswith(f"baseline-run-id {named} is not a baseline")]
    assert said in note
    assert not [r for r in fake_github.requests if r.path.endswith("/artifacts")]


def test_with_no_baseline_the_snippet_names_the_baseline_workflow(runner: Runner, fake_github: FakeGitHub) -> None:
    fake_github.add_workflow_run(workflow_file="nightly.yml", event="schedule")  # it ran, but uploaded nothing

    done = runner.run("push", "push.json", ref="refs/heads/master", baseline_workflow="nightly.yml")

    assert done.code == 0, done.log
    assert done.outputs["verdict"] == "neutral"
    assert "# .github/workflows/nightly.yml\non:\n  push:\n    branches: [master]\n" in done.summary
