"""The action's bisect path against the fake GitHub (issue 27): the nightly's regression is bisected by a job in
mode bisect that holds no token and makes no request, and published by a report job (the report action, no code
of any commit) as one issue per bad commit, updated in place on a rerun.

- end to end, with real tiny trainings: a throwaway repository whose second commit after the good one plants a
  0.3 s wait per step; the measure job, run as the runner starts the entrypoint, names that commit in bisect.json;
  its output-dir, uploaded, becomes one issue, and a rerun of the publish job updates that issue;
- the publish job on bisect.json files made here: the marker and the bad commit find the issue (another bad
  commit, a closed issue or a person's issue with the same lines get their own), text from the artifact is inert,
  a corrupt or forged bisect.json is refused (exit 2, nothing posted), a read-only token is a warning;
- what the publish job trusts: it publishes a bisect only when `bisect-bad` says so (and then the artifact must be
  there), the bad commit that chooses the issue is that input's (a bisect.json naming another is refused; a tag or
  branch is resolved through the API), and only an issue this token's identity opened is updated (another app's
  token, or one whose identity nobody tells, opens its own);
- the measure job's refusals before it trains: no good commit, a shallow checkout that lacks it, no git;
- mode run's baseline-sha output, which the nightly hands to the bisect as its good commit.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from canary_action.bisect.render import MARKER
from canary_action.bisect.result import BisectResult, CommitRef, EffectRecord, Finding, PairStep
from tests.contract.fake_github import FakeGitHub, make_zip
from tests.contract.github_objects import BOT_LOGIN
from tests.contract.test_action_e2e import HOOKS, ROOT, SAME_CONFIG, SAME_DATA, Runner, _zip_dir, writes
from tests.factories import make_metrics
from tests.unit.test_action_parts import parse_outputs

CONFIG = "tiny-sft"  # configs/tiny/sft.yaml's name: the workspace's canary.yaml in the git tests
ISSUES = "/repos/Codertocat/Hello-World/issues"


RUNNER_UID = 1001  # the Actions runner's user on GitHub's images: the checkout's owner, while a Docker action is root


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", "-c", "safe.directory=*", "-c", "user.name=t", "-c", "user.email=t@example.com",
                           *args], cwd=cwd, capture_output=True, text=True, check=True)  # fmt: skip
    return done.stdout.strip()


def as_the_runners_checkout(workspace: Path) -> None:
    """Give the checkout to the runner's user, as actions/checkout leaves it: git refuses a repository another user
    owns ("dubious ownership") unless told, and the action runs as root. Only root can; others test without."""
    if os.geteuid() != 0:
        return
    for path in [workspace, *workspace.rglob("*")]:
        os.chown(path, RUNNER_UID, RUNNER_UID, follow_symlinks=False)


def history(workspace: Path) -> tuple[str, str, str]:
    """A repository with the good commit, a harmless one and the one that plants a 0.3 s wait per step: their SHAs."""
    config = yaml.safe_load((ROOT / "configs" / "tiny" / "sft.yaml").read_text(encoding="utf-8"))
    config["max_steps"] = 24
    config["heldout"] = {"enabled": False}  # the bisect follows step time
    git(workspace, "init", "-q", "-b", "master")
    (workspace / "canary.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    git(workspace, "add", "canary.yaml")
    git(workspace, "commit", "-q", "-m", "the last good night")
    (workspace / "README.md").write_text("a team's repository\n", encoding="utf-8")
    git(workspace, "add", "README.md")
    git(workspace, "commit", "-q", "-m", "docs: a readme")
    slowed = {**config, "fault_injection": {"sleep_s_per_step": 0.3}}
    (workspace / "canary.yaml").write_text(yaml.safe_dump(slowed), encoding="utf-8")
    git(workspace, "add", "canary.yaml")
    git(workspace, "commit", "-q", "-m", "data: wait for the loader")
    good, harmless, slowed = (git(workspace, "rev-parse", rev) for rev in ("HEAD~2", "HEAD~1", "HEAD"))
    return good, harmless, slowed


def schedule_payload(tmp: Path) -> Path:
    """What the runner writes for a `schedule` event: the cron line, the repository and the workflow file."""
    repository = json.loads((HOOKS / "push.json").read_text(encoding="utf-8"))["repository"]
    path = tmp / "schedule.json"
    path.write_text(json.dumps({"schedule": "23 2 * * *", "repository": repository, "workflow": "nightly.yml"}))
    return path


def measure_job(runner: Runner, payload: Path, **inputs: str) -> tuple[int, str, dict[str, str], str]:
    """The entrypoint as the runner starts it in the bisect job: (exit code, log, outputs, job summary)."""
    env = runner.env("schedule", payload, {k.replace("_", "-"): v for k, v in inputs.items()}, "refs/heads/master")
    done = subprocess.run(
        [sys.executable, str(ROOT / "entrypoint" / "main.py")],
        env={"PATH": os.environ["PATH"], "HOME": str(runner.tmp), "HF_HUB_OFFLINE": "1", **env},
        cwd=runner.workspace, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    summary = Path(env["GITHUB_STEP_SUMMARY"])
    outputs = parse_outputs(Path(env["GITHUB_OUTPUT"]).read_text(encoding="utf-8"))
    return done.returncode, done.stdout + done.stderr, outputs, summary.read_text() if summary.exists() else ""


def publish_job(runner: Runner, fake: FakeGitHub, artifact: str | None, content: bytes, bad: str = "") -> Any:
    """The nightly's publish-bisect job: this run's artifact (none: no upload), the report action (mode report)
    given the bad commit as `bisect-bad` (empty: not set), the default branch's config in the workspace."""
    run_id = fake.add_workflow_run(workflow_file="nightly.yml", event="schedule")
    if artifact is not None:
        fake.add_artifact(run_id, name=artifact, content=content)
    runner.run_id = run_id
    payload = schedule_payload(runner.tmp)
    return runner.run("schedule", payload, ref="refs/heads/master", mode="report", measured_run_id=str(run_id),
                      output_dir="canary-report", bisect_bad=bad)  # fmt: skip


