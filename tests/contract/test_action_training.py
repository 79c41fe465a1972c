"""The entrypoint exactly as the runner calls it — a process with INPUT_* and GITHUB_* set, in the workspace —
with a real tiny training, against the fake GitHub: a default-branch push makes the baseline, whose uploaded
output-dir the next pull request downloads, compares with, and publishes a check and a comment about."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.contract.fake_github import FakeGitHub, make_zip
from tests.contract.test_action_e2e import PR_HEAD, ROOT, Runner
from tests.unit.test_action_parts import parse_outputs

pytestmark = pytest.mark.training


def run_entrypoint(runner: Runner, event: str, payload: str, ref: str) -> tuple[int, str, dict[str, str]]:
    env = runner.env(event, ROOT / "tests" / "fixtures" / "webhooks" / payload, {}, ref)
    done = subprocess.run(
        [sys.executable, str(ROOT / "entrypoint" / "main.py")],
        env={"PATH": "/usr/bin:/bin", "HOME": str(runner.tmp), "HF_HUB_OFFLINE": "1", **env},
        cwd=runner.workspace,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,  # the exit code is what the test is about
    )
    return done.returncode, done.stdout + done.stderr, parse_outputs(Path(env["GITHUB_OUTPUT"]).read_text())


def test_push_baseline_then_pull_request_with_real_training(fake_github: FakeGitHub, tmp_path: Path) -> None:
    runner = Runner(fake_github, tmp_path)
    config = yaml.safe_load((ROOT / "configs" / "tiny" / "sft.yaml").read_text())
    (runner.workspace / "canary.yaml").write_text(yaml.safe_dump({**config, "max_steps": 20}))
    fake_github.add_pull(number=2, head_sha=PR_HEAD)

    code, log, outputs = run_entrypoint(runner, "push", "push.json", "refs/heads/master")
    assert code == 0, log
    assert outputs["artifact-name"] == "rlhf-canary-tiny-sft"
    assert outputs["verdict"] == "neutral"  # the first run on the default branch has nothing to compare with
    assert [r for r in fake_github.requests if r.method != "GET"] == []
    # what actions/upload-artifact would upload: the whole output-dir
    output_dir = runner.workspace / "canary-output"
    files = {str(p.relative_to(output_dir)): p.read_bytes() for p in output_dir.rglob("*") if p.is_file()}
    assert outputs["metrics-path"].removeprefix("canary-output/") in files
    push_run = fake_github.add_workflow_run(event="push")
    fake_github.add_artifact(push_run, name="rlhf-canary-tiny-sft", content=make_zip(files))

    code, log, outputs = run_entrypoint(runner, "pull_request", "pull_request.opened.json", "refs/pull/2/merge")

    assert code in (0, 1), log  # pass or regression: a verdict on a comparison, never neutral or a crash
    assert outputs["verdict"] in ("pass", "regression")
    [check] = fake_github.check_runs
    assert check["head_sha"] == PR_HEAD
    assert check["conclusion"] == {"pass": "success", "regression": "failure"}[outputs["verdict"]]
    [comment] = fake_github.comments[2]
    assert comment["body"].startswith("<!-- rlhf-canary:sticky:tiny-sft -->")
    assert f"runs/{push_run}" in comment["body"]  # the baseline run is linked
    assert "ghs_faketoken" not in log.replace("::add-mask::ghs_faketoken", "")
