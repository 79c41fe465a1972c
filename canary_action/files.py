"""Reading a file that a user or a pull request named: a regular file only, and at most `limit` bytes; and reading
what another user's process wrote without following any link it may have left (`opened_inside`).

A path can be a FIFO (opening it waits for a writer forever), a link to /dev/zero (reading it never ends) or
a directory, and a regular file can be far larger than anything the canary reads. Each is refused before it is
read: stat first, so that a device is never even opened; fstat after opening (non-blocking), so that a path
swapped for a FIFO in between cannot hang; and the read stops at `limit` + 1 bytes whatever stat said
(/proc files report size 0, and a file may grow).

What a pull request's side can write (its run folder, anything under an output folder it trained into) is hostile
to the root side that reads it: a link there may point at a host file, a FIFO may hang a reader, a hard link may
make a host file look like the side's own. The coordinator reads such files with `read_inside`/`tail_inside`
(nothing followed), writes into such folders with `write_new_inside` (nothing followed, nothing overwritten in
place), and, once no process of the side is left, clears such a folder of everything that is not a plain folder or
a file of one link (`remove_unsafe`) before anything reads it or uploads it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import subprocess
from collections.abc import Iterator, Sequence
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


@contextlib.contextmanager
def opened_inside(folder: Path, parts: Sequence[str], *, limit: int) -> Iterator[int]:
    """A read-only descriptor of the regular file folder/parts[0]/.../parts[-1], where every part is opened without
    following a link (O_NOFOLLOW): for files another user's process wrote, which may have left a link to anything
    in their place. `folder` itself is trusted (a folder this process made). Raises FileRefusedError or OSError.
    """
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
    opened = [os.open(folder, flags | os.O_DIRECTORY)]
    try:
        for name in parts[:-1]:
            opened.append(os.open(_one_name(name), flags | os.O_DIRECTORY, dir_fd=opened[-1]))
        fd = os.open(_one_name(parts[-1]), flags | getattr(os, "O_NONBLOCK", 0), dir_fd=opened[-1])
        opened.append(fd)
        _check(folder.joinpath(*parts), os.fstat(fd), limit)
        yield fd
    finally:
        for fd in reversed(opened):
            os.close(fd)


def read_inside(folder: Path, parts: Sequence[str], *, limit: int) -> bytes:
    """The bytes of folder/parts..., read as `opened_inside` opens it, at most `limit`."""
    with opened_inside(folder, parts, limit=limit) as fd, open(fd, "rb", closefd=False) as file:
        data = file.read(limit + 1)
    if len(data) > limit:
        raise FileRefusedError(f"is larger than {size_text(limit)}")
    return data


def tail_inside(folder: Path, parts: Sequence[str], *, size: int) -> bytes:
    """The last `size` bytes (at most) of the regular file folder/parts..., opened as `opened_inside` does: a log
    another user's process wrote, read without following a link and without reading all of it."""
    with opened_inside(folder, parts, limit=2**62) as fd:
        length = os.fstat(fd).st_size
        os.lseek(fd, max(0, length - size), os.SEEK_SET)
        with open(fd, "rb", closefd=False) as file:
            return file.read(size)


def write_new_inside(folder: Path, name: str, data: bytes, *, mode: int = 0o644) -> None:
    """Write `data` as folder/name, a new file: whatever was there (a link planted by another user's process, a
    file of its own) is unlinked, not followed, and the file is created exclusively (O_EXCL | O_NOFOLLOW), so a
    link planted in between makes this fail (FileExistsError) rather than write through it."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_DIRECTORY
    directory = os.open(folder, flags)
    try:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(_one_name(name), dir_fd=directory)  # removes a link itself, never its target
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=directory)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
    finally:
        os.close(directory)


def remove_unsafe(folder: Path) -> list[str]:
    """Remove, under `folder` (itself never followed), every link, every file that is not a regular file (FIFO,
    socket, device) and every regular file with more than one hard link; "path (kind)" for each removed, relative
    to `folder`. For a folder no other process writes any more: the sweep itself follows nothing, and holds one
    descriptor per level of depth (os.fwalk), not per folder found. It fails closed: a folder it cannot sweep (too
    deep, unreadable, a descriptor limit) is removed whole, and the one entry says so."""
    if folder.is_symlink() or not folder.is_dir():
        return []
    removed: list[str] = []
    try:
        for parent, dirs, files, parent_fd in os.fwalk(folder, follow_symlinks=False):
            prefix = "" if parent == str(folder) else os.path.relpath(parent, folder) + "/"
            for name in [*dirs, *files]:  # a link to a folder is listed among the folders (and never descended)
                kind = _unsafe_kind(os.stat(name, dir_fd=parent_fd, follow_symlinks=False))
                if kind is not None:
                    os.unlink(name, dir_fd=parent_fd)
                    removed.append(f"{prefix}{name} ({kind})")
                    if name in dirs:
                        dirs.remove(name)
    except (OSError, RecursionError) as error:
        _remove_whole(folder)
        why = getattr(error, "strerror", None) or str(error)
        return [f"all of it ({type(error).__name__}: {why}; the folder could not be swept, so it was removed whole)"]
    return sorted(removed)


def _remove_whole(folder: Path) -> None:
    """Remove `folder` without following a link: shutil.rmtree (descriptor-based on Linux), and where a tree too
    deep for this process's descriptors defeats it, rm(1), whose walk keeps a bounded number open. Raises OSError
    when the folder is still there."""
    shutil.rmtree(folder, ignore_errors=True)
    if folder.exists() or folder.is_symlink():
        subprocess.run(["rm", "-rf", "--", str(folder)], check=False, capture_output=True, timeout=600)
    if folder.exists() or folder.is_symlink():
        raise OSError(f"{folder} could not be removed")


def _unsafe_kind(info: os.stat_result) -> str | None:
    if stat.S_ISLNK(info.st_mode):
        return "a link"
    if stat.S_ISDIR(info.st_mode):
        return None
    if not stat.S_ISREG(info.st_mode):
        return next((name for test, name in _KINDS if test(info.st_mode)), "a special file")
    return f"a file of {info.st_nlink} hard links" if info.st_nlink > 1 else None


def folders_inside(folder: Path, parts: Sequence[str]) -> list[str]:
    """The names of the real folders (no link) in folder/parts..., itself reached without following a link; []
    when it does not exist."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_DIRECTORY
    opened = [os.open(folder, flags)]
    try:
        for name in parts:
            try:
                opened.append(os.open(_one_name(name), flags, dir_fd=opened[-1]))
            except (FileNotFoundError, NotADirectoryError):  # absent, a file, or a link (never followed)
                return []
        with os.scandir(opened[-1]) as entries:
            return sorted(e.name for e in entries if e.is_dir(follow_symlinks=False))
    finally:
        for fd in reversed(opened):
            os.close(fd)


def _one_name(name: str) -> str:
    if not name or name in (".", "..") or "/" in name or "\0" in name:
        raise FileRefusedError(f"{name!r} is not a plain file name")
    return name


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
