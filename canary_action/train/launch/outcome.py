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


def new_run_dir(config: CommonConfig, output_dir: Path | None) -> tuple[str, Path, datetime]:
    """run_id (config name + start time), its directory under output_dir (created), and the start time."""
    started = datetime.now(UTC)
    run_id = f"{config.name}-{started:%Y%m%dT%H%M%SZ}"
    run_dir = (output_dir or Path(config.output_dir)) / run_id
    run_dir.mkdir(parents=True, exist_ok=True)
    return run_id, run_dir, started
