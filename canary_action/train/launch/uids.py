"""The head side's user of its own: a uid that no process on this machine runs as and that no other pair holds.

A pair ends its head side's leftovers by killing every process of the head's uid (Identity.end_leftovers), so
two pairs on one machine (two runners, a test suite running pairs in parallel, a pair beside a bisect) must never
share one. Reading /proc alone is not enough: two pairs started at the same moment both see a uid unused before
either has started a process as it. So a pair also holds an exclusive lock on a file named after its uid, taken
without waiting and held until this process ends (the kernel releases it then, even after SIGKILL); a uid whose
lock another process holds is taken. Each pair claims a uid anew (a bisect holds one per pair it ran: a few).

The locks sit in a folder only the coordinator's user can write (`lock_folder`: /run/rlhf-canary/head-uids for
root): in the shared temporary folder a head side could pre-create every lock file (where fs.protected_regular is
on, root's open of another user's file there fails, and later pairs would find no uid).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Final

from canary_action.errors import UsageError

HEAD_UID_ENV: Final = "CANARY_PAIR_HEAD_UID"
LOCK_DIR_ENV: Final = "CANARY_PAIR_LOCK_DIR"
DEFAULT_HEAD_UID: Final = 61_471
HEAD_UIDS: Final = 4096  # the head side takes a free uid from DEFAULT_HEAD_UID up (free_uid)
#: nobody (65534) and the 16-bit "no user" (65535): owners of files on many systems, never a head side.
_RESERVED: Final = frozenset({65534, 65535})
#: uid -> the open file whose lock claims it, for this process's life.
_claimed: dict[int, int] = {}


def free_uid(first: int = DEFAULT_HEAD_UID, count: int = HEAD_UIDS) -> int:
    """A uid in [first, first + count) that no process on this machine runs as (read from /proc) and whose lock
    no other process holds (`lock_path`; this process takes it), searched from a place this process's id picks."""
    used = _uids_in_use()
    start = os.getpid() % count
    for offset in range(count):
        uid = first + (start + offset) % count
        if uid not in _RESERVED and uid not in used and uid not in _claimed and _claim(uid):
            return uid
    raise UsageError(
        f"every uid from {first} to {first + count - 1} runs a process or is held by another pair: no user of its own"
        " for the head side",
        fix=f"set {HEAD_UID_ENV} to a uid no process uses, or `off` to run both sides as this user",
    )


def lock_path(uid: int) -> Path:
    """The file whose lock claims `uid`, in the folder every pair on the machine shares (`lock_folder`)."""
    return lock_folder() / f"head-uid-{uid}.lock"


def lock_folder() -> Path:
    """Where the uid locks go: CANARY_PAIR_LOCK_DIR, else /run/rlhf-canary/head-uids for root (a folder no other
    user can write), else a folder of this user's in the temporary folder. Made 0700 if missing; refused (UsageError)
    when it is a link, or another user's, or writable by others."""
    named = os.environ.get(LOCK_DIR_ENV)
    if named:
        folder = Path(named)
    elif os.geteuid() == 0 and Path("/run").is_dir():
        folder = Path("/run/rlhf-canary/head-uids")
    else:
        folder = Path(tempfile.gettempdir()) / f"rlhf-canary-head-uids-{os.geteuid()}"
    with contextlib.suppress(FileExistsError):
        folder.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
        folder.mkdir(mode=0o700)
    info = folder.lstat()
    if (
        stat.S_ISLNK(info.st_mode)
        or not stat.S_ISDIR(info.st_mode)
        or info.st_uid != os.geteuid()
        or (info.st_mode & 0o022)
    ):
        raise UsageError(
            f"the head side's uid locks cannot go in {folder}: it is a link, not a folder, another user's, or writable"
            " by others",
            fix=f"remove it, or set {LOCK_DIR_ENV} to a folder only this user can write",
        )
    return folder


def _claim(uid: int) -> bool:
    """Take `uid`'s lock without waiting and keep it; False when another process holds it (or the file is not
    ours to open)."""
    try:  # never through a link, were one there
        fd = os.open(lock_path(uid), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return False
    _claimed[uid] = fd
    return True


def _uids_in_use() -> set[int]:
    return {int(uid) for _, fields in process_statuses() for uid in fields.get("Uid", "").split()}


def process_statuses() -> Iterator[tuple[int, dict[str, str]]]:
    """(pid, /proc/PID/status as name -> value) for each process that can be read; one that ends meanwhile is left
    out."""
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            lines = status.read_text().splitlines()
        except OSError:
            continue
        yield int(status.parent.name), dict(line.split(":", 1) for line in lines if ":" in line)
