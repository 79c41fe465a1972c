"""Finding and reading the runs a comparison is judged against: the current run and its baselines.

Baselines come as files (several: newest first, as the user lists them) or directories (every *.json below,
newest first by start time), in metrics.json schema 1 or rlhf-canary 0.1's format. A baseline is untrusted
(it may come from a fork's artifact): every failure is a BaselineError naming the file, with a fix. Runs
that cannot serve as a reference (failed, stopped early, the current run itself) are left out with a reason;
a baseline from another canary config is an error, because it means the wrong artifact was passed.
docs/baselines.md is the user's version of this.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

from canary_action.compare.legacy import is_legacy, read_legacy
from canary_action.compare.runs import RunData, from_metrics
from canary_action.errors import BaselineError, MetricsFileError, NoBaselineError
from canary_action.metrics import io
from canary_action.metrics.io import clip_text, load_json, read_metrics

MAX_BASELINES: Final = 20  # enough to measure the between-run spread; older runs describe an older tree
MAX_DIR_FILES: Final = 200  # a directory with more is not a baseline download; read the newest (by mtime)
# What a 0.1 baseline must share with the current run: 0.1 files name no config and fingerprint nothing, so
# a different model or dataset is the sign of a wrong artifact. The batch shape is the comparability check's.
_LEGACY_SAME_KEYS: Final = ("model_name", "dataset_name")
HOW_TO_CREATE: Final = (
    "run the canary on the default branch and keep its metrics.json as the baseline: upload it as the "
    "baseline artifact, or copy it with `canary save-baseline RUN_DIR/metrics.json DEST`"
)
_MAX_SKIPS_LISTED: Final = 5  # skipped files named in a "no baseline found" error; the rest are counted
_UNPARSED: Final = object()  # what _peek returns for a file that is not even JSON


@dataclass(frozen=True)
class BaselineSet:
    runs: list[RunData]
    """Usable baselines, newest first, at most MAX_BASELINES."""
    excluded: list[str]
    """'run-id: why' for each run left out."""
    notes: list[str]
    """What the reader should know: duplicates, skipped files, caps, 0.1 limitations."""


def load_current(path: Path) -> RunData:
    """The run under test: a schema-1 metrics.json. Raises MetricsFileError."""
    try:
        metrics = read_metrics(path)
    except MetricsFileError as error:
        if is_legacy(_peek(path)):
            raise MetricsFileError(
                f"{path} is an rlhf-canary 0.1 metrics.json: the current run must come from this release's "
                "`canary run`",
                fix="run `canary run CONFIG` with this release and compare its metrics.json; 0.1 files are "
                "accepted as baselines only",
            ) from error
        raise
    return from_metrics(metrics, str(path))


def load_baselines(paths: Sequence[Path], current: RunData) -> BaselineSet:
    """Read, order, de-duplicate and filter the baselines for `current`. Raises BaselineError."""
    notes: list[str] = []
    found: list[RunData] = []
    in_folders: set[str] = set()  # the sources of runs found by walking a folder, not named one by one
    for path in paths:
        runs = _from_path(path, notes)
        found.extend(runs)
        in_folders.update(run.source for run in runs if path.is_dir())
    runs = _unique(found, notes)
    kept, excluded = [], []
    for run in runs:
        other = _other_canary(run, current)
        if other is not None and run.source not in in_folders:
            raise other  # a file named on its own: the user meant it, and it is the wrong one
        why = other.reason if other is not None else _exclusion(run, current)
        if why is None:
            kept.append(run)
        else:
            excluded.append(f"{clip_text(run.run_id, 80)}: {why}")
    if not kept:
        _no_history(paths, excluded, notes)
    if len(kept) > MAX_BASELINES:
        notes.append(f"{len(kept)} usable baselines found; the newest {MAX_BASELINES} are used")
        kept = kept[:MAX_BASELINES]
    return BaselineSet(runs=kept, excluded=excluded, notes=notes)


def _from_path(path: Path, notes: list[str]) -> list[RunData]:
    if path.is_dir():
        runs = [run for file in _files_under(path, notes) if (run := _read(file, notes, in_dir=True))]
        return sorted(runs, key=lambda run: (-_epoch(run.started_at), run.source))
    if not path.exists():
        raise BaselineError(
            f"baseline {path} does not exist",
            fix="check the path: pass the metrics.json of a default-branch run, or a directory holding several",
        )
    if not path.is_file():  # a FIFO would block the read forever
        raise BaselineError(f"baseline {path} is not a regular file", fix="pass a metrics.json file or a directory")
    run = _read(path, notes, in_dir=False)
    return [run] if run else []


def _files_under(root: Path, notes: list[str]) -> list[Path]:
    """*.json below root, sorted, skipping hidden entries, links that leave root and unprintable names."""
    top = root.resolve()
    found: list[Path] = []

    def refuse(error: OSError) -> None:
        raise BaselineError(
            f"cannot list baseline directory {root}: {error.strerror or error}", fix="check its permissions"
        )

    # followlinks=False: a link to a directory is not entered, so the walk cannot leave root or loop.
    for folder, dirs, files in os.walk(root, onerror=refuse):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            if name.startswith(".") or not name.endswith(".json"):
                continue
            path = Path(folder) / name
            if not str(path).isprintable():  # a name from an artifact must not forge CI log lines
                notes.append(f"skipped {clip_text(str(path), 200)}: control characters in its name")
            elif path.is_symlink() and not _inside(path, top):
                notes.append(f"skipped {clip_text(str(path), 200)}: a link out of {clip_text(str(root), 200)}")
            elif path.is_file():
                found.append(path)
    if len(found) > MAX_DIR_FILES:
        notes.append(
            f"{len(found)} .json files under {clip_text(str(root), 200)}; "
            f"read the {MAX_DIR_FILES} most recently modified"
        )
        found = sorted(found, key=_mtime, reverse=True)[:MAX_DIR_FILES]
    return found


def _read(path: Path, notes: list[str], *, in_dir: bool) -> RunData | None:
    """One baseline file, either format. In a directory, files that are not metrics files at all (a profiler
    trace, a report) are skipped with a note; a metrics file that is broken is an error wherever it is."""
    shown = clip_text(str(path), 200)
    if in_dir and _size(path) > io.MAX_BYTES:
        notes.append(f"skipped {shown}: larger than {io.MAX_BYTES // 2**20} MiB, not a metrics file")
        return None
    try:
        run, caveats = read_run(path)
    except BaselineError:  # a 0.1 file that does not match 0.1's format: an error wherever it is
        raise
    except MetricsFileError as error:
        data = _peek(path)
        if in_dir and data is not _UNPARSED and not (isinstance(data, dict) and "schema_version" in data):
            notes.append(f"skipped {shown}: not a metrics file")
            return None
        raise _as_baseline_error(error, path) from error
    notes.extend(caveats)
    return run


def read_run(path: Path) -> tuple[RunData, list[str]]:
    """One run as a comparison reads it, in either format, and notes on the figures a 0.1 file lacks.

    Raises MetricsFileError (read_metrics's, for a file that is not 0.1's either), or BaselineError for a 0.1
    file that does not match 0.1's format.
    """
    try:
        return from_metrics(read_metrics(path), str(path)), []
    except MetricsFileError:
        data = _peek(path)  # parsed again only on this failure path, to tell the formats apart
        if is_legacy(data):
            return read_legacy(path, data)
        raise


def _as_baseline_error(error: MetricsFileError, path: Path) -> BaselineError:
    message = error.message
    text = f"baseline {message}" if message.startswith(str(path)) else f"baseline: {message}"
    return BaselineError(text, fix=f"{error.fix}; or leave this baseline out: delete it, or pass another")


def _unique(runs: list[RunData], notes: list[str]) -> list[RunData]:
    first: dict[str, RunData] = {}
    for run in runs:
        kept = first.setdefault(run.run_id, run)
        if kept is not run:
            notes.append(
                f"baseline {clip_text(run.run_id, 80)} was found twice ({clip_text(kept.source, 200)}, "
                f"{clip_text(run.source, 200)}); the first is used"
            )
    return list(first.values())


def _other_canary(run: RunData, current: RunData) -> BaselineError | None:
    """Why `run` is another canary's, or None: raised for a file named alone (the user meant it, and it is the
    wrong one); for a run found in a folder, its `reason` is the note, and the run is left out."""
    if run.format == "v1":
        if run.config_name == current.config_name:
            return None
        other, this = clip_text(run.config_name, 100), clip_text(current.config_name, 100)
        error = BaselineError(
            f"baseline {run.source} is from config '{other}', the current run is '{this}'",
            fix=f"pass the baseline artifact of config '{this}'",
        )
        error.reason = f"another config ('{other}')"
        return error
    # rlhf-canary 0.1: the config name may have changed in the move (it must now be a slug), so not checked.
    differ = [
        f"{key} {clip_text(repr(run.config[key]), 80)} (current run: {clip_text(repr(current.config[key]), 80)})"
        for key in _LEGACY_SAME_KEYS
        if key in run.config and key in current.config and run.config[key] != current.config[key]
    ]
    if not differ:
        return None
    error = BaselineError(
        f"baseline {run.source} (rlhf-canary 0.1) trained another workload: {', '.join(differ)}",
        fix=f"pass the baseline of this canary, or {HOW_TO_CREATE}",
    )
    error.reason = f"an rlhf-canary 0.1 run of another workload ({', '.join(differ)})"
    return error


def _exclusion(run: RunData, current: RunData) -> str | None:
    status = run.status
    if run.run_id == current.run_id:
        return "the current run itself"
    if status.state == "failed":
        what = status.exception_type or status.message or status.reason or "an error"
        where = f" in {status.stage}" if status.stage else ""
        return f"failed run ({clip_text(what, 80)}{where})"
    if status.state == "stopped_early":
        at = f" at step {status.step}" if status.step is not None else ""
        why = f" ({clip_text(status.reason, 40)})" if status.reason else ""
        return f"stopped early{at}{why}: not a full run"
    return None


def _no_history(paths: Sequence[Path], excluded: list[str], notes: list[str]) -> None:
    """Raise the NoBaselineError that says why: every run left out, or every file looked at skipped (and
    why each was, as docs/baselines.md promises), or no .json file at all."""
    where = ", ".join(clip_text(str(p), 200) for p in paths) or "(none given)"
    if excluded:
        raise NoBaselineError(
            f"no usable baseline in {where}: every run was left out ({'; '.join(excluded)})",
            fix=f"pass a completed default-branch run; to make one, {HOW_TO_CREATE}",
        )
    skipped = [note.removeprefix("skipped ") for note in notes if note.startswith("skipped ")]
    if skipped:
        listed = "; ".join(skipped[:_MAX_SKIPS_LISTED])
        if len(skipped) > _MAX_SKIPS_LISTED:
            listed += f"; and {len(skipped) - _MAX_SKIPS_LISTED} more"
        raise NoBaselineError(
            f"no baseline found in {where}: {len(skipped)} .json file{'s' if len(skipped) != 1 else ''} looked "
            f"at, none of them a metrics file (skipped {listed})",
            fix=f"pass the folder or file that holds the baseline's metrics.json; to create one, {HOW_TO_CREATE}",
        )
    if paths:  # files give a run or an error: these are folders
        them = "it" if len(paths) == 1 else "them"
        raise NoBaselineError(
            f"no baseline found in {where}: no .json file below {them} (hidden files and folders are skipped)",
            fix=f"check that the baseline was downloaded there; to create one, {HOW_TO_CREATE}",
        )
    raise NoBaselineError(f"no baseline found in {where}", fix=f"to create one, {HOW_TO_CREATE}")


def _peek(path: Path) -> object:
    try:
        return load_json(path)
    except MetricsFileError:
        return _UNPARSED


def _epoch(started_at: str | None) -> float:
    """Seconds since 1970 for ordering; a time without zone (0.1 wrote local time) is taken as UTC."""
    try:
        moment = datetime.fromisoformat(started_at or "")
    except ValueError:
        return -math.inf  # unknown: sorts oldest
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()


def _inside(path: Path, top: Path) -> bool:
    try:
        return path.resolve().is_relative_to(top)
    except (OSError, RuntimeError):  # a link loop
        return False


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0  # read_metrics reports it


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0
