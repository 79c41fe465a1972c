"""What a lockstep pair's head tree changed against its base tree: the files, and the lines each one added.

A pair's two sides run the same config on the same machine with the same stack (unless `setup` installs per
side), so when the head side is slower the first place to look is the code the pull request changed. The
coordinator records it in pair.json before either side starts (nothing the sides write is in it), and the
comparison names those files, with the first lines each one added, as the likeliest cause.

Two checkouts of one git repository (the action: the base commit as a worktree of the checkout, each the top of
its work tree) are diffed by git itself, the base commit against the head's working tree, so untracked output
folders are not changes. Other folders (`canary pair --base DIR --head DIR`, folders inside a repository) are
walked, leaving out version-control, cache and environment folders and the pair's own output folder; a walk
reads at most MAX_READ bytes and says when it stopped. Nothing a tree holds makes either fail: a diff that
cannot be made is empty, with a note.
"""

from __future__ import annotations

import difflib
import os
import subprocess
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Final, Literal

from canary_action.metrics.pair import ChangeKind, CodeChange, CodeDiff
from canary_action.safe_git import git_command

MAX_FILES: Final = 200
MAX_READ: Final = 256 << 20  # bytes compared by a walk before it stops (a tree of datasets or checkpoints)
MAX_TEXT: Final = 512 << 10  # larger files are compared, not diffed line by line
DIFF_LINES: Final = 2000  # longer files are counted line by line as multisets (difflib slows down past this)
ADDED_LINES: Final = 6  # the first lines a file added, kept as the code to look at
LINE_CHARS: Final = 160
#: Folders a walk does not enter: version control, caches, environments, build output.
SKIPPED_DIRS: Final = frozenset({
    ".git", ".hg", ".svn", "__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".venv", "venv",
    "node_modules", ".tox", ".nox", "build", "dist", ".ipynb_checkpoints",
})  # fmt: skip
#: Paths as they are, and taken literally (a file named `*` is that file).
_FLAGS: Final = ("-c", "core.quotePath=false", "--literal-pathspecs")
GIT_TIMEOUT_S: Final = 60
ADDED_FILES: Final = 3  # files whose added lines are kept: the ones a report shows
#: The tree is a pull request's: no external diff program or textconv filter its .gitattributes could name.
_PLAIN: Final = ("--no-renames", "--no-ext-diff", "--no-textconv")


def diff_trees(base: Path, head: Path, *, exclude: Sequence[Path] = ()) -> CodeDiff:
    """The files `head` changed against `base`, largest change first (at most MAX_FILES). Never raises for what
    the trees hold: a diff that cannot be made is an empty one with a note."""
    if base.resolve() == head.resolve():
        return CodeDiff(method="walk", files=[], num_files=0)
    try:
        by_git = _git_diff(base, head)
        return (
            by_git if by_git is not None else _walk_diff(base.resolve(), head.resolve(), [p.resolve() for p in exclude])
        )
    except (OSError, ValueError, subprocess.SubprocessError) as e:
        return CodeDiff(method="walk", files=[], num_files=0, note=f"not diffed: {type(e).__name__}: {e}"[:300])


def _git_diff(base: Path, head: Path) -> CodeDiff | None:
    """git's diff of the base tree's commit against the head's working tree; None unless both are checkouts of
    one repository (the head's object store holds the base commit). Three git calls whatever the size of the
    change: the counts, the kinds, and the lines added by the files shown."""
    if not (_top_level(base) and _top_level(head)):  # folders inside a repository: git would diff all of it
        return None
    base_sha = _git(base, "rev-parse", "--verify", "HEAD")
    if not base_sha or _git(head, "cat-file", "-t", base_sha) != "commit":
        return None
    numstat, kinds = (
        _git(head, "diff", *_PLAIN, "-z", "--numstat", base_sha),
        _git(head, "diff", *_PLAIN, "-z", "--name-status", base_sha),
    )
    if numstat is None or kinds is None:
        return None
    kind_of = _name_status(kinds)
    changes = []
    for entry in filter(None, numstat.split("\0")):
        plus, minus, path = entry.split("\t", 2)
        binary = plus == "-"
        changes.append(CodeChange(
            path=path, change=kind_of.get(path, "modified"),
            lines_added=0 if binary else int(plus), lines_removed=0 if binary else int(minus),
        ))  # fmt: skip
    diff = _ranked(changes, method="git", base_commit=base_sha, head_commit=_git(head, "rev-parse", "--verify", "HEAD"))
    shown = [c.path for c in diff.files[:ADDED_FILES] if c.lines_added]
    lines = _added_by_file(_git(head, "diff", *_PLAIN, "-U0", base_sha, "--", *shown) or "") if shown else {}
    files = [c.model_copy(update={"added": lines.get(c.path, [])}) for c in diff.files]
    return diff.model_copy(update={"files": files})


def _top_level(tree: Path) -> bool:
    """Whether `tree` is the top of a git work tree (a checkout, or a worktree of one)."""
    top = _git(tree, "rev-parse", "--show-toplevel")
    return top is not None and Path(top).resolve() == tree.resolve()


