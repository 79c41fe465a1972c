"""git on a tree the canary did not make runs nothing that tree's config names (safe_git.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from canary_action.safe_git import disarmed
from canary_action.train.launch.tree_diff import diff_trees


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.email=t@t", "-c", "user.name=t", "-C", str(repo), *args], check=True,
                   capture_output=True)  # fmt: skip


def test_a_filter_the_head_trees_own_config_names_never_runs_when_the_canary_diffs_it(tmp_path: Path) -> None:
    """`canary pair` on an untrusted folder: its .git/config named a clean filter (and a long-running filter process)
    for every path, and `git diff` of the head tree ran it as root."""
    ran = tmp_path / "filter-ran"
    base = tmp_path / "base"
    base.mkdir()
    _git(base, "init", "-q")
    (base / ".gitattributes").write_text("* filter=evil\n", encoding="utf-8")
    (base / "train.py").write_text("SPEED = 1\n", encoding="utf-8")
    _git(base, "add", "-A")
    _git(base, "commit", "-qm", "base")
    head = tmp_path / "head"
    _git(base, "worktree", "add", "-q", "--detach", str(head))
    (head / "train.py").write_text("SPEED = 2\n", encoding="utf-8")
    for key in ("clean", "process"):
        _git(head, "config", f"filter.evil.{key}", f"sh -c 'touch {ran}-{key}; cat'")
    _git(head, "config", "filter.evil.required", "true")
    # a driver's name keeps its case (git's subsections do), and a worktree's own config counts too
    (head / ".gitattributes").write_text("* filter=evil\n*.py filter=Evil\n", encoding="utf-8")
    _git(head, "config", "filter.Evil.clean", f"sh -c 'touch {ran}-case; cat'")
    _git(head, "config", "extensions.worktreeConfig", "true")
    _git(head, "config", "--worktree", "filter.evil.smudge", f"sh -c 'touch {ran}-worktree; cat'")
    _git(head, "config", "filter.lfs.process", "git-lfs filter-process")  # the standard one: kept

    diff = diff_trees(base, head)

    assert sorted(c.path for c in diff.files) == [".gitattributes", "train.py"]
    assert diff.method == "git"
    assert sorted(tmp_path.glob("filter-ran*")) == []
    overrides = disarmed(head)
    assert "filter.evil.process=" in overrides
    assert "filter.Evil.clean=" in overrides
    assert "filter.evil.smudge=" in overrides
    assert "filter.evil.required=false" in overrides
    assert not any(o.startswith("filter.lfs.") for o in overrides)
