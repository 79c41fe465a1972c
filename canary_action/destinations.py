"""Where the `canary` command writes: an output folder, a report file, a saved baseline. Each path is checked
before anything is written, and each refusal is a UsageError naming the path: a link to nowhere, a folder
where a file is wanted, a baseline that already exists (never replaced), a run id that is not a file name.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Final

from canary_action.errors import UsageError
from canary_action.metrics.io import clip_text

#: A run id that can name a file inside DEST: what `canary run` makes (config name, kind, time). Anything else
#: (`../x`, `/etc/x`, a name with a slash) would put the baseline elsewhere.
_PLAIN_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")


def output_folder(path: Path, *, flag: str) -> Path:
    """A folder to write runs into: created if missing; refused when it is a link to nowhere or not a folder."""
    _refuse_dangling(path, flag=flag)
    if path.exists() and not path.is_dir():
        raise UsageError(
            f"{flag} {path} is not a folder", fix=f"pass a folder to {flag}, or a path that does not exist"
        )
    _make_folder(path, flag=flag)
    return path


def write_output(path: Path, text: str, *, flag: str, example: str = "report.md") -> None:
    """Write a report (or the file named like `example`) to `path`, its folder created. A link to an existing
    file is written through, as `>` does."""
    _refuse_dangling(path, flag=flag)
    if path.is_dir():
        raise UsageError(f"{flag} {path} is a folder", fix=f"pass a file path to {flag}, e.g. {path / example}")
    _make_folder(path.parent, flag=flag)
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as e:
        raise UsageError(f"cannot write {path}: {e.strerror or e}", fix=f"pass a writable path to {flag}") from e


def baseline_target(dest: str, run_id: str, *, metrics: Path) -> Path:
    """Where `canary save-baseline METRICS DEST` writes. DEST is a folder when it exists as one, ends in `/` or
    has no suffix (created: `canary compare` reads the .json files of a folder, and a file named `newbase` would
    be skipped there): the file is DEST/<run_id>.json. Otherwise DEST is the file. An existing file is never
    replaced."""
    path = Path(dest)
    if dest.endswith(("/", os.sep)) or path.is_dir() or (not path.suffix and not path.exists()):
        if not _PLAIN_NAME.fullmatch(run_id):
            raise UsageError(
                f"{metrics}: its run_id {clip_text(run_id, 80)!r} is not a plain file name, so it cannot name "
                f"the baseline in {dest}",
                fix=f"name the file yourself: canary save-baseline {metrics} {path / 'baseline.json'}",
            )
        target = path / f"{run_id}.json"
    else:
        target = path
    _refuse_dangling(target, flag="DEST")
    if target.exists():
        raise UsageError(
            f"{target} exists: save-baseline never replaces a file",
            fix="remove it first if it is to be replaced, or pass another DEST",
        )
    _refuse_dangling(target.parent, flag="DEST")
    _make_folder(target.parent, flag="DEST")
    return target


def _refuse_dangling(path: Path, *, flag: str) -> None:
    """A link to nowhere: writing would create its target wherever it points, or fail half-way."""
    if path.is_symlink() and not path.exists():
        raise UsageError(
            f"{flag} {path} is a link to {path.readlink()}, which does not exist",
            fix=f"remove the link or create what it points to, or pass another {flag}",
        )


def _make_folder(path: Path, *, flag: str) -> None:
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:  # a file where a folder should be, on the way there; a read-only place
        raise UsageError(
            f"cannot create the folder {path}: {e.strerror or e}", fix=f"pass a writable path to {flag}"
        ) from e
