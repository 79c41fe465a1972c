"""The commits `canary bisect` searches: the first-parent history from a good commit to a bad one, and a git
worktree for each commit it trains (docs/bisect.md)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from canary_action.errors import UsageError
from canary_action.safe_git import git_command

GIT_TIMEOUT_S = 120
#: Every git call's settings: a checkout another user owns is still read (the action runs as root over the runner
#: user's checkout: "dubious ownership" otherwise), and never the checkout's hooks or fsmonitor.


@dataclass(frozen=True)
class Commit:
    sha: str
    subject: str


def git(repo: Path, *args: str) -> str:
    """One git command in `repo`; its stdout. A failure is a UsageError naming the command and git's words. Git
    gets an environment of its own (no token, no action input, no user or system config): a repository's own
    config is the only one read."""
    env = {
        "PATH": os.environ.get("PATH", os.defpath), "HOME": os.devnull, "LC_ALL": "C", "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull, "GIT_TERMINAL_PROMPT": "0",
    }  # fmt: skip
    try:
        command = git_command(repo, *args)
        done = subprocess.run(command, capture_output=True, text=True, timeout=GIT_TIMEOUT_S, check=False, env=env)
    except FileNotFoundError:
        raise UsageError("git is not installed", fix="install git: canary bisect checks out commits with it") from None
    except OSError as e:  # a config git could not list (safe_git.py): no git runs there
        raise UsageError(f"git could not run in {repo}: {e}", fix="read the repository's git config there") from None
    if done.returncode != 0:
        words = done.stderr.strip().splitlines()[-1:] or [f"exit {done.returncode}"]
        raise UsageError(f"`git {' '.join(args)}` failed in {repo}: {words[0]}", fix="run it there to see why")
    return done.stdout


def repository_root(start: Path) -> Path:
    try:
        return Path(git(start, "rev-parse", "--show-toplevel").strip())
    except UsageError:
        raise UsageError(
            f"{start.resolve()} is not inside a git repository", fix="run canary bisect in your repository's checkout"
        ) from None


def resolve(repo: Path, rev: str, flag: str) -> str:
    """The full SHA of a commit named by a SHA, a branch or a tag."""
    try:
        return git(repo, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}").strip()
    except UsageError:
        raise UsageError(
            f"{flag} {rev!r} is not a commit of this repository",
            fix="pass a SHA, branch or tag that `git log` shows (fetch it first when it is only on the remote)",
        ) from None


def first_parent_range(repo: Path, good: str, bad: str) -> list[Commit]:
    """The commits after `good` up to and including `bad`, oldest first, following first parents (a merged pull
    request is one commit, as the default branch's history shows it)."""
    if good == bad:
        raise UsageError("--good and --bad name the same commit", fix="pass the last good commit and the first bad")
    try:
        git(repo, "merge-base", "--is-ancestor", good, bad)
    except UsageError:
        raise UsageError(
            f"--good {good[:10]} is not an ancestor of --bad {bad[:10]}",
            fix="the good commit must come first in the bad commit's history (swap them?)",
        ) from None
    out = git(repo, "log", "--first-parent", "--reverse", "--format=%H%x00%s", f"{good}..{bad}")
    commits = [Commit(*line.split("\0", 1)) for line in out.splitlines() if line]
    if not commits or git(repo, "rev-parse", f"{commits[0].sha}^1").strip() != good:
        raise UsageError(
            f"--good {good[:10]} is not on the first-parent history of --bad {bad[:10]} (a commit of a branch "
            "merged into it?)",
            fix="pass two commits of one branch's own history, e.g. of the default branch (for a merged branch's "
            "commit: the merge commit, or bisect that branch)",
        )
    return commits


def describe(repo: Path, sha: str) -> Commit:
    return Commit(sha, git(repo, "log", "-1", "--format=%s", sha).strip())


@contextmanager
def worktree(repo: Path, sha: str, where: Path) -> Iterator[Path]:
    """A detached checkout of `sha` at `where`, removed afterwards (the repository's own checkout is untouched)."""
    git(repo, "worktree", "add", "--detach", "--force", str(where), sha)
    try:
        yield where
    finally:
        try:
            git(repo, "worktree", "remove", "--force", str(where))
        except UsageError:  # a side left files git will not remove: remove the folder, then prune the record
            shutil.rmtree(where, ignore_errors=True)
            git(repo, "worktree", "prune")
