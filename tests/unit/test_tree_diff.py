"""What a lockstep pair's head tree changed against its base tree (train/launch/tree_diff.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from canary_action.train.launch.tree_diff import ADDED_LINES, diff_trees

FACTORY = "def build_trainer(context):\n    return make(context)\n"
SLOWER = (
    "def build_trainer(context):\n    trainer = make(context)\n    trainer.extra_forward = True\n    return trainer\n"
)


def write(root: Path, files: dict[str, str | bytes]) -> Path:
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    return root


def test_a_walk_lists_added_removed_and_modified_files_with_their_new_lines(tmp_path: Path) -> None:
    base = write(tmp_path / "base", {"team/factory.py": FACTORY, "old.py": "x = 1\n", "same.yaml": "a: 1\n"})
    head = write(tmp_path / "head", {"team/factory.py": SLOWER, "new.py": "y = 2\n", "same.yaml": "a: 1\n"})
    diff = diff_trees(base, head)
    assert diff.method == "walk"
    changes = {c.path: c for c in diff.files}
    assert set(changes) == {"team/factory.py", "old.py", "new.py"}
    factory = changes["team/factory.py"]
    assert (factory.change, factory.lines_added, factory.lines_removed) == ("modified", 3, 1)
    assert factory.added == ["trainer = make(context)", "trainer.extra_forward = True", "return trainer"]
    assert changes["old.py"].change == "removed"
    assert (changes["new.py"].change, changes["new.py"].added) == ("added", ["y = 2"])
    assert diff.files[0].path == "team/factory.py"  # the largest change first
    assert diff.num_files == 3


def test_a_walk_leaves_out_caches_environments_binaries_lines_and_the_pairs_own_output(tmp_path: Path) -> None:
    base = write(tmp_path / "base", {"a.py": "x = 1\n", "blob.bin": b"\0\1"})
    head = write(tmp_path / "head", {
        "a.py": "x = 1\n", "blob.bin": b"\0\2", "__pycache__/a.pyc": "junk", ".venv/lib/site.py": "junk",
        ".git/HEAD": "ref", "runs/pair-1/metrics.json": "{}", "long.py": "".join(f"line{i}\n" for i in range(50)),
    })  # fmt: skip
    diff = diff_trees(base, head, exclude=[head / "runs"])
    changes = {c.path: c for c in diff.files}
    assert set(changes) == {"blob.bin", "long.py"}
    assert (changes["blob.bin"].lines_added, changes["blob.bin"].added) == (0, [])
    assert len(changes["long.py"].added) == ADDED_LINES


def test_the_same_tree_on_both_sides_changed_nothing(tmp_path: Path) -> None:
    tree = write(tmp_path / "t", {"a.py": "x = 1\n"})
    assert diff_trees(tree, tree).files == []


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args], cwd=cwd,
                          capture_output=True, text=True, check=True)  # fmt: skip
    return done.stdout.strip()


def test_two_checkouts_of_one_repository_are_diffed_by_git_and_untracked_output_is_no_change(tmp_path: Path) -> None:
    """As the action pairs them: the base commit as a worktree of the pull request's checkout."""
    head = write(tmp_path / "repo", {"team/factory.py": FACTORY, "canary.yaml": "name: c\n"})
    git(head, "init", "-q", "-b", "main")
    git(head, "add", ".")
    git(head, "commit", "-q", "-m", "base")
    base_sha = git(head, "rev-parse", "HEAD")
    write(head, {"team/factory.py": SLOWER})
    git(head, "commit", "-q", "-am", "slower")
    write(head, {"canary-output/metrics.json": "{}"})  # untracked: the action's output folder
    git(head, "worktree", "add", "-q", "--detach", str(tmp_path / "base"), base_sha)
    diff = diff_trees(tmp_path / "base", head)
    assert diff.method == "git"
    assert (diff.base_commit, diff.head_commit) == (base_sha, git(head, "rev-parse", "HEAD"))
    [change] = diff.files
    assert (change.path, change.change, change.lines_added, change.lines_removed) == (
        "team/factory.py",
        "modified",
        3,
        1,
    )
    assert "trainer.extra_forward = True" in change.added


def test_a_pull_requests_bytes_names_and_repository_config_neither_break_nor_steer_the_diff(tmp_path: Path) -> None:
    """Latin-1 text (no NUL: git calls it text), a file named `*` (a pathspec for everything), and a planted
    fsmonitor hook in the checkout's config: a diff, not a crash, the literal file, and nothing run."""
    head = write(tmp_path / "repo", {"a.py": "x = 1\n", "b.py": "y = 2\n"})
    git(head, "init", "-q", "-b", "main")
    git(head, "add", ".")
    git(head, "commit", "-q", "-m", "base")
    base_sha = git(head, "rev-parse", "HEAD")
    write(head, {"a.py": b"x = 1\ncaf\xe9 = 2\n", "*": "star = 3\n", "b.py": "y = 2\nz = 3\n"})
    git(head, "add", ".")
    git(head, "commit", "-q", "-m", "head")
    ran = tmp_path / "fsmonitor-ran"
    hook = tmp_path / "hook.sh"
    hook.write_text(f"#!/bin/sh\ntouch {ran}\n", encoding="utf-8")
    hook.chmod(0o755)
    git(head, "worktree", "add", "-q", "--detach", str(tmp_path / "base"), base_sha)
    git(head, "config", "core.fsmonitor", str(hook))  # planted after the test's own git calls
    diff = diff_trees(tmp_path / "base", head)
    changes = {c.path: c for c in diff.files}
    assert set(changes) == {"a.py", "*", "b.py"}
    assert changes["*"].added == ["star = 3"]  # its own line, not every file's
    assert changes["a.py"].added == ["caf\ufffd = 2"]
    assert not ran.exists()


def test_a_long_file_is_counted_without_a_line_diff(tmp_path: Path) -> None:
    """difflib is superlinear: past DIFF_LINES lines a file's lines are counted as multisets."""
    from canary_action.train.launch.tree_diff import DIFF_LINES

    lines = [f"line {i}\n" for i in range(3 * DIFF_LINES)]
    base = write(tmp_path / "base", {"big.txt": "".join(lines)})
    head = write(tmp_path / "head", {"big.txt": "".join([*lines[5:], "new 1\n", "new 2\n"])})
    [change] = diff_trees(base, head).files
    assert (change.lines_added, change.lines_removed, change.added) == (2, 5, ["new 1", "new 2"])


def test_two_folders_inside_one_repository_are_walked_not_diffed_by_git(tmp_path: Path) -> None:
    """`canary pair --base repo/a --head repo/b`: git would diff the whole enclosing repository (the benchmark's
    trees under benchmarks/data listed the project's own uncommitted files)."""
    repo = write(tmp_path / "repo", {"README.md": "a project\n"})
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "project")
    write(repo, {"README.md": "a project, edited\n", "trees/base/t.py": FACTORY, "trees/head/t.py": SLOWER})
    diff = diff_trees(repo / "trees" / "base", repo / "trees" / "head")
    assert diff.method == "walk"
    assert [c.path for c in diff.files] == ["t.py"]
