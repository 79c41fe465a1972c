"""`canary save-baseline`: validate a run's metrics.json as `canary compare` would read it as a baseline, and
store it where destinations.baseline_target says (never replacing a file, never where the run id points).

Both formats compare reads as a baseline are taken: this release's metrics.json, and rlhf-canary 0.1's. A 0.1
file is kept in 0.1's format, its content unchanged (the document read and validated, written out indented),
not converted to this release's schema. A conversion would have to invent what 0.1 never recorded (per-step
series, the config hash, workload fingerprints) and would then pass 0.1's figures off as this release's
measurements, though several mean other things (its tokens/s counted padding, its step time left out the
batch fetch). compare reads a 0.1 file as one (compare/legacy.py maps each figure to what it meant and notes
what is missing), so the stored file keeps its meaning, and a later release that reads 0.1 files better reads
the original.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from canary_action.compare.legacy import is_legacy, read_legacy
from canary_action.destinations import baseline_target
from canary_action.errors import BaselineError, MetricsFileError, UsageError
from canary_action.metrics.io import load_json, metrics_from_json, write_json, write_metrics
from canary_action.metrics.schema import Status

_FAILED_FIX = "a baseline must come from a run that trained; rerun the canary and save that"


@dataclass(frozen=True)
class SavedBaseline:
    target: Path
    legacy: bool
    """True: an rlhf-canary 0.1 file, stored in its own format."""
    stopped_early: str
    """'' for a completed run; else what stopped it ('timeout', 'nan_loss at step 12')."""
    notes: list[str]
    """What compare will say this baseline lacks (0.1 files)."""


def save_baseline(metrics: Path, dest: str) -> SavedBaseline:
    """Validate `metrics` and write it as a baseline at `dest`. Raises MetricsFileError or UsageError, having
    written nothing."""
    data = load_json(metrics)  # read once: what is written is what was validated
    if is_legacy(data):
        return _save_legacy(metrics, data, dest)
    loaded = metrics_from_json(metrics, data)
    _refuse_failed(metrics, loaded.status, f"{loaded.status.exception_type} during {loaded.status.stage}")
    target = baseline_target(dest, loaded.run.run_id, metrics=metrics)
    _write(lambda: write_metrics(loaded, target), target)
    return SavedBaseline(target=target, legacy=False, stopped_early=_stop(loaded.status), notes=[])


def _save_legacy(metrics: Path, data: dict[str, Any], dest: str) -> SavedBaseline:
    try:
        run, caveats = read_legacy(metrics, data)  # exactly compare's validation of a 0.1 baseline
    except BaselineError as error:  # said as of a file to save, not of a baseline in use
        raise MetricsFileError(
            error.message.removeprefix("baseline "),
            fix="a 0.1 file is read as 0.1 wrote it, and this one was edited or truncated (`canary compare` "
            "refuses it as a baseline too): save a run of this release instead",
        ) from error
    _refuse_failed(metrics, run.status, "rlhf-canary 0.1 records no cause")
    target = baseline_target(dest, run.run_id, metrics=metrics)
    _write(lambda: write_json(data, target), target)
    return SavedBaseline(target=target, legacy=True, stopped_early=_stop(run.status), notes=caveats)


def _refuse_failed(metrics: Path, status: Status, cause: str) -> None:
    if status.state == "failed":
        raise UsageError(f"{metrics} is a failed run ({cause})", fix=_FAILED_FIX)


def _stop(status: Status) -> str:
    if status.state != "stopped_early":
        return ""
    return f"{status.reason}" + (f" at step {status.step}" if status.step is not None else "")


def _write(write: Callable[[], None], target: Path) -> None:
    try:
        write()
    except OSError as e:
        raise UsageError(f"cannot write {target}: {e.strerror or e}", fix="pass a DEST in a writable folder") from e
