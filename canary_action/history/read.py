"""Reading a history file as untrusted data: each line on its own, the bad ones left out with a note.

A note never quotes what a line holds (its text could be anything): it names the line, the field and what was
wrong with it.
"""

from __future__ import annotations

import json
import re
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from pydantic import TypeAdapter, ValidationError

from canary_action.errors import HistoryError
from canary_action.history.record import (
    HISTORY_SCHEMA_VERSION,
    MAX_FILE_BYTES,
    MAX_LINE_BYTES,
    Entry,
    HistoryLine,
    MonthSummary,
)

_LINE: Final = TypeAdapter[Entry | MonthSummary](HistoryLine)
#: Notes shown before the rest are counted: a file of 10,000 bad lines says so in a few lines.
MAX_NOTES: Final = 20
_FIELD: Final = re.compile(r"[a-z_]{1,40}")
#: How a note ends for a line that is not drawn but is written back (store.py says no "dropped" of it).
KEPT: Final = ": kept as it is, not drawn"
_FIX: Final = "rebuild it from the action's history branch or from downloaded artifacts (docs/history.md)"


@dataclass
class History:
    repository: str | None
    entries: list[Entry] = field(default_factory=list)
    """Every valid entry, oldest first."""
    months: list[MonthSummary] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    left_out: int = 0
    """Lines left out (notes beyond MAX_NOTES are counted here, not said)."""
    newer: list[bytes] = field(default_factory=list)
    """Lines of a newer schema_version: not drawn, but written back as they are (store.py), never dropped."""

    def configs(self) -> list[str]:
        return sorted({e.config for e in self.entries} | {m.config for m in self.months})

    def of(self, config: str) -> tuple[list[MonthSummary], list[Entry]]:
        return [m for m in self.months if m.config == config], [e for e in self.entries if e.config == config]

    def refuse(self, why: str) -> None:
        self.left_out += 1
        if len(self.notes) < MAX_NOTES:
            self.notes.append(why)

    def summary_notes(self) -> list[str]:
        hidden = self.left_out - min(self.left_out, MAX_NOTES)
        return self.notes + ([f"... and {hidden} more lines left out"] if hidden else [])


def read_history(path: Path, *, repository: str | None = None) -> History:
    """The valid lines of `path` (a link is refused: a history read from a checkout of a branch anyone can push to
    must not read a host file). `repository`: the only one whose lines are taken (default: the one every line
    names; HistoryError when they name several)."""
    return parse_checked(read_history_bytes(path), repository=repository, source=str(path))


def read_history_bytes(path: Path) -> bytes:
    try:
        info = path.lstat()
    except FileNotFoundError:
        raise HistoryError(f"{path}: no such file", fix=f"pass the history file; {_FIX}") from None
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISREG(info.st_mode):
        raise HistoryError(f"{path}: a link or not a regular file: refused", fix="pass the file itself")
    if info.st_size > MAX_FILE_BYTES:
        raise HistoryError(
            f"{path}: {info.st_size:,} bytes, over the {MAX_FILE_BYTES:,} a history may hold",
            fix=f"the action keeps its history under this cap (docs/history.md); {_FIX}",
        )
    return path.read_bytes()


def parse_checked(data: bytes, *, repository: str | None, source: str) -> History:
    """parse_history, refusing a history over MAX_FILE_BYTES or one of which no line is valid (HistoryError)."""
    if len(data) > MAX_FILE_BYTES:
        raise HistoryError(f"{source}: {len(data):,} bytes, over the {MAX_FILE_BYTES:,} a history may hold", fix=_FIX)
    history = parse_history(data.split(b"\n"), repository=repository, source=source)
    if history.left_out and not history.entries and not history.months and not history.newer:
        raise HistoryError(
            f"{source}: no line of it is a history line this version reads ({history.summary_notes()[0]})",
            fix=f"check that it is a history.jsonl (docs/history.md); {_FIX}",
        )
    return history