@pytest.mark.training
def test_the_bisect_job_names_the_planted_commit_without_a_request_and_the_publish_job_opens_one_issue(
    fake_github: FakeGitHub, tmp_path: Path
) -> None:
    runner = Runner(fake_github, tmp_path)
    good, harmless, slowed = history(runner.workspace)
    as_the_runners_checkout(runner.workspace)
    runner.merge_sha = slowed  # GITHUB_SHA: the failing night's commit, bad's default

    code, log, outputs, summary = measure_job(runner, schedule_payload(tmp_path), mode="bisect", good=good,
                                              github_token="")  # fmt: skip

    assert code == 0, log[-4000:]
    assert fake_github.requests == []  # no token, no request
    assert fake_github.token not in log
    assert outputs["artifact-name"] == f"rlhf-canary-bisect-{CONFIG}"
    assert outputs["result-path"] == "canary-output/bisect/bisect.json"
    result = BisectResult.model_validate_json((runner.workspace / outputs["result-path"]).read_text())
    assert (result.status, result.good.sha, result.bad.sha) == ("found", good, slowed)
    [finding] = result.findings
    assert [c.sha for c in finding.commits] == [slowed]
    assert [s.commit.sha for s in result.steps] == [slowed, harmless]  # the confirming pair, then the middle
    assert summary.startswith(MARKER)
    assert git(runner.workspace, "worktree", "list").count("\n") == 0  # the worktrees are gone

    artifact = _zip_dir(runner.workspace / "canary-output")
    first = publish_job(runner, fake_github, outputs["artifact-name"], artifact, slowed)
    again = publish_job(runner, fake_github, outputs["artifact-name"], artifact, slowed)

    assert (first.code, again.code) == (0, 0), first.log + again.log
    [issue] = fake_github.issues.values()
    assert issue["title"].startswith(f"canary bisect: {slowed[:10]} data: wait for the loader changed step_time by +")
    assert issue["body"].splitlines()[:2] == [MARKER, f"<!-- rlhf-canary bisect: {CONFIG} {slowed} -->"]
    assert issue["user"]["login"] == BOT_LOGIN
    assert first.outputs["issue-url"] == again.outputs["issue-url"] == issue["html_url"]
    assert writes(fake_github) == [f"POST {ISSUES}", f"PATCH {ISSUES}/{issue['number']}"]
    assert "found the commit" in first.summary


# -- the publish job, on bisect.json files made here -------------------------------------------------------------


