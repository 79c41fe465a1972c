"""The held-out evaluation in the training process itself, for a model the evaluator cannot rebuild.

A custom trainer_factory may build its own model (its own loading code, its own architecture): the evaluator,
which rebuilds models with the canary's loaders, cannot put saved weights back into it. Then the training process
scores its live model on the same held-out examples, with the same code (evaluate/scorer.py): before the first
step (the starting model), after the steps `heldout.steps` names and at the end — between steps, in no measured
step — and writes the evaluation (`heldout/evaluation.json`), which the evaluator takes when its examples are the
same, saying where it was computed: in a process that holds the team's (or the pull request's) code.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import torch

from canary_action.config.schema import CommonConfig
from canary_action.evaluate.examples import heldout_set
from canary_action.evaluate.plan import OWN_FILE, SNAPSHOT_DIR
from canary_action.evaluate.scorer import Scorer
from canary_action.metrics.heldout import HeldoutEval, HeldoutPoint
from canary_action.train.setup import TrainingSetup

SAID = (
    "in the training process (its model is the trainer_factory's own, which the canary cannot rebuild from saved "
    "weights): the team's and the pull request's code were loaded there"
)


class SideEvaluation:
    def __init__(self, config: CommonConfig, setup: TrainingSetup[Any], model: Any, run_dir: Path) -> None:
        self.model = model
        self.folder = run_dir / SNAPSHOT_DIR
        # The canary's own tokenizer, built anew: not the one the factory was handed, which it may have changed.
        tokenizer = TrainingSetup(config, setup.placement, run_dir, [], []).tokenizer
        self.set = heldout_set(config, tokenizer)
        self.scorer = Scorer(config, tokenizer, self.set, setup.placement.device, setup.load_model)
        self.points: list[HeldoutPoint] = []
        self.seconds = 0.0

    def score(self, step: int) -> None:
        """The live model's point at `step`, leaving the training as it was: its mode and its random streams."""
        began = time.monotonic()
        training = self.model.training
        device = self.scorer.device
        with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
            self.points.append(self.scorer.point(self.model, step, "own"))
        self.model.train(training)
        self.seconds += time.monotonic() - began

    def write(self) -> None:
        for point in self.points[1:-1]:
            point.examples.clear()  # only the start's and the end's are kept, as the evaluator keeps them
        evaluation = HeldoutEval(
            status="evaluated", message=SAID, metric=self.set.metric, dataset=self.set.dataset,
            num_examples=self.set.size, fingerprint=self.set.fingerprint, evaluated_in="side_process",
            points=self.points, wall_s=self.seconds,
        )  # fmt: skip
        self.folder.mkdir(parents=True, exist_ok=True)
        (self.folder / OWN_FILE).write_text(evaluation.model_dump_json(), encoding="utf-8")
