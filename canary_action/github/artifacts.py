"""Unpacking a downloaded artifact (a zip) that a pull request may have produced: untrusted bytes.

Refused, each with a BaselineError naming the entry: absolute paths and `..` (writing outside the folder),
symbolic links (reading or writing elsewhere later), encrypted entries, names no file system takes (a part
over 255 bytes, a whole name over MAX_NAME_BYTES), a name used twice or as a file and as a folder (`a`, then
`a/b`), data that does not inflate, more files than MAX_FILES, and more bytes than the caps — counted while
inflating, not from the sizes the zip declares, which a zip bomb lies about. The names are all checked before
anything is written, and a refusal (or any other failure) removes what was written: nothing is left
half-extracted.
"""

from __future__ import annotations

import contextlib
import lzma
import os
import shutil
import stat
import struct
import zipfile
import zlib
from pathlib import Path, PurePosixPath
from typing import IO, Final

from canary_action.errors import BaselineError
from canary_action.metrics.io import clip_text

MAX_FILES: Final = 1000
CAPTURES: Final = "captures"  # train/capture.py FOLDER (the runner side is not imported here)
MAX_FILE_BYTES: Final = 64 * 2**20  # a metrics.json is capped at this size anyway
MAX_TOTAL_BYTES: Final = 256 * 2**20
MAX_NAME_BYTES: Final = 1024  # a canary's own names are under 100; PATH_MAX (4096) holds this and the folder
_MAX_PART_BYTES: Final = 255  # NAME_MAX of Linux file systems
MAX_DEPTH: Final = 32  # a canary's output is 3 deep; deep names cost the folder check memory as depth squared
_ENTRY_FACTOR: Final = 4  # entries of the end record: files, and the folders zip tools list beside them
_EOCD_SEARCH_BYTES: Final = 22 + 65_535 + 56 + 20  # the end record, its longest comment, the zip64 records
#: The most a central directory entry of an artifact we take can hold: its fixed 46 bytes, a name of MAX_NAME_BYTES
#: and 1 KiB of extra fields and comment (a canary's entries carry ~36 bytes of them).
_DIRECTORY_ENTRY_BYTES: Final = 46 + MAX_NAME_BYTES + 1024
_CHUNK: Final = 2**20
_FIX: Final = "the artifact is not one the canary wrote: check which job uploaded it; it was not used"
#: What reading an entry raises on bad data (bz2's decompressor raises OSError). The zip is a download held in
#: memory (or a local copy of one): a failure to read it is the artifact's.
_INFLATE_ERRORS: Final = (
    zipfile.BadZipFile, zlib.error, lzma.LZMAError, EOFError, NotImplementedError, OSError, ValueError,
    UnicodeDecodeError, struct.error,
)  # fmt: skip
_DIRECTORY_ERRORS: Final = (*_INFLATE_ERRORS, OverflowError)


def extract_artifact(
    archive: Path | IO[bytes],
    dest: Path,
    *,
    max_files: int = MAX_FILES,
    max_file_bytes: int = MAX_FILE_BYTES,
    max_total_bytes: int = MAX_TOTAL_BYTES,
) -> list[Path]:
    """Extract into `dest` (created; must be empty) and return the files written, in archive order."""
    dest.mkdir(parents=True, exist_ok=True)
    if any(dest.iterdir()):
        raise ValueError(f"{dest} is not empty")
    try:
        _check_declared_entries(archive, max_files)
        with _read_directory(archive) as zf:
            return _extract(zf, dest, max_files, max_file_bytes, max_total_bytes)
    except BaseException:
        _clear(dest)
        raise


def _read_directory(archive: Path | IO[bytes]) -> zipfile.ZipFile:
    """The zip's central directory read, or BaselineError: zipfile raises more than BadZipFile on a hostile one
    (NotImplementedError for a version it lacks, UnicodeDecodeError for a name flagged UTF-8 that is not,
    ValueError or struct.error for a shifted directory), and every one of them is the artifact's, never a bug to
    end report mode with before it publishes its failed check."""
    try:
        return zipfile.ZipFile(archive)
    except _DIRECTORY_ERRORS as e:
        raise BaselineError(
            f"the artifact is not a valid zip ({type(e).__name__}: {clip_text(str(e), 120)})", fix=_FIX
        ) from e


def _check_declared_entries(archive: Path | IO[bytes], max_files: int) -> None:
    """Refuse a zip whose end record declares far more entries (folders included) than a canary's output holds, or a
    central directory larger than that many entries can take, before zipfile reads the directory into memory (a
    million entries fit in a small download). zipfile reads exactly the declared directory size and parses every
    entry in it whatever count the record declares: the size is the bound that holds."""
    with archive.open("rb") if isinstance(archive, Path) else contextlib.nullcontext(archive) as f:
        f.seek(0, os.SEEK_END)
        size = f.tell()
        f.seek(max(0, size - _EOCD_SEARCH_BYTES))
        tail = f.read()
        f.seek(0)
    end = tail.rfind(b"PK\x05\x06")
    if end < 0 or end + 12 > len(tail):
        return  # not a zip: zipfile says so
    declared = int.from_bytes(tail[end + 10 : end + 12], "little")
    directory = int.from_bytes(tail[end + 12 : end + 16], "little") if end + 16 <= len(tail) else 0
    zip64 = tail.rfind(b"PK\x06\x06", 0, end)
    if zip64 >= 0 and zip64 + 48 <= len(tail):
        declared = int.from_bytes(tail[zip64 + 32 : zip64 + 40], "little") if declared == 0xFFFF else declared
        directory = int.from_bytes(tail[zip64 + 40 : zip64 + 48], "little") if directory == 0xFFFFFFFF else directory
    if declared > _ENTRY_FACTOR * max_files:
        raise BaselineError(f"the artifact declares {declared:,} entries, more than a canary writes", fix=_FIX)
    if directory > _ENTRY_FACTOR * max_files * _DIRECTORY_ENTRY_BYTES:
        raise BaselineError(
            f"the artifact's list of entries takes {directory:,} bytes, more than {_ENTRY_FACTOR * max_files:,} "
            "entries of a canary's output can",
            fix=_FIX,
        )


