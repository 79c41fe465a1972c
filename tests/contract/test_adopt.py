"""docs/adopt.md's workflow, as a team adopts it (issue 35): extracted from the page, linted as the examples are, and
its canary step run as the Actions runner runs it — the python action's composite steps, in a fresh environment
that has its own TRL and transformers and no rlhf-canary — training the team's own DPO trainer_factory in a lockstep
pair and publishing a check run and a comment on the fake GitHub. Then the same pull request through the Docker
action's entrypoint."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.contract.fake_github import FakeGitHub
from tests.contract.test_action_e2e import ROOT, Runner
from tests.contract.test_action_training import git, pull_request_payload, run_entrypoint_with
from tests.unit.test_action_parts import parse_outputs
from tests.workflow_expressions import interpolate

PAGE = ROOT / "docs" / "adopt.md"
LINT_BIN = Path(sys.executable).parent

TEAM_FACTORY = '''"""Our DPO set-up: TRL's trainer with our change, and an explicit frozen reference model."""

import copy

from trl import DPOTrainer


class OurDPOTrainer(DPOTrainer):
    """Where our loss changes live."""


def build_trainer(context):
    inputs = context.trainer_inputs()
    reference = copy.deepcopy(inputs["model"]).eval()
    reference.requires_grad_(False)
    return OurDPOTrainer(args=context.training_args(), **{**inputs, "ref_model": reference})
