"""The held-out evaluation around a training: the evaluator started beside it, asked when it has ended.

Every way to execute uses these: a run in this process (single.py) and a lockstep pair (pair.py), whose evaluator
scores both sides with the base side's config. What a training process leaves for the evaluator (its snapshots)
is removed once evaluated: a full fine-tune's weights would otherwise travel with every artifact.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

from canary_action.config.schema import CommonConfig
from canary_action.evaluate.client import Evaluator
from canary_action.evaluate.plan import SNAPSHOT_DIR
from canary_action.metrics import schema as m
from canary_action.metrics.heldout import HeldoutEval


def start_evaluator(
    trusted: CommonConfig,
    subjects: Sequence[tuple[str, CommonConfig, Path, bool]],
    folder: Path,
    *,
    trusted_tree: Path | None,
    python: str | None = None,
    cwd: Path | None = None,
) -> Evaluator | None:
    """The evaluator for these subjects (name, config, run folder, trusted), started now, in `cwd` (where the
    trusted training runs; default here); None when the trusted config turns the evaluation off."""
    if not trusted.heldout.enabled:
        return None
    return Evaluator.start(trusted, subjects, folder, trusted_tree=trusted_tree, python=python, cwd=cwd)


def not_evaluated(config: CommonConfig) -> HeldoutEval | None:
    """What a run records when its config turns the evaluation off (None: it is on)."""
    if config.heldout.enabled:
        return None
    return HeldoutEval(status="skipped", reason="off", message="heldout.enabled is false in the config")


def finish(
    evaluator: Evaluator, runs: Sequence[tuple[str, Path, m.Status | None]], label: str
) -> dict[str, HeldoutEval]:
    """Evaluate once the trainings have ended (`runs`: each subject's name, run folder and how it ended); a run
    that failed, or stopped on a non-finite value, is not evaluated and says why. The snapshots are removed."""
    reasons = {name: _why_not(status) for name, _, status in runs}
    if all(reasons.values()):
        evaluator.cancel()
        found = {}
    else:
        print(f"[{label}] evaluating the trained model on held-out examples", file=sys.stderr, flush=True)
        found = evaluator.finish()
    for _, run_dir, _ in runs:
        shutil.rmtree(run_dir / SNAPSHOT_DIR, ignore_errors=True)  # never follows a link it finds inside
    return {
        name: HeldoutEval(status="skipped", reason="not_trained", message=why) if why else found[name]
        for name, why in reasons.items()
    }


def _why_not(status: m.Status | None) -> str | None:
    if status is None or status.state == "failed":
        return "the run failed before the end of its training: nothing trained to evaluate"
    if status.state == "stopped_early" and status.reason == "non_finite":
        return "the run stopped on a non-finite value: nan_steps / inf_steps judge it"
    return None