def parse_history(lines: Iterable[bytes], *, repository: str | None, source: str) -> History:
    parsed: list[tuple[int, Entry | MonthSummary]] = []
    history = History(repository)
    for number, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        line = _line(raw, number, history)
        if line is not None:
            parsed.append((number, line))
    history.repository = repository or _one_repository(parsed, source)
    seen: set[tuple[str, str, str, int | None]] = set()
    for number, line in parsed:
        if line.repository != history.repository:
            history.refuse(f"line {number}: names the repository {line.repository}, not {history.repository}")
            continue
        key = (line.config, line.month, "", None) if isinstance(line, MonthSummary) else _entry_key(line)
        if key in seen:
            history.refuse(f"line {number}: the same {line.kind} as an earlier line ({line.config}): the first kept")
            continue
        seen.add(key)
        (history.months if isinstance(line, MonthSummary) else history.entries).append(line)  # type: ignore[arg-type]
    history.entries.sort(key=lambda e: (e.date, e.commit))
    history.months.sort(key=lambda m: m.month)
    return history


def _entry_key(entry: Entry) -> tuple[str, str, str, int | None]:
    """One entry per workflow run (a re-run attempt replaces it: store.py); without a run id, per commit and date."""
    return (entry.config, entry.commit, "" if entry.run_id else entry.date, entry.run_id)


def _line(raw: bytes, number: int, history: History) -> Entry | MonthSummary | None:
    if len(raw) > MAX_LINE_BYTES:
        history.refuse(f"line {number}: {len(raw):,} bytes, over the {MAX_LINE_BYTES:,} a line may hold")
        return None
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):  # UnicodeDecodeError and a number of 10,000 digits are ValueErrors
        history.refuse(f"line {number}: not JSON")
        return None
    if isinstance(data, dict) and _newer(data.get("schema_version")):
        history.newer.append(raw)
        history.refuse(f"line {number}: written by a newer rlhf-canary (schema_version above "
                       f"{HISTORY_SCHEMA_VERSION}){KEPT}")  # fmt: skip
        return None
    try:
        return _LINE.validate_python(data)
    except ValidationError as error:
        history.refuse(f"line {number}: {_said(error)}")
        return None


def _newer(version: object) -> bool:
    return type(version) is int and HISTORY_SCHEMA_VERSION < version < 1000


def _said(error: ValidationError) -> str:
    """The first problem of a line, named by its field and what was wrong, never by what the line holds: a key the
    record does not have, or a `kind` it does not know, is said without its text (it could be anything, escape
    sequences included)."""
    first = error.errors(include_input=False, include_url=False)[0]
    loc = first["loc"][1:] if first["loc"][:1] in (("entry",), ("month",)) else first["loc"]  # the kind's tag
    parts = [str(p) if isinstance(p, int) or _FIELD.fullmatch(str(p)) else "?" for p in loc]
    kind = first["type"]
    if kind == "extra_forbidden":
        said = "a key this version does not know"
    elif kind.startswith("union_tag") or kind == "model_type":
        parts, said = ["kind"], "not entry or month"
    else:
        said = first["msg"]  # pydantic's messages name the limit or the pattern, not the input (include_input off)
    more = f" (and {error.error_count() - 1} more)" if error.error_count() > 1 else ""
    return f"{'.'.join(parts) or 'the line'}: {said}{more}"


def _one_repository(parsed: list[tuple[int, Entry | MonthSummary]], source: str) -> str | None:
    named = sorted({line.repository for _, line in parsed})
    if len(named) > 1:
        shown = ", ".join(named[:5]) + (f" and {len(named) - 5} more" if len(named) > 5 else "")
        raise HistoryError(
            f"{source}: its lines name {len(named)} repositories ({shown})",
            fix="pass --repository OWNER/NAME: the lines of any other are left out",
        )
    return named[0] if named else None
