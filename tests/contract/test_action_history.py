"""mode history against the fake GitHub: a default-branch run's measured artifact becomes one commit on the history
branch (created as an orphan on the first run), and the site is built; a pull request's job never writes it."""

from __future__ import annotations

import json
from typing import Any

from canary_action.history.read import parse_history
from tests.contract.fake_github import FakeGitHub
from tests.contract.test_action_e2e import ARTIFACT, REPO, Outcome, Runner, _zip_dir, baselines, writes

BRANCH = "rlhf-canary-history"
FILE = "history.jsonl"
DEFAULT = "refs/heads/master"


def nightly(runner: Runner, fake: FakeGitHub, sha: str) -> int:
    """A default-branch run (mode run on push: trained, compared, result.json written) and its uploaded artifact;
    the workflow run's id."""
    runner.merge_sha = sha
    runner.run_id = None
    measured = runner.run("push", "push.json", ref=DEFAULT)
    assert measured.code in (0, 1), measured.log[-3000:]
    run_id = fake.add_workflow_run(event="push", head_sha=sha)
    fake.add_artifact(run_id, name=ARTIFACT, content=_zip_dir(runner.workspace / "canary-output"))
    return run_id


def record(runner: Runner, run_id: int, event: str = "push", payload: str = "push.json", **inputs: str) -> Outcome:
    """The history job of that run: mode history, on a GitHub-hosted runner with the default branch checked out."""
    runner.run_id = run_id
    return runner.run(event, payload, ref=inputs.pop("ref", DEFAULT), mode="history", output_dir="canary-history",
                      **inputs)  # fmt: skip


def lines(fake: FakeGitHub) -> list[dict[str, Any]]:
    content = fake.git.file(BRANCH, FILE)
    assert content is not None
    return [json.loads(line) for line in content.decode().splitlines()]


def git_writes(fake: FakeGitHub) -> list[str]:
    return [w for w in writes(fake) if "/git/" in w]


def test_each_default_branch_run_is_one_commit_and_the_site_is_built(runner: Runner, fake_github: FakeGitHub) -> None:
    baselines(fake_github, 2)
    first_sha, second_sha = "a" * 40, "b" * 40
    first = record(runner, nightly(runner, fake_github, first_sha))
    assert first.code == 0, first.log[-3000:]
    assert git_writes(fake_github) == [
        f"POST /repos/{REPO}/git/{kind}" for kind in ("blobs", "trees", "commits", "refs")
    ]
    [entry] = lines(fake_github)
    assert (entry["commit"], entry["config"], entry["event"], entry["repository"]) == (first_sha, "sft-smoke", "push",
                                                                                       REPO)  # fmt: skip
    assert entry["run_id"] == runner.run_id
    [orphan] = fake_github.git.history_of(BRANCH)
    assert orphan["parents"] == []  # none of the repository's code on the branch
    assert first.outputs["history-commit"] == fake_github.git.branches[BRANCH]
    site = runner.workspace / first.outputs["history-site"]
    assert (site / "index.html").is_file()
    assert (site / "config-sft-smoke.html").is_file()

    merged = fake_github.add_pull(number=7, head_sha=second_sha, base_ref="master", state="closed")
    merged["merged_at"] = "2026-11-20T00:00:00Z"
    second = record(runner, nightly(runner, fake_github, second_sha))
    assert second.code == 0, second.log[-3000:]
    assert [e["commit"] for e in lines(fake_github)] == [first_sha, second_sha]
    assert lines(fake_github)[1]["pull_request"] == {"number": 7, "head_commit": second_sha, "effects": []}
    assert len(fake_github.git.history_of(BRANCH)) == 2
    assert f"PATCH /repos/{REPO}/git/refs/heads/{BRANCH}" in git_writes(fake_github)
    assert fake_github.violations == []


def test_a_pull_request_event_writes_nothing(runner: Runner, fake_github: FakeGitHub) -> None:
    baselines(fake_github, 2)
    run_id = nightly(runner, fake_github, "a" * 40)
    before = list(fake_github.requests)
    for event, payload in (("pull_request", "pull_request.opened.json"),
                           ("pull_request_target", "pull_request.synchronize.json")):  # fmt: skip
        refused = record(runner, run_id, event, payload, ref="refs/pull/2/merge")
        assert refused.code == 2
        assert f"mode history records default-branch runs only, and this is a {event} event about a pull request" in (
            refused.log
        )
    dispatched = record(runner, run_id, "workflow_dispatch", "workflow_dispatch.json", ref="refs/heads/changes")
    assert dispatched.code == 2
    assert "this run is of refs/heads/changes (the default branch is main)" in dispatched.log
    assert fake_github.requests == before  # not one request: no read, no commit
    assert BRANCH not in fake_github.git.branches