'''


def workflow() -> dict[str, Any]:
    """The page's workflow, as a team would copy it."""
    found = re.search(r"^## 2\. The workflow\n.*?^```yaml\n(.*?)^```$", PAGE.read_text(encoding="utf-8"), re.S | re.M)
    assert found, "docs/adopt.md lost its workflow block"
    doc: dict[str, Any] = yaml.safe_load(found.group(1))
    doc["_text"] = found.group(1)
    return doc


def test_the_quick_start_workflow_is_one_short_job_that_lints_clean(tmp_path: Path) -> None:
    doc = workflow()
    assert len(doc["_text"].splitlines()) <= 45, "about 40 lines: the point of the page"
    [job] = doc["jobs"].values()
    assert job["runs-on"] == ["self-hosted", "gpu"]
    assert set(doc[True]) == {"pull_request", "push", "workflow_dispatch"}  # PyYAML reads `on:` as True
    canary = next(step for step in job["steps"] if step.get("id") == "canary")
    action, _, ref = canary["uses"].partition("@")
    assert action == "rlhf-canary/rlhf-canary/python"
    assert re.fullmatch(r"[0-9a-f]{40}", ref), "pinned to a commit until a release exists"
    text = PAGE.read_text(encoding="utf-8")
    assert f'"rlhf-canary[train] @ git+https://github.com/rlhf-canary/rlhf-canary@{ref}"' in text, "one SHA"
    shallow = subprocess.run(
        ["git", "rev-parse", "--is-shallow-repository"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    if shallow.stdout.strip() == "false":  # the pinned commit is one of this repository's, and has the python action
        for path in ("python/action.yml", "python/install.py", "entrypoint/main.py"):
            found = subprocess.run(["git", "cat-file", "-e", f"{ref}:{path}"], cwd=ROOT, check=False)
            assert found.returncode == 0, f"the pinned commit {ref} has no {path}"
    upload = job["steps"][-1]
    assert upload["with"]["name"] == "${{ steps.canary.outputs.artifact-name }}"
    path = tmp_path / ".github" / "workflows" / "canary.yml"
    path.parent.mkdir(parents=True)
    path.write_text(doc["_text"], encoding="utf-8")
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "lint-workflows.sh"), str(path)],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
        env={**os.environ, "LINT_BIN": str(LINT_BIN)},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr


def team_environment(tmp: Path) -> Path:
    """A fresh environment with a supported training stack (this suite's torch, transformers and TRL, linked in)
    and no rlhf-canary: what a team's training image or venv holds. Its python."""
    env = tmp / "team-env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True)
    ours = Path(sysconfig.get_paths()["purelib"])
    theirs = Path(
        subprocess.run(
            [str(env / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()
    )  # fmt: skip
    for entry in ours.iterdir():
        if "rlhf_canary" not in entry.name and not entry.name.startswith("__editable__"):
            (theirs / entry.name).symlink_to(entry)
    return env / "bin" / "python"


def team_repository(runner: Runner, tmp: Path) -> tuple[Path, str]:
    """The team's repository: its DPO factory and canary config on main, and a pull request that changes a doc."""
    workspace = runner.workspace
    config = yaml.safe_load((ROOT / "configs" / "tiny" / "dpo-factory.yaml").read_text(encoding="utf-8"))
    config.update(trainer_factory="team_dpo.factory:build_trainer", heldout={"enabled": False}, max_steps=16)
    (workspace / "canary.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    (workspace / "team_dpo").mkdir()
    (workspace / "team_dpo" / "__init__.py").write_text("", encoding="utf-8")
    (workspace / "team_dpo" / "factory.py").write_text(TEAM_FACTORY, encoding="utf-8")
    git(workspace, "init", "-q", "-b", "main")
    git(workspace, "add", ".")
    git(workspace, "commit", "-q", "-m", "our DPO canary")
    base = git(workspace, "rev-parse", "HEAD")
    (workspace / "README.md").write_text("our training pipeline\n", encoding="utf-8")
    git(workspace, "add", ".")
    git(workspace, "commit", "-q", "-m", "a pull request")
    head = git(workspace, "rev-parse", "HEAD")
    runner.fake.add_pull(number=2, head_sha=head)
    return pull_request_payload(tmp, base, head), head


def run_composite(
    action_dir: Path,
    given: dict[str, str],
    runner: Runner,
    payload: Path,
    team_python: Path,
    *,
    event: str = "pull_request",
) -> tuple[int, str, dict[str, str]]:
    """A composite action's steps as the runner runs them: `${{ }}` rendered in env and run, each step in
    `bash --noprofile --norc -eo pipefail`, GITHUB_ACTION_PATH its folder, a GITHUB_OUTPUT per step, the outputs
    read back into `steps.<id>.outputs`; the job's environment is the team's (its python3 first on PATH)."""
    doc = yaml.safe_load((action_dir / "action.yml").read_text(encoding="utf-8"))
    token = runner.fake.token
    inputs = {n: given.get(n, str(s.get("default", "")).replace("${{ github.token }}", token))
              for n, s in doc["inputs"].items()}  # fmt: skip
    ref = "refs/pull/2/merge" if event == "pull_request" else "refs/heads/master"
    job = {k: v for k, v in runner.env(event, payload, {}, ref).items() if not k.startswith("INPUT_")}
    temp = runner.tmp / "runner-temp"
    temp.mkdir(exist_ok=True)
    (team_python.parent / "python3").exists() or (team_python.parent / "python3").symlink_to(team_python)
    job.update(
        PATH=f"{team_python.parent}:/usr/local/bin:/usr/bin:/bin", HOME=str(runner.tmp), RUNNER_TEMP=str(temp),
        HF_HUB_OFFLINE="1", GITHUB_ACTION_PATH=str(action_dir),
    )  # fmt: skip
    steps: dict[str, Any] = {}
    log = ""
    for number, step in enumerate(doc["runs"]["steps"]):
        context = {"inputs": inputs, "steps": steps, "github": {"token": token}}
        output = runner.tmp / f"composite-output-{number}"
        env = {**job, "GITHUB_OUTPUT": str(output)}
        env.update({k: interpolate(str(v), context) for k, v in step.get("env", {}).items()})
        done = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", interpolate(step["run"], context)],
            env=env, cwd=runner.workspace, capture_output=True, text=True, timeout=900, check=False,
        )  # fmt: skip
        log += done.stdout + done.stderr
        steps[step["id"]] = {"outputs": parse_outputs(output.read_text()) if output.exists() else {}}
        if done.returncode != 0:
            return done.returncode, log, {}
    context = {"inputs": inputs, "steps": steps, "github": {"token": token}}
    return 0, log, {name: interpolate(spec["value"], context) for name, spec in doc["outputs"].items()}


def assert_published_a_paired_verdict(
    fake: FakeGitHub, head: str, code: int, log: str, outputs: dict[str, str]
) -> None:
    assert code == 0, log[-6000:]
    assert outputs["verdict"] in ("pass", "neutral"), log[-3000:]
    [check] = fake.check_runs
    assert (check["head_sha"], check["status"]) == (head, "completed")
    assert check["conclusion"] in ("success", "neutral")
    assert "**Paired A/B** on this runner" in check["output"]["summary"]
    [comment] = fake.comments[2]
    assert comment["body"].startswith("<!-- rlhf-canary:sticky:tiny-dpo-factory -->")


@pytest.mark.training
def test_the_python_action_trains_a_teams_dpo_factory_in_its_own_environment(
    fake_github: FakeGitHub, tmp_path: Path
) -> None:
    job = workflow()["jobs"]["canary"]
    given = next(step for step in job["steps"] if step.get("id") == "canary")["with"]
    runner = Runner(fake_github, tmp_path)
    payload, head = team_repository(runner, tmp_path)
    team_python = team_environment(tmp_path)
    before = sorted(p.name for p in (team_python.parents[1] / "lib").rglob("site-packages/*"))

    code, log, outputs = run_composite(ROOT / "python", given, runner, payload, team_python)

    assert "installing beside" in log
    installed = tmp_path / "runner-temp" / "rlhf-canary-env"
    assert list(installed.glob("lib/python*/site-packages/canary_action/__init__.py")), "rlhf-canary in its own env"
    assert not list(installed.glob("lib/python*/site-packages/torch")), "the team's torch, not another"
    assert sorted(p.name for p in (team_python.parents[1] / "lib").rglob("site-packages/*")) == before
    assert_published_a_paired_verdict(fake_github, head, code, log, outputs)
    metrics = runner.workspace / outputs["metrics-path"]
    assert metrics.is_file()
    assert '"trainer_factory":"team_dpo.factory:build_trainer"' in metrics.read_text().replace(" ", "")


@pytest.mark.training
def test_the_docker_actions_entrypoint_trains_the_same_pull_request(fake_github: FakeGitHub, tmp_path: Path) -> None:
    runner = Runner(fake_github, tmp_path)
    payload, head = team_repository(runner, tmp_path)

    code, log, outputs = run_entrypoint_with(runner, payload, config="canary.yaml")

    assert_published_a_paired_verdict(fake_github, head, code, log, outputs)


@pytest.mark.training
def test_a_team_package_installed_in_the_environment_is_trained_from_the_checkout_through_setup(
    fake_github: FakeGitHub, tmp_path: Path
) -> None:
    """The walk-through's trap: the team's package is installed in its environment (non-editable), so the checkout's
    copy would never be imported. The canary refuses that run, naming the fix; with the fix (`setup`, an environment
    of its own over the job's packages) it trains the checkout's copy."""
    runner = Runner(fake_github, tmp_path)
    team_repository(runner, tmp_path)
    (runner.workspace / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=69"]\nbuild-backend = "setuptools.build_meta"\n\n'
        '[project]\nname = "team-dpo"\nversion = "1.0"\n\n[tool.setuptools]\npackages = ["team_dpo"]\n',
        encoding="utf-8",
    )
    team_python = team_environment(tmp_path)
    subprocess.run(
        [str(team_python), "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", str(runner.workspace)],
        check=True, capture_output=True,
    )  # fmt: skip
    payload = ROOT / "tests" / "fixtures" / "webhooks" / "push.json"
    given = {"config": "canary.yaml", "baseline": "artifacts"}

    code, log, _ = run_composite(ROOT / "python", given, runner, payload, team_python, event="push")

    assert code == 2, log[-4000:]
    assert "team_dpo is imported from" in log
    assert "an installed copy, not from the checked-out repository" in log

    fixed = {**given, "setup": "pip install -q --no-deps --no-build-isolation ."}
    code, log, outputs = run_composite(ROOT / "python", fixed, runner, payload, team_python, event="push")

    assert code == 0, log[-4000:]
    assert outputs["verdict"] == "neutral"  # main's first run: nothing to compare with yet
    metrics = (runner.workspace / outputs["metrics-path"]).read_text(encoding="utf-8")
    assert '"team-dpo":"1.0"' in metrics.replace(" ", "")  # the setup environment's package, recorded