def _ref(seed: str, index: int, subject: str | None = None) -> CommitRef:
    return CommitRef(sha=f"{seed * 40}"[:40], subject=subject or f"commit {index}", index=index)


def bisect_result(bad: str = "b", subject: str = "slow the loader") -> BisectResult:
    """A bisect that found commit 2 of 3 (`subject`), the bad commit's SHA made of `bad`."""
    good, culprit, last = _ref("a", 0), _ref("c", 2, subject), _ref(bad, 3)
    level = EffectRecord(pct=41.0, low=35.0, high=47.0)
    steps = [
        PairStep(commit=last, call="confirm", effect=level, verdict="regression", wall_s=40.0),
        PairStep(commit=culprit, call="after", effect=level, verdict="regression", wall_s=40.0),
        PairStep(commit=_ref("d", 1), call="before", effect=EffectRecord(pct=1.0, low=-2.0, high=4.0), wall_s=40.0),
    ]
    finding = Finding(commits=[culprit], clear=True, before=EffectRecord(pct=1.0, low=-2.0, high=4.0), after=level)
    return BisectResult(
        config="canary.yaml", check="step_time", unit="%", good=good, bad=last, commits=3, status="found",
        summary=f"{culprit.sha[:10]} {subject!r} changed step_time", steps=steps, findings=[finding], pairs=3,
        max_pairs=3, wall_s=120.0,
    )  # fmt: skip


def artifact_of(result: BisectResult | str) -> bytes:
    text = result if isinstance(result, str) else result.model_dump_json(indent=2)
    return make_zip({"bisect/bisect.json": text.encode(), "bisect/bisect.md": b"# as the measure job wrote it\n"})


ARTIFACT = "rlhf-canary-bisect-sft-smoke"  # the Runner's workspace config is sft-smoke
BAD = "b" * 40  # bisect_result()'s bad commit


def key_of(bad: str) -> str:
    return f"{MARKER}\n<!-- rlhf-canary bisect: sft-smoke {bad} -->"


def test_a_rerun_updates_the_issue_and_another_bad_commit_gets_its_own(runner: Runner, fake_github: FakeGitHub) -> None:
    someone = fake_github.add_issue(title="copied", body=f"{MARKER}\n<!-- rlhf-canary bisect: sft-smoke {'b' * 40} -->")
    closed = fake_github.add_issue(title="old", body=someone["body"], user=BOT_LOGIN, state="closed")

    first = publish_job(runner, fake_github, ARTIFACT, artifact_of(bisect_result()), BAD)
    again = publish_job(runner, fake_github, ARTIFACT, artifact_of(bisect_result(subject="slow the loader, again")),
                        BAD)  # fmt: skip
    other = publish_job(runner, fake_github, ARTIFACT, artifact_of(bisect_result(bad="e")), "e" * 40)

    assert (first.code, again.code, other.code) == (0, 0, 0)
    ours = [i for i in fake_github.issues.values() if i["number"] not in (someone["number"], closed["number"])]
    assert [i["body"].splitlines()[1] for i in ours] == [
        f"<!-- rlhf-canary bisect: sft-smoke {'b' * 40} -->",
        f"<!-- rlhf-canary bisect: sft-smoke {'e' * 40} -->",
    ]
    assert "slow the loader, again" in ours[0]["title"]  # updated in place, title and body
    assert (someone["title"], closed["title"], closed["state"]) == ("copied", "old", "closed")  # left alone
    assert writes(fake_github).count(f"POST {ISSUES}") == 2
    listed = [r for r in fake_github.requests if r.method == "GET" and r.path == ISSUES]
    assert {(r.query["state"], r.query["creator"]) for r in listed} == {("open", BOT_LOGIN)}


def test_text_from_the_artifact_is_inert_in_the_issue(runner: Runner, fake_github: FakeGitHub) -> None:
    hostile = "fix @octocat's <!-- rlhf-canary bisect --> | [click](https://evil.example) `x`"
    done = publish_job(runner, fake_github, ARTIFACT, artifact_of(bisect_result(subject=hostile)), BAD)

    assert done.code == 0, done.log
    [issue] = fake_github.issues.values()
    body = issue["body"]
    assert body.count("<!--") == 2  # the two marker lines, and no other
    assert "@octocat" not in body
    assert "@octocat" not in issue["title"]
    assert "](https://evil" not in body
    assert all(line.count("|") - line.count("\\|") == 5 for line in body.splitlines() if line.startswith("| "))
    assert body == done.summary.rstrip("\n") + "\n"


