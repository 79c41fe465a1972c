"""`canary bisect` in a real throwaway git repository: real lockstep pairs of the builtin tiny SFT canary, commits
that cannot train skipped, and bad input refused before any training."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from canary_action.bisect.result import BisectResult
from tests.factories import NO_HELDOUT_YAML

REPO = Path(__file__).parents[2]
SFT = (REPO / "configs" / "tiny" / "sft.yaml").read_text(encoding="utf-8") + NO_HELDOUT_YAML  # step time is followed
#: A planted slowdown that no load can hide, of the same relative size in every pair: 200 extra 256x256 products a
#: step, several times the tiny model's step. (A 0.3 s sleep was not: its share of a step moves with the load, and
#: a search compares levels across pairs; one run beside the rest of the suite reported two findings, not one.)
PLANTED = "fault_injection:\n  extra_matmuls_per_step: 200\n"
GIT_ENV = {
    "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.com", "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1",
}  # fmt: skip


def commit(repo: Path, subject: str, **files: str) -> str:
    env = {**os.environ, **GIT_ENV}
    for name, text in files.items():
        (repo / name).write_text(text, encoding="utf-8")
    subprocess.run(["git", "add", "-A"], cwd=repo, env=env, check=True)
    subprocess.run(["git", "commit", "-qm", subject], cwd=repo, env=env, check=True)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True, check=True)
    return head.stdout.strip()


def bisect(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "canary_action", "bisect", "canary.yaml", *args]
    return subprocess.run(command, cwd=repo, capture_output=True, text=True, timeout=900, check=False)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = tmp_path / "team"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=repo, check=True)
    return repo


@pytest.mark.training
def test_a_commit_that_cannot_train_is_skipped_and_the_range_it_leaves_is_reported(repo: Path, tmp_path: Path) -> None:
    good = commit(repo, "the canary", **{"canary.yaml": SFT, "README.md": "team\n"})
    broken = commit(repo, "config: a typo", **{"canary.yaml": SFT + "lerning_rate: 1\n"})
    planted = commit(repo, "config: fix the typo, and multiply every step", **{"canary.yaml": SFT + PLANTED})
    bad = commit(repo, "docs: more words", **{"README.md": "team\nmore\n"})
    out = tmp_path / "out"
    done = bisect(repo, "--good", good, "--bad", bad, "-o", str(out), "--set", "max_steps=34", "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    result = BisectResult.model_validate_json(done.stdout)
    assert result == BisectResult.model_validate_json((out / "bisect.json").read_text(encoding="utf-8"))
    assert result.check == "step_time"
    assert result.steps[0].call == "confirm"
    assert result.steps[0].effect is not None
    assert result.steps[0].effect.low > 50  # the products: several times the step
    skipped = [s for s in result.steps if s.call == "skipped"]
    assert {s.commit.sha for s in skipped} == {broken}
    assert "lerning_rate" in skipped[0].why
    (finding,) = result.findings  # the planted commit or the one that could not train: no commit named
    assert [c.sha for c in finding.commits] == [broken, planted]
    assert not finding.clear
    assert "skipped" in finding.why
    assert result.status == "not-clear"
    assert result.pairs <= result.max_pairs + len(skipped)
    markdown = (out / "bisect.md").read_text(encoding="utf-8")
    assert markdown.startswith("<!-- rlhf-canary bisect -->\n## rlhf-canary bisect: narrowed, not to one commit")
    assert planted[:10] in markdown
    for step in result.steps:
        if step.pair_dir is not None:
            assert json.loads((Path(step.pair_dir) / "result.json").read_text(encoding="utf-8"))["verdict"]
    worktrees = subprocess.run(["git", "worktree", "list"], cwd=repo, capture_output=True, text=True, check=True)
    assert len(worktrees.stdout.splitlines()) == 1  # every checkout it made is gone


def test_bad_input_is_refused_before_any_training(repo: Path, tmp_path: Path) -> None:
    good = commit(repo, "the canary", **{"canary.yaml": SFT})
    bad = commit(repo, "later", **{"README.md": "x\n"})
    cases = {
        ("--good", bad, "--bad", good): "is not an ancestor of --bad",
        ("--good", "v9.9", "--bad", bad): "--good 'v9.9' is not a commit of this repository",
        ("--good", good, "--bad", good): "--good and --bad name the same commit",
    }
    for args, words in cases.items():
        done = bisect(repo, *args)
        assert done.returncode == 2, done.stderr
        assert words in done.stderr
        assert "fix:" in done.stderr
    outside = tmp_path / "not-a-repo"
    outside.mkdir()
    done = bisect(outside, "--good", good, "--bad", bad)
    assert done.returncode == 2
    assert "is not inside a git repository" in done.stderr
    assert "Traceback" not in done.stderr
