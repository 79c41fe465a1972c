"""Writing the history: one entry appended, the cap kept by rolling the oldest months into one line each.

Only the trusted job writes it (docs/history.md): the action's history step on a push or a schedule of the default
branch, never a pull request's job. The file is rewritten whole (it is small) through a temporary file and a rename,
so that a crash leaves the old file or the new one, never half of either.
"""

from __future__ import annotations

import os
import statistics
import tempfile
from collections.abc import Sequence
from pathlib import Path

from canary_action.errors import HistoryError
from canary_action.history.read import KEPT, History, parse_checked, read_history_bytes
from canary_action.history.record import (
    KEEP_ENTRIES,
    MAX_FILE_BYTES,
    MAX_LINE_BYTES,
    Entry,
    Figures,
    MonthSummary,
    PullRequest,
)


def append_entry(path: Path, entry: Entry, *, keep: int = KEEP_ENTRIES) -> list[str]:
    """Add `entry` to the history at `path` (created when missing) and write it; what was said on the way (see
    append_lines)."""
    notes: list[str] = []
    before = read_history_bytes(path) if path.exists() or path.is_symlink() else None
    write_bytes(path, append_lines(before, entry, notes, keep=keep, source=str(path)))
    return notes


def append_lines(
    content: bytes | None, entry: Entry, notes: list[str], *, keep: int = KEEP_ENTRIES, source: str = "the history"
) -> bytes:
    """The history `content` (None: none yet) with `entry` added, capped; `notes` gets what was said on the way:
    lines of the old content left out (invalid, another repository's), an entry replaced (a re-run of the same
    workflow run), months rolled up. HistoryError when no line of `content` is valid: a file of junk is not
    silently replaced."""
    history = History(entry.repository)
    if content is not None:
        history = parse_checked(content, repository=entry.repository, source=source)
    notes += [note if note.endswith(KEPT) else f"{note}: dropped from the file" for note in history.summary_notes()]
    replaced = [
        e for e in history.entries
        if e.config == entry.config and e.run_id is not None and e.run_id == entry.run_id
    ]  # fmt: skip
    if replaced:
        notes.append(f"replaced the entry of workflow run {entry.run_id} (a re-run)")
    entries = [e for e in history.entries if e not in replaced] + [entry]
    entries.sort(key=lambda e: (e.date, e.commit))
    months, entries, rolled = roll_up(history.months, entries, config=entry.config, keep=keep)
    notes += [f"{entry.config}: rolled {m} into one line (over {keep} entries)" for m in rolled]
    data = serialize([*months, *entries]) + b"".join(line.rstrip(b"\n") + b"\n" for line in history.newer)
    _check_caps(data, source, keep)
    return data


def _check_caps(data: bytes, source: str, keep: int) -> None:
    """What the reader refuses is never written: a line or a file over its cap is a HistoryError, the file left as
    it was."""
    longest = max((len(line) for line in data.split(b"\n")), default=0)
    if len(data) > MAX_FILE_BYTES or longest > MAX_LINE_BYTES:
        raise HistoryError(
            f"{source}: with this run the history would be {len(data):,} bytes (its longest line {longest:,}), over "
            f"the {MAX_FILE_BYTES:,} a history or the {MAX_LINE_BYTES:,} a line may hold: nothing was written",
            fix=f"keep fewer entries per config (--keep, now {keep}), or start a new history branch",
        )


def roll_up(
    months: list[MonthSummary], entries: list[Entry], *, config: str, keep: int
) -> tuple[list[MonthSummary], list[Entry], list[str]]:
    """While `config` has more than `keep` entries, its oldest month of entries becomes one MonthSummary (merged
    into the month's line when one exists). The newest month is never rolled: the cap is then exceeded, not the
    recent history lost."""
    rolled: list[str] = []
    while True:
        own = [e for e in entries if e.config == config]
        if len(own) <= keep or len({e.date[:7] for e in own}) < 2:
            return months, entries, rolled
        month = own[0].date[:7]
        batch = [e for e in own if e.date[:7] == month]
        earlier = next((m for m in months if m.config == config and m.month == month), None)
        months = [m for m in months if m is not earlier] + [summarize_month(batch, earlier)]
        months.sort(key=lambda m: (m.month, m.config))
        entries = [e for e in entries if e not in batch]
        rolled.append(month)


def summarize_month(batch: Sequence[Entry], earlier: MonthSummary | None = None) -> MonthSummary:
    """The month's medians (a line rolled before counts as its median, weighted by its runs), its regressions and
    its pull requests' effects (the cost ledger keeps them)."""
    first = batch[0]
    figures = {}
    for name in Figures.model_fields:
        values = [v for e in batch if (v := getattr(e.figures, name)) is not None]
        old = getattr(earlier.figures, name) if earlier is not None else None
        if old is not None:
            values += [old] * earlier.num_runs  # type: ignore[union-attr]  # old is set only with earlier
        figures[name] = statistics.median(values) if values else None
    pull_requests: list[PullRequest] = [*(earlier.pull_requests if earlier else [])]
    pull_requests += [e.pull_request for e in batch if e.pull_request is not None]
    return MonthSummary(
        repository=first.repository,
        config=first.config,
        month=first.date[:7],
        num_runs=len(batch) + (earlier.num_runs if earlier else 0),
        num_regressions=sum(e.verdict == "regression" for e in batch) + (earlier.num_regressions if earlier else 0),
        last_commit=batch[-1].commit,
        figures=Figures(**figures),
        pull_requests=pull_requests[-500:],
    )


def serialize(lines: Sequence[Entry | MonthSummary]) -> bytes:
    return "".join(line.model_dump_json(exclude_none=True) + "\n" for line in lines).encode()


def write_history(path: Path, lines: Sequence[Entry | MonthSummary]) -> None:
    write_bytes(path, serialize(lines))


def write_bytes(path: Path, data: bytes) -> None:
    """Written through a temporary file in the same folder and renamed over `path`: the old file or the new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        Path(temporary).replace(path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
