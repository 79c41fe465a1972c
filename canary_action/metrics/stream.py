"""The per-step stream: each run's rows appended to a JSON-lines file as they are measured, so that a process
killed mid-run (SIGKILL, the kernel's OOM killer, a native crash in a factory) still leaves what it measured.

Single-process runs write `<run_dir>/steps.jsonl` beside a provisional metrics.json written at the start (status
failed, reason `killed`), which the run's end replaces; the process that started the run rebuilds a killed
run's metrics.json from the two (`rebuild_killed`). The ranks of a multi-process run stream the same way into
`<run_dir>/ranks/` (train/ranks.py), merged by their launcher, which writes the provisional file before it
launches them: a launcher killed before merging is rebuilt from the ranks' streams. No torch here: the
rebuilding parent is light.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Final

from canary_action.errors import MetricsFileError
from canary_action.metrics import schema as m
from canary_action.metrics.io import read_metrics, write_metrics
from canary_action.metrics.merge import RankRun, merge_series
from canary_action.metrics.summarize import stability_of, summarize

STEPS_FILE: Final = "steps.jsonl"
RANKS_DIR: Final = "ranks"
MAX_STEPS_BYTES: Final = 64 * 2**20  # as metrics.json's own cap
KILLED: Final = "killed"
KILLED_MESSAGE: Final = (
    "the canary process ended without finishing its metrics.json (killed: a signal such as SIGKILL, the "
    "out-of-memory killer, or a native crash); the steps it measured were streamed to steps.jsonl"
)

Series = dict[str, list[float | None]]


def rank_steps_path(directory: Path, rank: int) -> Path:
    return directory / f"rank{rank}.steps.jsonl"


def append_rows(path: Path, rows: list[dict[str, float | None]]) -> None:
    """Append finished rows, one JSON line each; a line is whole before the next one starts."""
    if not rows:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as f:
        f.write("".join(json.dumps(row) + "\n" for row in rows))
        f.flush()


def read_rows(path: Path) -> Series:
    """A steps file back as columns, up to its first line that is not a row of numbers: a torn last line (the
    process died while writing it), or anything else a process of the pull request's code wrote there."""
    rows: list[dict[str, float | None]] = []
    if path.is_file() and not path.is_symlink():
        with path.open("rb") as f:
            text = f.read(MAX_STEPS_BYTES).decode("utf-8", errors="replace")
        for line in text.splitlines():
            row = _row(line)
            if row is None:
                break
            rows.append(row)
    names: dict[str, None] = {}
    for row in rows:
        names.update(dict.fromkeys(row))
    return {name: [row.get(name) for row in rows] for name in names}


def _row(line: str) -> dict[str, float | None] | None:
    try:
        row = json.loads(line)
    except (ValueError, RecursionError):
        return None
    if not isinstance(row, dict) or not all(
        isinstance(k, str) and (v is None or (isinstance(v, int | float) and not isinstance(v, bool)))
        for k, v in row.items()
    ):
        return None
    return {k: None if v is None else float(v) for k, v in row.items()}


def rebuild_killed(run_dir: Path) -> m.Metrics | None:
    """A killed run's metrics.json rebuilt from its provisional one and its streamed steps (written, and
    returned); None when the run finished its metrics.json itself, never got to write the provisional one, or
    left files that cannot be rebuilt from (they are then compared as they are: a failed run)."""
    try:
        return _rebuild(run_dir)
    except (MetricsFileError, ValueError, TypeError, KeyError, RecursionError, OSError):
        return None


def _rebuild(run_dir: Path) -> m.Metrics | None:
    path = run_dir / "metrics.json"
    if not path.is_file() or run_dir.is_symlink():
        return None
    provisional = read_metrics(path)
    if provisional.status.reason != KILLED or provisional.series:
        return None
    config = provisional.config
    world = config.get("num_processes", 1)
    if isinstance(world, int) and world > 1:  # the ranks streamed, the launcher was killed before merging them
        ranks = [RankRun(k, read_rows(rank_steps_path(run_dir / RANKS_DIR, k)), None) for k in range(world)]
        series = merge_series(ranks, world)
    else:
        series = read_rows(run_dir / STEPS_FILE)
    profiler = config.get("profiler") or {}
    window = (
        range(int(profiler["start_step"]), int(profiler["start_step"]) + int(profiler["num_steps"]))
        if profiler.get("enabled")
        else None
    )
    steps = len(next(iter(series.values()), []))
    metrics = provisional.model_copy(
        update={
            "series": series,
            "summary": summarize(series, warmup=config.get("metrics_warmup_steps", "auto"), profiler_steps=window)
            if series
            else None,
            "stability": stability_of(series, []),
            "status": m.Status(
                state="failed",
                reason=KILLED,
                step=steps + 1,
                stage="train" if steps else provisional.status.stage,
                message=KILLED_MESSAGE,
            ),
            "notices": [*provisional.notices, f"rebuilt from {STEPS_FILE} after the process was killed"],
        }
    )
    write_metrics(metrics, path)
    return metrics