def test_commit_subjects_are_inert_in_the_bisect_jobs_summary_and_bisect_md(tmp_path: Path) -> None:
    """The bisect job wrote bisect.md to the job summary with commit subjects as their authors wrote them (a
    mention, a link, a fake marker, a table-breaking pipe); only the publish job's issue rendered them inert."""
    import io
    from types import SimpleNamespace

    from canary_action.github.bisect_mode import _report
    from canary_action.github.commands import Log

    hostile = "fix @octocat's <!-- rlhf-canary bisect --> | [click](https://evil.example) `x`"
    summary = tmp_path / "summary.md"
    step = SimpleNamespace(
        runner=SimpleNamespace(summary_path=summary), outputs={}, relative=str, log=Log(io.StringIO())
    )
    _report(step, tmp_path, bisect_result(subject=hostile))  # type: ignore[arg-type]

    for written in (summary.read_text(encoding="utf-8"), (tmp_path / "bisect.md").read_text(encoding="utf-8")):
        assert written.count("<!--") == 1  # the marker line, and no other
        assert "@octocat" not in written
        assert "](https://evil" not in written
        assert all(line.count("|") - line.count("\\|") == 5 for line in written.splitlines() if line.startswith("| "))


@pytest.mark.parametrize(
    ("content", "said"),
    [
        ("{not json", "is not one `canary bisect` writes"),
        (json.dumps({"bisect_schema_version": 2}), "bisect_schema_version"),
        (bisect_result().model_dump_json().replace("b" * 40, "b" * 12), "not a full SHA"),
    ],
    ids=["not-json", "another-schema", "a-short-sha"],
)
def test_a_corrupt_bisect_json_is_refused_and_nothing_posted(
    runner: Runner, fake_github: FakeGitHub, content: str, said: str
) -> None:
    done = publish_job(runner, fake_github, ARTIFACT, artifact_of(content), BAD)

    assert done.code == 2
    assert "::error title=artifact refused::" in done.log
    assert said in done.log
    assert fake_github.issues == {}
    assert writes(fake_github) == []


def test_an_artifact_without_one_bisect_json_is_refused(runner: Runner, fake_github: FakeGitHub) -> None:
    done = publish_job(runner, fake_github, ARTIFACT, make_zip({"bisect/bisect.md": b"# no json\n"}), BAD)
    assert done.code == 2
    assert "holds 0 bisect.json, not one" in done.log
    assert writes(fake_github) == []


def test_a_token_that_cannot_write_issues_is_a_warning_naming_the_permission(
    runner: Runner, fake_github: FakeGitHub
) -> None:
    fake_github.read_only = True
    done = publish_job(runner, fake_github, ARTIFACT, artifact_of(bisect_result()), BAD)
    assert done.code == 0
    assert "the token lacks `issues: write`" in done.log
    assert MARKER in done.summary  # the job summary has the report all the same


# -- what the publish job trusts: its own input for the bad commit, and only its own identity's issue ---------------


def test_a_bisect_json_naming_another_bad_commit_is_refused_and_nothing_posted(
    runner: Runner, fake_github: FakeGitHub
) -> None:
    """The bad commit chooses the issue: an artifact naming another open bisect's would overwrite that issue."""
    earlier = fake_github.add_issue(title="canary bisect: eeeeeeeeee", body=key_of("e" * 40), user=BOT_LOGIN)
    forged = artifact_of(bisect_result(bad="e", subject="nothing to see"))

    done = publish_job(runner, fake_github, ARTIFACT, forged, BAD)

    assert done.code == 2
    assert "::error title=artifact refused::" in done.log
    assert f"bisected up to {'e' * 40}, not the bad commit {BAD} this job was given" in done.log
    assert writes(fake_github) == []
    assert (earlier["title"], earlier["body"]) == ("canary bisect: eeeeeeeeee", key_of("e" * 40))
    assert done.summary == ""  # not even the job summary shows the forged report


