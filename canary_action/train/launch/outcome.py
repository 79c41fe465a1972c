"""What every way of running a canary hands back, and where its run directory goes."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from canary_action.config.schema import CommonConfig
from canary_action.metrics import schema as m


@dataclass(frozen=True)
class RunOutcome:
    metrics: m.Metrics
    metrics_path: Path


def new_run_dir(config: CommonConfig, output_dir: Path | None, kind: str = "") -> tuple[str, Path, datetime]:
    """run_id (config name, `kind`, start time), its directory under output_dir (created), and the start time.

    Never an existing directory: two runs started in the same second get `-2`, `-3`... (one would otherwise
    replace the other's files).
    """
    started = datetime.now(UTC)
    stem = f"{config.name}{'-' + kind if kind else ''}-{started:%Y%m%dT%H%M%SZ}"
    parent = output_dir or Path(config.output_dir)
    parent.mkdir(parents=True, exist_ok=True)
    for number in range(1, 10_000):
        run_id = stem if number == 1 else f"{stem}-{number}"
        try:
            (parent / run_id).mkdir()
        except FileExistsError:
            continue
        return run_id, parent / run_id, started
    raise FileExistsError(f"{parent}: 9999 runs named {stem} already")
