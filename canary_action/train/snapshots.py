"""Snapshots for the held-out evaluation: the trainable weights, saved where the evaluator reads them.

After the steps `heldout.steps` names (between steps: in no measured step, and in a lockstep side's own turn) and
at the end of training, the trainable tensors go to `<run_dir>/heldout/step-<k>/weights.safetensors` (tensors only:
safetensors cannot carry code) with `snapshot.json` (canary_action.evaluate.plan.SnapshotMeta: the step, the model
and the LoRA structure). The evaluator rebuilds the model as the canary loads it and puts these tensors in; the
frozen weights are the loaded ones. So only a model the canary loaded can be snapshotted: a custom trainer that
built its own is scored in the training process instead (train/side_evaluation.py), at the same steps.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from safetensors.torch import save_file

from canary_action.config.schema import CommonConfig
from canary_action.evaluate.plan import (
    MAX_SNAPSHOT_BYTES,
    META_FILE,
    REFUSAL_FILE,
    SNAPSHOT_DIR,
    WEIGHTS_FILE,
    LoraSpec,
    SnapshotMeta,
    snapshot_name,
    snapshot_steps,
)
from canary_action.train.setup import TrainingSetup
from canary_action.train.side_evaluation import SideEvaluation

#: LoRA options that change the adapter's structure beyond what LoraSpec rebuilds: a model trained with one of them
#: set is not rebuilt (its evaluation says which).
_UNREBUILT_LORA_OPTIONS = ("use_dora", "layers_to_transform", "rank_pattern", "alpha_pattern", "lora_bias",
                           "trainable_token_indices", "target_parameters", "layer_replication")  # fmt: skip


class Snapshots:
    """The BetweenSteps work that saves snapshots; `final` saves the end of training."""

    def __init__(self, config: CommonConfig, run_dir: Path) -> None:
        self.config = config
        self.folder = run_dir / SNAPSHOT_DIR
        self.steps = set(snapshot_steps(config)) if config.heldout.enabled else set()
        self.saved: list[int] = []
        self.model: Any = None
        self.lora: LoraSpec | None = None
        self.refusal: str | None = None if config.heldout.enabled else "heldout.enabled is false"
        """Why nothing is saved (said in the evaluation), or None."""
        self.side: SideEvaluation | None = None
        """The training process's own evaluation, for a model the evaluator cannot rebuild."""

    def attach(self, trainer: Any, setup: TrainingSetup[Any]) -> None:
        """Take the trainer's model, when the evaluator can rebuild it: the one the canary loaded (setup.model),
        bare or under LoRA adapters."""
        if self.refusal is None:
            self._take(trainer, setup)
        if self.refusal is not None and self.config.heldout.enabled:  # the evaluator says why it has nothing
            self.folder.mkdir(parents=True, exist_ok=True)
            (self.folder / REFUSAL_FILE).write_text(self.refusal, encoding="utf-8")

    def _take(self, trainer: Any, setup: TrainingSetup[Any]) -> None:
        loaded = setup.__dict__.get("model")  # functools.cached_property's slot: None when never loaded
        model = trainer.model
        base = model.get_base_model() if hasattr(model, "peft_config") else model
        if loaded is None or base is not loaded:  # the factory's own model: scored where it lives
            self._score_here(model, setup, 0)
            return
        if hasattr(model, "peft_config"):
            lora, why = lora_spec(model.peft_config.get("default"))
            if lora is None:
                self.refusal = why
                return
            self.lora = lora
        size = sum(p.numel() * p.element_size() for p in model.parameters() if p.requires_grad)
        if size > MAX_SNAPSHOT_BYTES:
            self.refusal = (
                f"the trainable weights take {size / 2**30:.1f} GiB, over the {MAX_SNAPSHOT_BYTES >> 30} GiB a "
                "snapshot may hold: train LoRA adapters (use_peft: true) or a smaller canary"
            )
            return
        self.model = model

    def between_steps(self, completed_steps: int, *, going_on: bool) -> None:
        if going_on and completed_steps in self.steps:
            self.save(completed_steps)

    def final(self, completed_steps: int) -> None:
        if completed_steps > 0 and completed_steps not in self.saved:
            self.save(completed_steps)
        if self.side is not None:
            self.side.write()

    def _score_here(self, model: Any, setup: TrainingSetup[Any], step: int) -> None:
        """Score the live model in this process (the start, or a step); on failure say why, and stop scoring."""
        try:
            if self.side is None:
                self.side = SideEvaluation(self.config, setup, model, self.folder.parent)
            self.side.score(step)
        except Exception as error:  # the training goes on; the evaluation says why it has nothing
            self.side = None
            self.refusal = (
                "the trainer_factory's own model (not the one the canary loaded) could not be scored on held-out "
                f"examples in the training process: {type(error).__name__}: {str(error)[:300]}; build on "
                "context.model to have it evaluated by the canary's own process"
            )
            self.folder.mkdir(parents=True, exist_ok=True)
            (self.folder / REFUSAL_FILE).write_text(self.refusal, encoding="utf-8")

    def save(self, step: int) -> None:
        if self.side is not None:
            self._score_here(self.side.model, None, step)  # type: ignore[arg-type]  # set up already
            return
        if self.model is None:
            return
        named = {n: p.detach().to("cpu", copy=True).contiguous() for n, p in self.model.named_parameters()
                 if p.requires_grad}  # fmt: skip
        folder = self.folder / snapshot_name(step)
        partial = folder.with_name(folder.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        save_file(named, str(partial / WEIGHTS_FILE))
        meta = SnapshotMeta(
            step=step, model_name=self.config.model_name, lora=self.lora, num_tensors=len(named),
            num_parameters=sum(t.numel() for t in named.values()),
        )  # fmt: skip
        (partial / META_FILE).write_text(meta.model_dump_json(indent=2), encoding="utf-8")
        partial.replace(folder)  # complete or absent: a run killed while saving leaves no half snapshot
        self.saved.append(step)


def lora_spec(peft_config: Any) -> tuple[LoraSpec | None, str]:
    """The LoRA structure of PEFT's config, or (None, why it cannot be rebuilt)."""
    if peft_config is None or type(peft_config).__name__ != "LoraConfig":
        return None, f"adapters of type {type(peft_config).__name__} are not rebuilt by the evaluator (LoRA is)"
    options = [name for name in _UNREBUILT_LORA_OPTIONS if getattr(peft_config, name, None) not in (None, False, {})]
    if options:
        return None, f"LoRA option {', '.join(options)} is not rebuilt by the evaluator"
    targets = peft_config.target_modules
    try:
        return LoraSpec(
            r=peft_config.r,
            lora_alpha=peft_config.lora_alpha,
            lora_dropout=peft_config.lora_dropout,
            target_modules=sorted(targets) if isinstance(targets, set | list | tuple) else targets,
            bias=peft_config.bias,
            use_rslora=peft_config.use_rslora,
            modules_to_save=sorted(peft_config.modules_to_save) if peft_config.modules_to_save else None,
            fan_in_fan_out=peft_config.fan_in_fan_out,
        ), ""
    except ValidationError as error:  # a rank over 256, a module name PEFT would read as a pattern
        return None, f"LoRA adapters the evaluator does not rebuild: {error.errors()[0]['msg']}"
