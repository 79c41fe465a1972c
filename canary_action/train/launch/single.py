"""A canary in this process: CanaryRun, and metrics.json written whatever ends it."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from canary_action.config.load import LoadedConfig
from canary_action.errors import CanaryError, RunInterrupted, TrainingError
from canary_action.evaluate.client import Evaluator
from canary_action.train.launch import heldout
from canary_action.train.launch.outcome import RunOutcome
from canary_action.train.run import CanaryRun, quiet_libraries
from canary_action.train.stages import reset_stage


def run_single(
    loaded: LoadedConfig, run_id: str, run_dir: Path, started: datetime, evaluator: Evaluator | None = None
) -> RunOutcome:
    """Run the canary here; `evaluator` (launch/heldout.py), started with the run, scores what it trained."""
    run = CanaryRun(loaded, run_dir)
    reset_stage()
    quiet_libraries()
    run.provisional(run_id, started)  # what a SIGKILL leaves, with the steps streamed beside it
    config = loaded.config
    run.heldout = heldout.not_evaluated(config)
    try:
        run.execute()
    except BaseException as error:  # everything, Ctrl-C included: the measurements are written first
        if evaluator is not None:
            evaluator.cancel()
        run.fail(error)
        metrics = run.finish(run_id, started)
        if isinstance(error, KeyboardInterrupt):
            raise RunInterrupted(run_dir, error) from error
        if isinstance(error, CanaryError):
            raise
        raise TrainingError(
            f"{type(error).__name__} during {metrics.status.stage}: {error}",
            fix=f"read the traceback in {run_dir / 'error.log'}; what was measured is in {run_dir / 'metrics.json'}",
            metrics_path=run_dir / "metrics.json",
        ) from error
    if evaluator is not None:
        run.heldout = heldout.finish(evaluator, [("run", run_dir, run.status)], config.name)["run"]
    return RunOutcome(run.finish(run_id, started), run_dir / "metrics.json")
