"""The action's lockstep baseline checks out the pull request's base commit beside the workspace (a git worktree),
fetching it when the checkout is shallow, and says what to change when it cannot."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from canary_action.errors import UsageError
from canary_action.github.training import checkout_base, lockstep_base


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args], cwd=cwd,
                          capture_output=True, text=True, check=True)  # fmt: skip
    return done.stdout.strip()


@pytest.fixture
def origin(tmp_path: Path) -> tuple[Path, str, str]:
    repo = tmp_path / "origin"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "canary.yaml").write_text("base\n")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "base")
    base = git(repo, "rev-parse", "HEAD")
    (repo / "canary.yaml").write_text("head\n")
    git(repo, "commit", "-q", "-am", "head")
    return repo, base, git(repo, "rev-parse", "HEAD")


def test_the_base_commit_of_a_full_checkout_is_a_worktree(origin: tuple[Path, str, str], tmp_path: Path) -> None:
    repo, base, _ = origin
    tree = checkout_base(repo, base, tmp_path / "base")
    assert (tree / "canary.yaml").read_text() == "base\n"
    assert (repo / "canary.yaml").read_text() == "head\n", "the workspace itself is untouched"


def test_a_shallow_checkout_fetches_the_base_commit(origin: tuple[Path, str, str], tmp_path: Path) -> None:
    repo, base, _ = origin
    workspace = tmp_path / "workspace"
    git(tmp_path, "clone", "-q", "--depth=1", f"file://{repo}", str(workspace))  # what actions/checkout leaves
    with pytest.raises(subprocess.CalledProcessError):
        git(workspace, "cat-file", "-e", f"{base}^{{commit}}")
    tree = checkout_base(workspace, base, tmp_path / "base")
    assert (tree / "canary.yaml").read_text() == "base\n"


def test_an_unreachable_base_commit_names_the_checkout_fix(origin: tuple[Path, str, str], tmp_path: Path) -> None:
    repo, _, _ = origin
    with pytest.raises(UsageError) as caught:
        checkout_base(repo, "0" * 40, tmp_path / "base")
    assert "fetch-depth: 0" in caught.value.fix


def test_no_git_repository_says_to_check_out(tmp_path: Path) -> None:
    with pytest.raises(UsageError) as caught:
        checkout_base(tmp_path, "0" * 40, tmp_path / "base")
    assert "actions/checkout" in caught.value.fix


def merge_pull_request(repo: Path, old_base: str) -> tuple[str, str]:
    """A pull request branched at `old_base`, main moved on since (its "head" commit), and GitHub's test merge of
    the two checked out: (the pull request's head, main's commit the merge was made on)."""
    git(repo, "checkout", "-q", "-b", "feature", old_base)
    (repo / "feature.txt").write_text("pr\n")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "pr")
    pr_head = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-q", "main")
    moved_base = git(repo, "rev-parse", "HEAD")
    git(repo, "merge", "-q", "--no-ff", "-m", "merge", "feature")
    return pr_head, moved_base


def test_a_merge_checkout_pairs_with_its_first_parent(origin: tuple[Path, str, str], tmp_path: Path) -> None:
    """pull_request checks out GitHub's merge commit: the base branch may have moved since the event's base.sha,
    so the pair's base is the merge's first parent (the base branch the merge was made on)."""
    repo, old_base, _ = origin
    pr_head, moved_base = merge_pull_request(repo, old_base)
    assert lockstep_base(repo, old_base, pr_head) == moved_base
    git(repo, "checkout", "-q", "feature")  # the PR's head itself checked out: where it branched
    assert lockstep_base(repo, old_base, pr_head) == old_base
    assert lockstep_base(repo, moved_base, pr_head) == old_base, "the base branch's newer commits are not the PR's"
    assert lockstep_base(repo, "0" * 40, pr_head) == "0" * 40, "no history to find it: the event's base"


def test_a_shallow_merge_checkout_still_knows_its_parents(origin: tuple[Path, str, str], tmp_path: Path) -> None:
    """actions/checkout's default depth of 1: `rev-list --parents` lists no parent there, the commit object does.
    Without them the merge was paired with the event's (older) base, and the check went on the merge commit."""
    from canary_action.github.training import measured_commit

    repo, old_base, _ = origin
    pr_head, moved_base = merge_pull_request(repo, old_base)
    merge = git(repo, "rev-parse", "HEAD")
    shallow = tmp_path / "shallow"
    git(tmp_path, "clone", "-q", "--depth=1", f"file://{repo}", str(shallow))
    assert git(shallow, "rev-list", "--parents", "-n", "1", "HEAD") == merge  # what the old code read
    assert lockstep_base(shallow, old_base, pr_head) == moved_base
    assert measured_commit(shallow, merge_sha=merge) == pr_head


def test_a_multi_process_base_config_cannot_be_paired(origin: tuple[Path, str, str], tmp_path: Path) -> None:
    from canary_action.errors import NoPairBaseError
    from canary_action.github.training import LockstepTrainer

    repo, _, _ = origin
    (repo / "canary.yaml").write_text((Path(__file__).parents[2] / "configs" / "tiny" / "ddp.yaml").read_text())
    git(repo, "commit", "-q", "-am", "two processes")
    base = git(repo, "rev-parse", "HEAD")
    with pytest.raises(NoPairBaseError, match="runs 2 processes; a pair runs one per side"):
        LockstepTrainer(repo).base_tree("canary.yaml", base)
