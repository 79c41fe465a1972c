"""The action's `templates` input (issue 15 item 17): the team's templates from the trusted workspace shape the
comment and the check run, the marker stays first, a broken template falls back to ours with a warning (the
gate still publishes), and mode measure ignores the input with a notice."""

from __future__ import annotations

from pathlib import Path

from tests.contract.fake_github import FakeGitHub
from tests.contract.test_action_e2e import (
    ARTIFACT,
    MARKER,
    PR_HEAD,
    Runner,
    _workflow_run_payload,
    _zip_dir,
    baselines,
    writes,
)


def team_folder(workspace: Path, **files: str) -> None:
    folder = workspace / ".github" / "canary-templates"
    folder.mkdir(parents=True, exist_ok=True)
    for name, body in files.items():
        (folder / name).write_text(body, encoding="utf-8")


def test_run_mode_publishes_with_the_teams_templates(runner: Runner, fake_github: FakeGitHub) -> None:
    fake_github.add_pull(number=2, head_sha=PR_HEAD)
    baselines(fake_github, 2)
    team_folder(
        runner.workspace,
        **{
            "pr_comment.md.j2": "Team comment for {{ v.title }}\n{{ v.counts }}\n",
            "check_summary.md.j2": "Team check: {{ v.reason }}\n",
        },
    )
    done = runner.run("pull_request", "pull_request.opened.json", templates=".github/canary-templates")
    assert done.code == 0, done.log
    [comment] = fake_github.comments[2]
    assert comment["body"].startswith(f"{MARKER}\nTeam comment for ✅ rlhf-canary **pass**")
    [check] = fake_github.check_runs
    assert check["output"]["summary"].startswith("Team check: ")
    assert "### ✅ rlhf-canary **pass**" in done.summary  # the job summary: ours, not overridden
    assert "pr_comment.md.j2 from .github/canary-templates" in done.log


def test_a_broken_team_template_falls_back_to_ours_and_still_publishes(runner: Runner, fake_github: FakeGitHub) -> None:
    fake_github.add_pull(number=2, head_sha=PR_HEAD)
    baselines(fake_github, 2)
    team_folder(runner.workspace, **{"pr_comment.md.j2": "{{ v.title }}\n{{ v.no_such_field }}\n"})
    done = runner.run("pull_request", "pull_request.opened.json", templates=".github/canary-templates")
    assert done.code == 0, done.log
    [comment] = fake_github.comments[2]
    assert comment["body"].startswith(f"{MARKER}\n### ✅ rlhf-canary **pass**")  # ours
    assert "::warning title=rlhf-canary%3A team templates not used::" in done.log
    assert "pr_comment.md.j2 line 2" in done.log
    assert done.summary.startswith("> ⚠️ the team template ")
    assert "this run's reports use rlhf-canary's own templates" in done.summary


def test_a_templates_folder_linked_out_of_the_workspace_is_refused(
    runner: Runner, fake_github: FakeGitHub, tmp_path: Path
) -> None:
    fake_github.add_pull(number=2, head_sha=PR_HEAD)
    baselines(fake_github, 2)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "pr_comment.md.j2").write_text("stolen\n", encoding="utf-8")
    (runner.workspace / "templates-link").symlink_to(outside)
    done = runner.run("pull_request", "pull_request.opened.json", templates="templates-link")
    assert done.code == 0, done.log
    [comment] = fake_github.comments[2]
    assert "stolen" not in comment["body"]
    assert "outside" in done.summary.split("\n", 1)[0]


def test_measure_mode_ignores_templates_with_a_notice(runner: Runner, fake_github: FakeGitHub) -> None:
    team_folder(runner.workspace, **{"pr_comment.md.j2": "{% if %}"})  # broken: never even read
    done = runner.run(
        "pull_request",
        "pull_request.opened.json",
        mode="measure",
        github_token="",
        templates=".github/canary-templates",
    )
    assert done.code == 0, done.log
    assert "templates .github/canary-templates is not used in mode measure" in done.log
    assert "team templates not used" not in done.log
    assert writes(fake_github) == []


def test_report_mode_reads_the_templates_of_the_default_branch_checkout(
    runner: Runner, fake_github: FakeGitHub
) -> None:
    fake_github.add_pull(number=2, head_sha=PR_HEAD, head_repo="octo-fork/Hello-World")
    baselines(fake_github, 2)
    measured = runner.run("pull_request", "pull_request.fork.json")
    assert measured.code == 0
    # What the pull request uploads is data: a templates folder inside its artifact is never read.
    planted = runner.workspace / "canary-output" / "templates"
    planted.mkdir()
    (planted / "pr_comment.md.j2").write_text("planted by the pull request\n", encoding="utf-8")
    run_id = fake_github.add_workflow_run(
        event="pull_request", branch="changes", head_sha=PR_HEAD, head_repo="octo-fork/Hello-World"
    )
    fake_github.add_artifact(run_id, name=ARTIFACT, content=_zip_dir(runner.workspace / "canary-output"))
    payload = _workflow_run_payload(runner.tmp, run_id, PR_HEAD, fork="octo-fork")
    team_folder(runner.workspace, **{"pr_comment.md.j2": "Default branch's layout: {{ v.title }}\n"})

    done = runner.run(
        "workflow_run", payload, ref="refs/heads/master", output_dir="canary-report", measured_workflow="canary.yml",
        templates=".github/canary-templates",
    )  # fmt: skip

    assert done.code == 0, done.log
    [comment] = fake_github.comments[2]
    assert comment["body"] == f"{MARKER}\nDefault branch's layout: ✅ rlhf-canary **pass** — `sft-smoke`\n"