def _name_status(output: str) -> dict[str, ChangeKind]:
    """`git diff -z --name-status`: status, NUL, path, NUL, ... (no renames: one path each)."""
    fields = output.split("\0")
    kinds: dict[str, ChangeKind] = {"A": "added", "D": "removed"}
    return {path: kinds.get(status[:1], "modified") for status, path in zip(fields[::2], fields[1::2], strict=False)}


def _added_by_file(patch: str) -> dict[str, list[str]]:
    """The first added lines of each file of a unified diff (the headers before each file's first hunk skipped)."""
    found: dict[str, list[str]] = {}
    current: list[str] | None = None
    in_hunk = False
    for line in patch.splitlines():
        if line.startswith("diff --git "):
            current, in_hunk = None, False
        elif line.startswith("+++ ") and not in_hunk:
            name = line[4:]
            current = found.setdefault(name.removeprefix("b/"), []) if name != "/dev/null" else None
        elif line.startswith("@@"):
            in_hunk = True
        elif in_hunk and current is not None and line.startswith("+"):
            current.append(line[1:])
    return {path: _first(lines) for path, lines in found.items()}


def _git(tree: Path, *args: str) -> str | None:
    done = subprocess.run(
        git_command(tree, *_FLAGS, *args), capture_output=True, text=True, encoding="utf-8", errors="replace",
        check=False, timeout=GIT_TIMEOUT_S,
    )  # fmt: skip
    return done.stdout.strip("\n") if done.returncode == 0 else None


def _walk_diff(base: Path, head: Path, exclude: Sequence[Path]) -> CodeDiff:
    before, after = dict(_files(base, exclude)), dict(_files(head, exclude))
    changes: list[CodeChange] = []
    budget = MAX_READ
    for path in sorted(before.keys() | after.keys()):
        old, new = before.get(path), after.get(path)
        if old is not None and new is not None and old.stat().st_size == new.stat().st_size:
            budget -= 2 * old.stat().st_size
            if budget < 0:
                return _ranked(changes, method="walk", note=f"stopped after comparing {MAX_READ >> 20} MiB of files")
            if old.read_bytes() == new.read_bytes():
                continue
        changes.append(_file_change(path, old, new))
    return _ranked(changes, method="walk")


def _files(root: Path, exclude: Sequence[Path]) -> Iterator[tuple[str, Path]]:
    for folder, dirs, names in os.walk(root):
        here = Path(folder)
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS and (here / d).resolve() not in exclude)
        for name in names:
            path = here / name
            if path.is_file() and not path.is_symlink():
                yield path.relative_to(root).as_posix(), path


def _file_change(path: str, old: Path | None, new: Path | None) -> CodeChange:
    kind: ChangeKind = "added" if old is None else "removed" if new is None else "modified"
    before, after = _text(old), _text(new)
    if before is None or after is None:  # binary or large: changed, lines unknown
        return CodeChange(path=path, change=kind)
    if max(len(before), len(after)) > DIFF_LINES:  # difflib is superlinear: count by multiset, linear
        gained, lost = Counter(after) - Counter(before), Counter(before) - Counter(after)
        fresh = [line for line in after if gained[line] > 0]
        return CodeChange(path=path, change=kind, lines_added=gained.total(), lines_removed=lost.total(),
                          added=_first(fresh))  # fmt: skip
    added, removed = 0, 0
    new_lines: list[str] = []
    for line in difflib.unified_diff(before, after, n=0, lineterm=""):
        if line.startswith(("+++", "---", "@@")):
            continue
        if line.startswith("+"):
            added += 1
            new_lines.append(line[1:])
        elif line.startswith("-"):
            removed += 1
    return CodeChange(path=path, change=kind, lines_added=added, lines_removed=removed, added=_first(new_lines))


def _text(path: Path | None) -> list[str] | None:
    """The file's lines ([] for no file); None for a binary or large one."""
    if path is None:
        return []
    if path.stat().st_size > MAX_TEXT:
        return None
    data = path.read_bytes()
    if b"\0" in data:
        return None
    return data.decode("utf-8", errors="replace").splitlines()


def _first(lines: Iterator[str] | Sequence[str]) -> list[str]:
    """The first ADDED_LINES non-blank lines, stripped and clipped."""
    kept = []
    for line in lines:
        if line.strip():
            kept.append(line.strip()[:LINE_CHARS])
            if len(kept) == ADDED_LINES:
                break
    return kept


Method = Literal["git", "walk"]


def _ranked(changes: list[CodeChange], *, method: Method, note: str | None = None, **commits: str | None) -> CodeDiff:
    changes.sort(key=lambda c: (-(c.lines_added + c.lines_removed), c.path))
    return CodeDiff(
        method=method, files=changes[:MAX_FILES], num_files=len(changes), note=note,
        base_commit=commits.get("base_commit"), head_commit=commits.get("head_commit"),
    )  # fmt: skip