def test_a_read_only_token_is_a_warning_and_the_site_still_has_the_run(runner: Runner, fake_github: FakeGitHub) -> None:
    baselines(fake_github, 2)
    run_id = nightly(runner, fake_github, "a" * 40)
    fake_github.read_only = True
    done = record(runner, run_id)
    assert done.code == 0, done.log[-3000:]
    # The annotation's title (a workflow command escapes its colon), then GitHub's refusal.
    assert "could not write the history branch rlhf-canary-history (it needs contents%3A write)::POST" in done.log
    assert "git/blobs: 403 Resource not accessible by integration" in done.log
    assert BRANCH not in fake_github.git.branches
    page = (runner.workspace / done.outputs["history-site"] / "config-sft-smoke.html").read_text(encoding="utf-8")
    assert "a" * 12 in page
    assert "history-commit" not in done.outputs


def test_a_branch_that_moved_meanwhile_is_read_again(runner: Runner, fake_github: FakeGitHub) -> None:
    baselines(fake_github, 2)
    assert record(runner, nightly(runner, fake_github, "a" * 40)).code == 0
    fake_github.git.moved_behind.append(BRANCH)  # another config's history job commits between read and write
    done = record(runner, nightly(runner, fake_github, "b" * 40))
    assert done.code == 0, done.log[-3000:]
    assert [e["commit"] for e in lines(fake_github)] == ["a" * 40, "b" * 40]
    assert fake_github.git.file(BRANCH, "other.txt") == b"another writer\n"  # its commit kept, not overwritten


def test_a_branch_of_junk_is_refused_and_left_as_it_is(runner: Runner, fake_github: FakeGitHub) -> None:
    baselines(fake_github, 2)
    fake_github.git.commit_file(BRANCH, FILE, b"<html>\n")
    head = fake_github.git.branches[BRANCH]
    done = record(runner, nightly(runner, fake_github, "a" * 40))
    assert done.code == 2
    assert "no line of it is a history line this version reads (line 1: not JSON)" in done.log
    assert fake_github.git.branches[BRANCH] == head


def test_hostile_lines_on_the_branch_are_dropped_and_said(runner: Runner, fake_github: FakeGitHub) -> None:
    baselines(fake_github, 2)
    assert record(runner, nightly(runner, fake_github, "a" * 40)).code == 0
    content = fake_github.git.file(BRANCH, FILE)
    assert content is not None
    forged = json.loads(content.decode().splitlines()[0]) | {"repository": "evil/fork", "commit": "c" * 40}
    fake_github.git.commit_file(BRANCH, FILE, content + json.dumps(forged).encode() + b"\n<script>\n")
    done = record(runner, nightly(runner, fake_github, "b" * 40))
    assert done.code == 0, done.log[-3000:]
    assert "line 2: names the repository evil/fork, not Codertocat/Hello-World: dropped from the file" in done.log
    assert "line 3: not JSON: dropped from the file" in done.log
    kept = parse_history(fake_github.git.file(BRANCH, FILE).split(b"\n"), repository=REPO, source="branch")  # type: ignore[union-attr]
    assert [e.commit for e in kept.entries] == ["a" * 40, "b" * 40]
    assert kept.notes == []


def test_a_run_without_the_artifact_is_an_error_naming_it(runner: Runner, fake_github: FakeGitHub) -> None:
    run_id = fake_github.add_workflow_run(event="push")
    done = record(runner, run_id)
    assert done.code == 2
    assert f"run {run_id} has no artifact {ARTIFACT}" in done.log
    assert git_writes(fake_github) == []


def test_a_measure_jobs_artifact_is_judged_against_the_runs_before_it(runner: Runner, fake_github: FakeGitHub) -> None:
    """pr-canary.yml's push: mode measure uploads metrics.json alone; the history job judges it as report mode
    would, with the default branch's baselines, then records it."""
    baselines(fake_github, 2)
    runner.merge_sha = "d" * 40
    measured = runner.run("push", "push.json", ref=DEFAULT, mode="measure", github_token="")
    assert measured.code == 0, measured.log[-3000:]
    assert not list((runner.workspace / "canary-output").rglob("result.json"))
    run_id = fake_github.add_workflow_run(event="push", head_sha="d" * 40)
    fake_github.add_artifact(run_id, name=ARTIFACT, content=_zip_dir(runner.workspace / "canary-output"))
    done = record(runner, run_id)
    assert done.code == 0, done.log[-3000:]
    [entry] = lines(fake_github)
    assert entry["commit"] == "d" * 40
    assert entry["verdict"] in ("pass", "regression")  # judged against the 2 baselines, not "neutral: no baseline"
    assert entry["figures"]["step_time_s"] > 0


