"""Reading a file that a user or a pull request named: a regular file only, and at most `limit` bytes.

A path can be a FIFO (opening it waits for a writer forever), a link to /dev/zero (reading it never ends) or
a directory, and a regular file can be far larger than anything the canary reads. Each is refused before it is
read: stat first, so that a device is never even opened; fstat after opening (non-blocking), so that a path
swapped for a FIFO in between cannot hang; and the read stops at `limit` + 1 bytes whatever stat said
(/proc files report size 0, and a file may grow).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


class FileRefusedError(Exception):
    """The path is not a regular file, or is larger than the limit. The message continues the path's name:
    "is a named pipe (FIFO), not a regular file"."""


def read_regular_file(path: Path, *, limit: int) -> bytes:
    """The file's bytes. Raises FileRefusedError, or OSError (FileNotFoundError, PermissionError...)."""
    _check(path, path.stat(), limit)
    # O_NONBLOCK: were the path swapped for a FIFO since the stat, opening it must not wait for a writer.
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        _check(path, os.fstat(fd), limit)
        with open(fd, "rb", closefd=False) as file:
            data = file.read(limit + 1)
    finally:
        os.close(fd)
    if len(data) > limit:
        raise FileRefusedError(f"is larger than {size_text(limit)}")
    return data


def size_text(limit: int) -> str:
    """1048576 -> '1 MiB', 65536 -> '64 KiB'."""
    for unit, size in (("MiB", 2**20), ("KiB", 2**10)):
        if limit % size == 0:
            return f"{limit // size} {unit}"
    return f"{limit:,} bytes"


def _check(path: Path, info: os.stat_result, limit: int) -> None:
    if not stat.S_ISREG(info.st_mode):
        kind = next((name for test, name in _KINDS if test(info.st_mode)), "a special file")
        link = f" (a link to {os.path.realpath(path)})" if path.is_symlink() else ""
        raise FileRefusedError(f"is {kind}{link}, not a regular file")
    if info.st_size > limit:
        raise FileRefusedError(f"is larger than {size_text(limit)} ({info.st_size:,} bytes)")