def test_bisect_bad_may_name_a_tag_resolved_through_the_api_but_not_a_branch_that_moved(
    runner: Runner, fake_github: FakeGitHub
) -> None:
    fake_github.refs.update({"nightly-2026-11-02": BAD, "release/1.2": "c" * 40})
    tagged = publish_job(runner, fake_github, ARTIFACT, artifact_of(bisect_result()), "nightly-2026-11-02")
    moved = publish_job(runner, fake_github, ARTIFACT, artifact_of(bisect_result()), "release/1.2")
    unknown = publish_job(runner, fake_github, ARTIFACT, artifact_of(bisect_result()), "no-such-tag")

    assert tagged.code == 0, tagged.log
    [issue] = fake_github.issues.values()
    assert issue["body"].startswith(key_of(BAD) + "\n")
    assert f"bisect-bad nightly-2026-11-02 is {BAD}" in tagged.log
    assert moved.code == 2
    assert f"not the bad commit {'c' * 40} this job was given (bisect-bad release/1.2)" in moved.log
    assert unknown.code == 2
    assert "bisect-bad 'no-such-tag' is not a commit of Codertocat/Hello-World" in unknown.log
    assert writes(fake_github) == [f"POST {ISSUES}"]
    resolved = [r.path for r in fake_github.requests if "/commits/" in r.path]
    assert resolved == [f"/repos/Codertocat/Hello-World/commits/{ref}" for ref in
                        ("nightly-2026-11-02", "release/1.2", "no-such-tag")]  # fmt: skip


def test_without_bisect_bad_report_mode_never_looks_for_a_bisect(runner: Runner, fake_github: FakeGitHub) -> None:
    """Whether a run happens to hold an artifact of the bisect's name decides nothing."""
    done = publish_job(runner, fake_github, ARTIFACT, artifact_of(bisect_result()))

    assert done.code == 2
    assert "needs head-sha" in done.log  # a measured run's report, as for any publish job
    assert fake_github.issues == {}
    assert not [r for r in fake_github.requests if r.path.endswith("/artifacts")]


def test_with_bisect_bad_a_run_without_the_bisect_artifact_is_an_error_naming_it(
    runner: Runner, fake_github: FakeGitHub
) -> None:
    done = publish_job(runner, fake_github, None, b"", BAD)

    assert done.code == 2
    assert "::error title=artifact refused::" in done.log
    assert f"this job publishes a bisect, but run {runner.run_id} has no artifact {ARTIFACT}" in done.log
    assert "leave bisect-bad empty" in done.log
    assert writes(fake_github) == []


def test_bisect_bad_on_a_pull_request_event_is_refused(runner: Runner, fake_github: FakeGitHub) -> None:
    fake_github.add_pull(number=2)
    runner.run_id = fake_github.add_workflow_run(event="pull_request")
    fake_github.add_artifact(runner.run_id, name=ARTIFACT, content=artifact_of(bisect_result()))
    done = runner.run("pull_request", "pull_request.opened.json", mode="report", measured_run_id=str(runner.run_id),
                      bisect_bad=BAD)  # fmt: skip
    assert done.code == 2
    assert "bisect-bad is set on an event about a pull request" in done.log
    assert writes(fake_github) == []


def test_another_apps_token_opens_its_own_issue_and_leaves_github_actions_one(
    runner: Runner, fake_github: FakeGitHub
) -> None:
    """An installation token's identity is what GraphQL's viewer says, not GITHUB_TOKEN's bot by default."""
    ours = fake_github.add_issue(title="canary bisect: from GITHUB_TOKEN", body=key_of(BAD), user=BOT_LOGIN)
    fake_github.installation_bot = "canary-app[bot]"

    done = publish_job(runner, fake_github, ARTIFACT, artifact_of(bisect_result()), BAD)

    assert done.code == 0, done.log
    assert (ours["title"], ours["body"]) == ("canary bisect: from GITHUB_TOKEN", key_of(BAD))
    [new] = [i for i in fake_github.issues.values() if i["number"] != ours["number"]]
    assert new["user"]["login"] == "canary-app[bot]"
    assert writes(fake_github) == [f"POST {ISSUES}"]
    listed = [r.query["creator"] for r in fake_github.requests if r.method == "GET" and r.path == ISSUES]
    assert listed == ["canary-app[bot]"]


