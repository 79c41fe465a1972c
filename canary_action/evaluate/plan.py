"""What the evaluator is asked, and what a training process leaves for it: light, no torch.

A job names the trusted config (it decides the held-out examples and the metric: in a lockstep pair the base
side's, the default branch's), the trusted tree (where that config's reward functions import from) and the
subjects: each a config (the model it trains, as loaded and validated by the process that starts the evaluator)
and a run folder whose `heldout/` the training process fills with snapshots.
"""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field

from canary_action.config.schema import CommonConfig
from canary_action.metrics.heldout import HeldoutEval, HeldoutMetric

#: A run folder's snapshots: heldout/step-<k>/{weights.safetensors, snapshot.json}.
SNAPSHOT_DIR: Final = "heldout"
WEIGHTS_FILE: Final = "weights.safetensors"
META_FILE: Final = "snapshot.json"
#: Why a training process saved no snapshot, in its heldout/ folder (said in the evaluation).
REFUSAL_FILE: Final = "refused.txt"
#: A training process's own evaluation of a model the evaluator cannot rebuild (train/side_evaluation.py), and the
#: most the evaluator reads of it (32 points of 4,096 examples as JSON stay well under it).
OWN_FILE: Final = "evaluation.json"
MAX_OWN_BYTES: Final = 16 << 20
#: Trainable weights above this are not snapshotted (a full fine-tune of a large model): the evaluation says so.
MAX_SNAPSHOT_BYTES: Final = 8 << 30
#: The snapshot.json of a side is written by code the evaluator does not trust: this is all it may hold.
MAX_META_BYTES: Final = 64 << 10

AUTO_METRICS: Final[dict[str, HeldoutMetric]] = {
    "sft": "next_token", "dpo": "preference", "grpo": "reward", "rloo": "reward", "ppo": "reward",
}  # fmt: skip


class Closed(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


def metric_for(config: CommonConfig) -> HeldoutMetric | None:
    """The metric the config asks for; None: decided by the held-out data's columns (a custom trainer on auto)."""
    asked = config.heldout.metric
    if asked != "auto":
        return asked
    return AUTO_METRICS.get(config.training_type)


#: `heldout.steps: auto` adds a point halfway from this many steps on: in a shorter run it would cost a fifth of
#: the evaluation for a point a reader rarely needs (a pair of the tiny canaries runs in 20-60 s).
AUTO_HALFWAY_FROM: Final = 100


def snapshot_steps(config: CommonConfig) -> list[int]:
    """The steps, before the last, after which a model is saved for evaluation (the end always is)."""
    steps = config.heldout.steps
    if steps == "auto":
        return [config.max_steps // 2] if config.max_steps >= AUTO_HALFWAY_FROM else []
    return sorted(set(steps))


def snapshot_name(step: int) -> str:
    return f"step-{step:06d}"


#: A module's name as LoRA's target_modules and modules_to_save list it: a plain dotted name (a string alone would
#: be a regular expression to PEFT, run over every module's name).
ModuleName = Annotated[str, Field(pattern=r"^[A-Za-z0-9_.\-]{1,200}$")]


class LoraSpec(Closed):
    """The LoRA structure of a trained model, as its snapshot says (the adapter's weights are in the snapshot). The
    evaluator builds it before reading a tensor, so it is bounded: a rank of at most 256, plain module names."""

    r: int = Field(ge=1, le=256)
    lora_alpha: float = Field(gt=0, le=1_000_000)
    lora_dropout: float = Field(ge=0, lt=1)
    target_modules: list[ModuleName] | Literal["all-linear"] | None = Field(None, max_length=64)
    bias: Literal["none", "all", "lora_only"] = "none"
    use_rslora: bool = False
    modules_to_save: list[ModuleName] | None = Field(None, max_length=16)
    fan_in_fan_out: bool = False


class SnapshotMeta(Closed):
    """snapshot.json: written beside the weights by the training process (train/snapshots.py)."""

    snapshot_version: Literal[1] = 1
    step: int = Field(ge=1)
    model_name: str = Field(max_length=1000)
    lora: LoraSpec | None = Field(description="The adapter's structure; None: the model's own weights were trained.")
    num_tensors: int = Field(ge=0)
    num_parameters: int = Field(ge=0)


class Subject(Closed):
    """One model to evaluate: a run, or one side of a lockstep pair."""

    name: str = Field(max_length=20, pattern=r"^[a-z]+$")
    config: dict[str, Any] = Field(description="The subject's resolved config: what model it trained.")
    run_dir: str = Field(description="Its run folder: the snapshots are in its heldout/ folder.")
    trusted: bool = Field(
        True,
        description="False for a pull request's side of a pair: an evaluation its own process wrote is not taken.",
    )


class EvalJob(Closed):
    """What an evaluator process is started with (a JSON file; `python -I -m canary_action.evaluate --job F`)."""

    trusted_config: dict[str, Any] = Field(description="Decides the held-out examples and the metric.")
    trusted_tree: str | None = Field(None, description="Appended to the import path for its reward functions.")
    subjects: list[Subject] = Field(min_length=1, max_length=2)
    device: Literal["auto", "cpu", "cuda"] = Field(
        "auto", description="auto: as training placed itself (train/placement.py): CUDA when visible, unless cpu."
    )
    output: str = Field(description="Where the results (EvalResults) are written.")
    scratch: str | None = Field(
        None, description="A folder of the starter's own for what loading writes (removed by the starter)."
    )
    cpus: list[int] | None = Field(
        None, description="The CPUs to score on once training has ended: the starter's, before it pinned the evaluator."
    )


class EvalResults(Closed):
    """What the evaluator writes: one evaluation per subject, by name."""

    evaluations: dict[str, HeldoutEval]
