"""The held-out evaluation's record: how a trained model did on examples its training never saw, by the canary's
own metric (canary_action/evaluate/). In metrics.json (`heldout`) for a run on its own; in pair.json for the two
sides of a lockstep pair, which the coordinator's evaluator scored on the same examples.

Each point is the model after `step` optimizer steps (0: the model training started from). The per-example values
of the start and the end are kept, so that two models evaluated on the same examples (the same `fingerprint`) are
compared example by example: the paired difference of the same held-out set is far more precise than the
difference of two means.
"""

from __future__ import annotations

import math
import statistics
from typing import Annotated, Final, Literal

from pydantic import Field

from canary_action.metrics.records import FAIL_FAST, Record

HeldoutMetric = Literal["next_token", "preference", "reward"]
SkipReason = Literal["off", "not_trained", "no_snapshot", "not_comparable", "stopped", "own_process"]
#: Per metric: what its figure is, in which unit, and which direction is better.
METRICS: Final[dict[HeldoutMetric, tuple[str, str, Literal["lower", "higher"]]]] = {
    "next_token": ("held-out loss", "nats/token", "lower"),
    "preference": ("held-out preference margin", "log-ratio", "higher"),
    "reward": ("held-out reward", "reward", "higher"),
}
#: At most this many per-example values are kept per point (num_examples is at most 4,096).
MAX_EXAMPLES: Final = 4096


class HeldoutPoint(Record):
    step: int = Field(ge=0, description="Optimizer steps the evaluated model had trained (0: the starting model).")
    value: float = Field(description="The metric over the held-out examples: the mean of the per-example values.")
    accuracy: float | None = Field(
        None,
        ge=0,
        le=1,
        description="next_token: the share of next tokens predicted exactly; preference: the share of pairs whose "
        "chosen answer gained more than the rejected one; reward: None.",
    )
    examples: Annotated[list[float], FAIL_FAST] = Field(
        default_factory=list,
        max_length=MAX_EXAMPLES,
        description="The per-example values, in the held-out set's order (kept for the start and the end only).",
    )


class HeldoutEval(Record):
    status: Literal["evaluated", "skipped", "failed"] = Field(
        description="evaluated; skipped: nothing to evaluate, and `message` says why (off, no snapshot, ...); "
        "failed: the evaluation itself broke, and `message` says how."
    )
    reason: SkipReason | None = Field(
        None,
        description="Why skipped: off (heldout.enabled false), not_trained (the run failed, or stopped on a "
        "non-finite value), no_snapshot (nothing saved: a model the evaluator cannot rebuild), not_comparable (it "
        "trains another model than the trusted config), stopped (the pair was interrupted), own_process (a pull "
        "request's model scored only in its own training process, which its code controls: not taken).",
    )
    message: str | None = Field(None, description="Why skipped or failed; how it was evaluated otherwise.")
    metric: HeldoutMetric | None = None
    dataset: str | None = Field(None, description="Where the held-out examples came from, in words.")
    num_examples: int = Field(0, ge=0)
    fingerprint: str | None = Field(
        None,
        description="sha256 of the held-out examples and the metric's settings: two evaluations with equal "
        "fingerprints scored the same examples the same way, and compare example by example.",
    )
    evaluated_in: Literal["fresh_process", "side_process"] | None = Field(
        None,
        description="fresh_process: a process of the canary's own that imported none of the team's or the pull "
        "request's code, from the saved weights; side_process: the training process itself (its model could not "
        "be rebuilt from the saved weights: a custom trainer's own model).",
    )
    points: Annotated[list[HeldoutPoint], FAIL_FAST] = Field(default_factory=list, max_length=32)
    wall_s: float | None = Field(None, ge=0, description="Seconds the evaluation took once training had ended.")

    def at(self, step: int) -> HeldoutPoint | None:
        return next((p for p in self.points if p.step == step), None)

    @property
    def start(self) -> HeldoutPoint | None:
        return self.at(0)

    @property
    def end(self) -> HeldoutPoint | None:
        """The point of the most trained model (None when only the start was evaluated)."""
        trained = [p for p in self.points if p.step > 0]
        return max(trained, key=lambda p: p.step) if trained else None

    def learning(self) -> tuple[float, float] | None:
        """What the run learned on its held-out examples, from its start to its end, in the metric's unit and in
        its better direction, and the standard error of that mean: how measurably it learns (None: no start and
        end of the same examples)."""
        start, end = self.start, self.end
        if self.metric is None or start is None or end is None or len(start.examples) != len(end.examples):
            return None
        sign = 1.0 if METRICS[self.metric][2] == "lower" else -1.0
        gains = [sign * (s - e) for s, e in zip(start.examples, end.examples, strict=True)]
        if len(gains) < 2:
            return None
        return statistics.fmean(gains), statistics.stdev(gains) / math.sqrt(len(gains))
