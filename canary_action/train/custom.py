"""Custom canary: a team's own Trainer, built by its own factory, measured by the canary.

The config names `trainer_factory: package.module:function`. The function receives the TrainingSetup (as
`CustomContext`: config, model/tokenizer/dataset loaders, the canary's TrainingArguments kwargs) and returns
any `transformers.Trainer`. The canary then owns what measurement needs — per-step logs, NaN left visible,
max_steps — overrides those arguments where the factory set them differently (and says so), attaches its
callback and runs it.
"""

from __future__ import annotations

from typing import Any

from datasets import Dataset

from canary_action.config.schema import CustomConfig
from canary_action.errors import ConfigError
from canary_action.train.rewards import import_object
from canary_action.train.setup import TrainingSetup

CustomContext = TrainingSetup[CustomConfig]


def preflight(config: CustomConfig) -> None:
    """Import the factory now, so a typo fails before anything is loaded."""
    import_object(config.trainer_factory, key="trainer_factory")


def prepare_dataset(dataset: Dataset, setup: CustomContext) -> Dataset:
    """The factory decides what data its trainer needs; the canary's loader is there if it wants it."""
    return dataset


def build_trainer(setup: CustomContext) -> Any:
    from transformers import Trainer

    factory = import_object(setup.config.trainer_factory, key="trainer_factory")
    trainer = factory(setup)
    if not isinstance(trainer, Trainer):
        raise ConfigError(
            f"trainer_factory {setup.config.trainer_factory} returned {type(trainer).__name__}, "
            "not a transformers Trainer",
            fix="return the Trainer instance, unstarted (the canary calls train())",
        )
    owned = {"max_steps": setup.config.max_steps, "logging_steps": 1, "logging_nan_inf_filter": False}
    for name, value in owned.items():
        if getattr(trainer.args, name) != value:
            setup.notices.append(f"custom trainer: {name}={getattr(trainer.args, name)!r} overridden with {value!r}")
            setattr(trainer.args, name, value)
    for callback in setup.callbacks:
        trainer.add_callback(callback)
    return trainer


def count_batch(inputs: dict[str, Any]) -> tuple[int, int]:
    """Any causal-LM batch: non-padding tokens by attention mask, one sample per row."""
    ids = inputs["input_ids"]
    mask = inputs.get("attention_mask")
    return int(mask.sum() if mask is not None else ids.numel()), int(ids.shape[0])