def test_a_token_whose_identity_nobody_tells_opens_a_new_issue_and_says_why(
    runner: Runner, fake_github: FakeGitHub
) -> None:
    ours = fake_github.add_issue(title="canary bisect: earlier", body=key_of(BAD), user=BOT_LOGIN)
    fake_github.viewer_refused = True

    done = publish_job(runner, fake_github, ARTIFACT, artifact_of(bisect_result()), BAD)

    assert done.code == 0, done.log
    assert ours["title"] == "canary bisect: earlier"
    assert len(fake_github.issues) == 2
    assert writes(fake_github) == [f"POST {ISSUES}"]
    assert "::notice title=rlhf-canary%3A a new bisect issue::this token's identity is unknown" in done.log


# -- the bisect job's refusals, before anything trains ------------------------------------------------------------


def test_mode_bisect_without_a_good_commit_is_refused_and_a_token_is_not_used(
    runner: Runner, fake_github: FakeGitHub
) -> None:
    done = runner.run("schedule", schedule_payload(runner.tmp), ref="refs/heads/master", mode="bisect")
    assert done.code == 2
    assert "mode bisect needs `good`" in done.log
    assert "::warning title=rlhf-canary%3A a token in the measure job::mode bisect does not use" in done.log
    assert done.outputs["artifact-name"] == "rlhf-canary-bisect-sft-smoke"  # for the upload step all the same
    assert fake_github.requests == []


def test_mode_bisect_without_git_is_bad_input_naming_the_fix(
    runner: Runner, fake_github: FakeGitHub, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    good, _, bad = history(runner.workspace)
    runner.merge_sha = bad
    monkeypatch.setenv("PATH", str(tmp_path / "no-git-here"))

    done = runner.run("schedule", schedule_payload(runner.tmp), ref="refs/heads/master", mode="bisect", good=good,
                      github_token="")  # fmt: skip

    assert done.code == 2, done.log
    assert "git is not installed" in done.log
    assert "unexpected error" not in done.log


def test_good_and_bad_outside_mode_bisect_are_ignored_and_said(runner: Runner, fake_github: FakeGitHub) -> None:
    done = runner.run("schedule", schedule_payload(runner.tmp), ref="refs/heads/master", mode="measure",
                      good="a" * 40, github_token="")  # fmt: skip
    assert done.code == 0
    assert "::notice title=rlhf-canary::good and bad are mode bisect's inputs: ignored in mode measure" in done.log
    bisect_bad = runner.run("schedule", schedule_payload(runner.tmp), ref="refs/heads/master", mode="measure",
                            bisect_bad=BAD, github_token="")  # fmt: skip
    assert "::notice title=rlhf-canary::bisect-bad is mode report's input: ignored in mode measure" in bisect_bad.log


def test_a_shallow_checkout_without_the_good_commit_is_refused_naming_fetch_depth(
    runner: Runner, fake_github: FakeGitHub, tmp_path: Path
) -> None:
    origin = tmp_path / "origin"
    origin.mkdir()
    good, _, bad = history(origin)
    workspace = runner.workspace
    for leftover in workspace.iterdir():
        leftover.unlink()
    git(tmp_path, "clone", "-q", "--depth=1", f"file://{origin}", str(workspace))
    runner.merge_sha = bad

    done = runner.run("schedule", schedule_payload(tmp_path), ref="refs/heads/master", mode="bisect", good=good,
                      github_token="")  # fmt: skip

    assert done.code == 2
    assert f"the good commit {good} is not in this shallow checkout" in done.log
    assert "fetch-depth: 0" in done.log
    assert fake_github.requests == []


def test_the_nightly_run_gives_the_newest_baselines_commit_as_baseline_sha(
    runner: Runner, fake_github: FakeGitHub
) -> None:
    for day, sha in ((10, "1" * 40), (11, "2" * 40)):
        created = f"2026-11-{day}T00:00:00Z"
        run_id = fake_github.add_workflow_run(event="schedule", created_at=created)
        run = {"run_id": f"night-{day}", "started_at": created, "git_sha": sha}
        metrics = make_metrics(seed=day, run=run, workload=SAME_DATA, config=SAME_CONFIG)
        files = {f"night-{day}/metrics.json": metrics.model_dump_json().encode()}
        fake_github.add_artifact(run_id, name="rlhf-canary-sft-smoke", content=make_zip(files))

    done = runner.run("schedule", schedule_payload(runner.tmp), ref="refs/heads/master", mode="run", comment="never")

    assert done.code in (0, 1), done.log
    assert done.outputs["baseline-sha"] == "2" * 40