def test_a_merged_pull_requests_effects_come_from_its_pairs_check_run(runner: Runner, fake_github: FakeGitHub) -> None:
    """The publish job's check run on the pull request's head carries its pair's judged effects (hidden at the end
    of its text); the history step of the push that merged it reads them back through the API."""
    from canary_action.github.client import GitHubClient
    from canary_action.github.publish import Publisher, check_name
    from canary_action.github.step import _carry_effects
    from canary_action.history.collect import pull_request_of
    from canary_action.report.load import read_result
    from canary_action.report.render import check_output
    from tests.unit.test_history import PAIR_RESULT

    pair = read_result(PAIR_RESULT).model_copy(update={"current": read_result(PAIR_RESULT).current.model_copy(
        update={"config_name": "sft-smoke"})})  # fmt: skip
    head = "e" * 40
    publisher = Publisher(GitHubClient(fake_github.api_url, fake_github.token), REPO)
    output = check_output(pair)
    _carry_effects(output, pair)
    publisher.finish_check(publisher.start_check(check_name("sft-smoke"), head, None), "success", output, [])
    [check] = fake_github.check_runs
    assert check["output"]["text"].endswith(" -->")  # hidden in the check's markdown

    baselines(fake_github, 2)
    merged = fake_github.add_pull(number=9, head_sha=head, base_ref="master", state="closed")
    merged |= {"merged_at": "2026-11-21T00:00:00Z", "merge_commit_sha": "f" * 40}  # listed for its merge commit
    done = record(runner, nightly(runner, fake_github, "f" * 40))
    assert done.code == 0, done.log[-3000:]
    [entry] = lines(fake_github)
    recorded = entry["pull_request"]
    assert recorded["number"] == 9
    expected = [e.model_dump(exclude_none=True) for e in pull_request_of(pair, None).effects]
    assert recorded["effects"] == expected
    assert expected[0]["check"] == "step_time"


def test_an_unreadable_branch_builds_no_site_and_fails(runner: Runner, fake_github: FakeGitHub) -> None:
    """A site of this run alone would replace the published history: none is built, and the job fails (exit 3)."""
    baselines(fake_github, 2)
    run_id = nightly(runner, fake_github, "a" * 40)
    fake_github.fail_next(method="GET", path_contains="/git/ref/", status=500, times=10)
    done = record(runner, run_id)
    assert done.code == 3
    assert "the history branch rlhf-canary-history could not be read" in done.log
    assert "history-site" not in done.outputs
    assert git_writes(fake_github) == []


def test_the_measured_branch_is_never_the_history_branch(runner: Runner, fake_github: FakeGitHub) -> None:
    baselines(fake_github, 2)
    done = record(runner, nightly(runner, fake_github, "a" * 40), history_branch="master")
    assert done.code == 2
    assert "history-branch is master, the branch this run measured" in done.log
    assert git_writes(fake_github) == []


def test_the_nights_bisect_is_marked_on_its_entry(runner: Runner, fake_github: FakeGitHub) -> None:
    from tests.contract.test_action_bisect import artifact_of, bisect_result

    baselines(fake_github, 2)
    night = "b" * 40  # bisect_result()'s bad commit: the night that regressed
    run_id = nightly(runner, fake_github, night)
    found = bisect_result(subject="slow <script>alert(1)</script> the loader")
    fake_github.add_artifact(run_id, name="rlhf-canary-bisect-sft-smoke", content=artifact_of(found))
    done = record(runner, run_id)
    assert done.code == 0, done.log[-3000:]
    [entry] = lines(fake_github)
    assert entry["bisect"] == {"bad_commit": "c" * 40, "summary": found.summary}
    page = (runner.workspace / done.outputs["history-site"] / "config-sft-smoke.html").read_text(encoding="utf-8")
    assert "<script>alert(1)" not in page
    assert f"https://github.com/{REPO}/commit/{'c' * 40}" in page  # the marker links the bad commit
