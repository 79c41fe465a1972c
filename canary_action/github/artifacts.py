"""Unpacking a downloaded artifact (a zip) that a pull request may have produced: untrusted bytes.

Refused, each with a BaselineError naming the entry: absolute paths and `..` (writing outside the folder),
symbolic links (reading or writing elsewhere later), encrypted entries, more files than MAX_FILES, and more
bytes than the caps — counted while inflating, not from the sizes the zip declares, which a zip bomb lies
about. Nothing is left half-extracted: a refusal removes what was written.
"""

from __future__ import annotations

import shutil
import stat
import zipfile
from pathlib import Path, PurePosixPath
from typing import IO, Final

from canary_action.errors import BaselineError
from canary_action.metrics.io import clip_text

MAX_FILES: Final = 1000
MAX_FILE_BYTES: Final = 64 * 2**20  # a metrics.json is capped at this size anyway
MAX_TOTAL_BYTES: Final = 256 * 2**20
_CHUNK: Final = 2**20
_FIX: Final = "the artifact is not one the canary wrote: check which job uploaded it; it was not used"


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
        with zipfile.ZipFile(archive) as zf:
            return _extract(zf, dest, max_files, max_file_bytes, max_total_bytes)
    except zipfile.BadZipFile as e:
        _clear(dest)
        raise BaselineError(f"the artifact is not a valid zip: {e}", fix=_FIX) from e
    except BaselineError:
        _clear(dest)
        raise


def _extract(zf: zipfile.ZipFile, dest: Path, max_files: int, max_file_bytes: int, max_total_bytes: int) -> list[Path]:
    entries = [info for info in zf.infolist() if not info.is_dir()]
    if len(entries) > max_files:
        raise BaselineError(f"the artifact holds {len(entries)} files, more than {max_files}", fix=_FIX)
    written: list[Path] = []
    total = 0
    for info in entries:
        target = dest.joinpath(*_safe_parts(info.filename))
        if stat.S_ISLNK(info.external_attr >> 16):
            raise BaselineError(f"the artifact entry {_name(info)} is a symbolic link", fix=_FIX)
        if info.flag_bits & 0x1:
            raise BaselineError(f"the artifact entry {_name(info)} is encrypted", fix=_FIX)
        if target.exists():
            raise BaselineError(f"the artifact names {_name(info)} twice", fix=_FIX)
        target.parent.mkdir(parents=True, exist_ok=True)
        size = 0
        with zf.open(info) as source, target.open("wb") as out:
            while chunk := source.read(_CHUNK):
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


def _safe_parts(name: str) -> tuple[str, ...]:
    """The path's parts, refusing anything that could land outside the destination."""
    path = PurePosixPath(name.replace("\\", "/"))
    parts = path.parts
    if path.is_absolute() or not parts or any(p in ("..", "") for p in parts) or ":" in parts[0]:
        raise BaselineError(f"the artifact entry {clip_text(name, 120)!r} points outside its folder", fix=_FIX)
    return parts


def _name(info: zipfile.ZipInfo) -> str:
    return repr(clip_text(info.filename, 120))


def _clear(dest: Path) -> None:
    for child in dest.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()
