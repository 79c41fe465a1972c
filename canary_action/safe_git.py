"""git on a tree the canary did not make (a pull request's checkout, a folder given to `canary pair`): nothing in
the repository's own config or files may make git run a program.

    subprocess.run(git_command(tree, "diff", "--numstat", base_sha), env=git_environment(), ...)

A repository's .git/config can name programs git runs on its own: filter drivers (`filter.<name>.clean`, `smudge`,
`process`, applied by `status`, `diff` and `worktree add` to every path its .gitattributes gives that filter), diff
and merge drivers, hooks, fsmonitor. Such a config is no part of a commit, but code that ran earlier in the job (a
pull request's, as the runner's user) can write it, and git runs what it names as the canary's user: root in the
Docker action. So every command gets `-c` overrides that empty each driver any config git reads names (the
repository's, its worktree's, what they include, the user's and the system's), hooks and fsmonitor off, and no program
a fetch could run; git-lfs's standard filter, as `git lfs install` writes it, is kept (a team's data files would
otherwise check out as pointers). A config that cannot be listed stops git (OSError): it fails closed.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Final

#: Always: a checkout owned by the runner's user is read as root (safe.directory); no hook or fsmonitor runs; a fetch
#: runs no program a config names (an `ext::` remote, a remote's upload-pack, an ssh command, a credential helper).
SETTINGS: Final = (
    "-c", "safe.directory=*", "-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null",
    "-c", "protocol.ext.allow=never", "-c", "remote.origin.uploadpack=git-upload-pack", "-c", "core.sshCommand=ssh",
    "-c", "credential.helper=", "-c", "core.askPass=",
)  # fmt: skip
#: Keys of a driver (section.<name>.key) that name a program to run.
_PROGRAM_KEYS: Final = {"filter": ("clean", "smudge", "process"), "diff": ("command", "textconv"), "merge": ("driver",)}
#: git-lfs's filter exactly as `git lfs install --local` writes it: git-lfs runs, nothing of the repository's.
_LFS: Final = {
    "filter.lfs.clean": "git-lfs clean -- %f",
    "filter.lfs.smudge": "git-lfs smudge -- %f",
    "filter.lfs.process": "git-lfs filter-process",
}
_TIMEOUT_S: Final = 30


def git_command(repo: Path, *args: str) -> list[str]:
    """`git -C repo ARGS` with SETTINGS and every program the repository's own config names emptied."""
    return ["git", *SETTINGS, *disarmed(repo), "-C", str(repo), *args]


def disarmed(repo: Path) -> list[str]:
    """`-c key=` for each driver program any config git reads in `repo` names (the repository's, its worktree's, what
    they include, the user's and the system's: code that ran earlier in the job can write the first and, in
    $HOME, the next): git then runs no filter for it, and a `required` filter is no longer required. Raises OSError
    when the config cannot be listed (a hang, an include that is a FIFO): fail closed, the caller runs no git."""
    try:
        done = subprocess.run(
            ["git", *SETTINGS, "-C", str(repo), "config", "--includes", "--list", "-z"],
            capture_output=True, timeout=_TIMEOUT_S, check=False, env=git_environment(),
        )  # fmt: skip
    except subprocess.TimeoutExpired as e:
        raise OSError(f"git could not list the config of {repo} within {_TIMEOUT_S} s") from e
    if done.returncode != 0 and b"not a git repository" not in done.stderr:
        raise OSError(f"git could not list the config of {repo}: {done.stderr.decode(errors='replace')[-200:]}")
    overrides: list[str] = []
    for entry in done.stdout.decode("utf-8", errors="replace").split("\0"):
        key, _, value = entry.partition("\n")
        section, _, rest = key.partition(".")
        driver, _, name = rest.rpartition(".")  # a driver's name keeps its case: git's subsections do
        section, name = section.lower(), name.lower()
        full = f"{section}.{driver}.{name}"
        if not driver or name not in _PROGRAM_KEYS.get(section, ()) or _LFS.get(full) == value.strip():
            continue
        overrides += ["-c", f"{full}="]
        if section == "filter":
            overrides += ["-c", f"filter.{driver}.required=false"]
    return overrides


def git_environment(base: dict[str, str] | None = None) -> dict[str, str]:
    """`base` (this process's environment) with git never prompting for credentials."""
    return {**(os.environ if base is None else base), "GIT_TERMINAL_PROMPT": "0"}