def _extract(zf: zipfile.ZipFile, dest: Path, max_files: int, max_file_bytes: int, max_total_bytes: int) -> list[Path]:
    # Not ZipInfo.is_dir(): it indexes the name's last character, and a hostile entry's name may be empty.
    # A run's captured steps (train/capture.py: for `canary replay` by hand) are never read here: skipped, unwritten
    # and uncounted, so that captures a run was allowed to write never make its verdict's artifact too large.
    entries = [info for info in zf.infolist() if not info.filename.endswith("/") and not _captured(info.filename)]
    if len(entries) > max_files:
        raise BaselineError(f"the artifact holds {len(entries)} files, more than {max_files}", fix=_FIX)
    written: list[Path] = []
    total = 0
    for info, parts in _checked(entries):
        target = dest.joinpath(*parts)
        if target.exists():  # a case-insensitive file system makes `A` and `a` one name
            raise BaselineError(f"the artifact names {_name(info)} twice", fix=_FIX)
        target.parent.mkdir(parents=True, exist_ok=True)
        size = 0
        with _open(zf, info) as source, target.open("wb") as out:
            while chunk := _read(source, info):
                size += len(chunk)
                total += len(chunk)
                if size > max_file_bytes or total > max_total_bytes:
                    limit = (
                        f"{max_file_bytes:,} bytes a file" if size > max_file_bytes else f"{max_total_bytes:,} in all"
                    )
                    raise BaselineError(f"the artifact entry {_name(info)} inflates past {limit}", fix=_FIX)
                out.write(chunk)
        written.append(target)
    return written


def _captured(name: str) -> bool:
    return CAPTURES in PurePosixPath(name.replace("\\", "/")).parts[1:-1]


def _checked(entries: list[zipfile.ZipInfo]) -> list[tuple[zipfile.ZipInfo, tuple[str, ...]]]:
    """Each entry with its path parts, every name checked before a byte is written."""
    files: dict[tuple[str, ...], zipfile.ZipInfo] = {}
    for info in entries:
        parts = _safe_parts(info.filename)
        if stat.S_ISLNK(info.external_attr >> 16):
            raise BaselineError(f"the artifact entry {_name(info)} is a symbolic link", fix=_FIX)
        if info.flag_bits & 0x1:
            raise BaselineError(f"the artifact entry {_name(info)} is encrypted", fix=_FIX)
        if parts in files:
            raise BaselineError(f"the artifact names {_name(info)} twice", fix=_FIX)
        if len(parts) > MAX_DEPTH:
            raise BaselineError(f"the artifact entry {_name(info)} is nested over {MAX_DEPTH} folders deep", fix=_FIX)
        files[parts] = info
    folders = {parts[:end] for parts in files for end in range(1, len(parts))}
    for parts, info in files.items():
        if parts in folders:
            raise BaselineError(f"the artifact uses {_name(info)} as a file and as a folder", fix=_FIX)
    return [(info, parts) for parts, info in files.items()]


def _safe_parts(name: str) -> tuple[str, ...]:
    """The path's parts, refusing anything that could land outside the destination or that no file system takes."""
    path = PurePosixPath(name.replace("\\", "/"))
    parts = path.parts
    if path.is_absolute() or not parts or any(p in ("..", "") for p in parts) or ":" in parts[0]:
        raise BaselineError(f"the artifact entry {clip_text(name, 120)!r} points outside its folder", fix=_FIX)
    longest = max(len(os.fsencode(part)) for part in parts)
    if len(os.fsencode(name)) > MAX_NAME_BYTES or longest > _MAX_PART_BYTES:
        raise BaselineError(
            f"the artifact entry {clip_text(name, 120)!r} has a name too long for a file "
            f"(at most {_MAX_PART_BYTES} bytes a part, {MAX_NAME_BYTES:,} in all)",
            fix=_FIX,
        )
    return parts


def _open(zf: zipfile.ZipFile, info: zipfile.ZipInfo) -> IO[bytes]:
    try:
        return zf.open(info)
    except _INFLATE_ERRORS as e:
        raise BaselineError(
            f"the artifact entry {_name(info)} cannot be read: {clip_text(str(e), 120)}", fix=_FIX
        ) from e


def _read(source: IO[bytes], info: zipfile.ZipInfo) -> bytes:
    try:
        return source.read(_CHUNK)
    except _INFLATE_ERRORS as e:
        raise BaselineError(
            f"the artifact entry {_name(info)} does not inflate: {clip_text(str(e), 120)}", fix=_FIX
        ) from e


def _name(info: zipfile.ZipInfo) -> str:
    return repr(clip_text(info.filename, 120))


def _clear(dest: Path) -> None:
    for child in dest.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()
