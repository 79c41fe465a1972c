"""A team's own Trainer, built by its own factory, measured by the canary.

`training_type: custom` names `trainer_factory: package.module:function` for any Trainer; sft, dpo, grpo and rloo
take one too, for a trainer of that type (a subclass of TRL's, a team's own loss). The function receives the
TrainingSetup (as `CustomContext`: the config, the model/tokenizer/dataset loaders, `training_args()` and
`trainer_inputs()` as the type's own trainer would get them: docs/api.md) and returns any `transformers.Trainer`.
The canary then owns what measurement needs — per-step logs, NaN left visible, max_steps — overrides those
arguments where the factory set them differently (and says so), attaches its callbacks and runs it; samples
and tokens are counted as the training type counts them.
"""

from __future__ import annotations

from typing import Any

from datasets import Dataset

from canary_action.config.schema import CustomConfig, FactoryConfig
from canary_action.errors import ConfigError
from canary_action.train.rewards import import_object
from canary_action.train.setup import TrainingSetup

CustomContext = TrainingSetup[FactoryConfig]


def preflight(config: FactoryConfig) -> None:
    """Import the factory now, so a typo fails before anything is loaded."""
    if config.trainer_factory is not None:
        import_object(config.trainer_factory, key="trainer_factory")


def prepare_dataset(dataset: Dataset, setup: TrainingSetup[CustomConfig]) -> Dataset:
    """The factory decides what data its trainer needs; the canary's loader is there if it wants it."""
    return dataset


def training_args(setup: TrainingSetup[CustomConfig]) -> Any:
    from transformers import TrainingArguments

    return TrainingArguments(**setup.trainer_kwargs())


def trainer_inputs(setup: TrainingSetup[CustomConfig]) -> dict[str, Any]:
    """What the canary loaded, as `Trainer(...)` takes it; the examples as stored (the factory tokenizes them)."""
    return {
        "model": setup.model,
        "train_dataset": setup.dataset,
        "processing_class": setup.tokenizer,
        "callbacks": setup.callbacks,
    }


def build_trainer(setup: TrainingSetup[FactoryConfig]) -> Any:
    """The factory's trainer, with the canary's measurement settings and callbacks (any training type)."""
    from transformers import Trainer

    name = setup.config.trainer_factory
    assert name is not None  # run.py calls this only for a config that names one
    factory = import_object(name, key="trainer_factory")
    trainer = factory(setup)
    if not isinstance(trainer, Trainer):
        raise ConfigError(
            f"trainer_factory {name} returned {type(trainer).__name__}, not a transformers Trainer",
            fix="return the Trainer instance, unstarted (the canary calls train())",
        )
    owned = {"max_steps": setup.config.max_steps, "logging_steps": 1, "logging_nan_inf_filter": False}
    for key, value in owned.items():
        if getattr(trainer.args, key) != value:
            setup.notices.append(f"trainer_factory: {key}={getattr(trainer.args, key)!r} overridden with {value!r}")
            setattr(trainer.args, key, value)
    # A factory that passed trainer_inputs() already handed the callbacks over: each is attached once.
    attached = {id(callback) for callback in trainer.callback_handler.callbacks}
    for callback in setup.callbacks:
        if id(callback) not in attached:
            trainer.add_callback(callback)
    return trainer


def count_batch(inputs: dict[str, Any]) -> tuple[int, int]:
    """Any causal-LM batch: non-padding tokens by attention mask, one sample per row."""
    ids = inputs["input_ids"]
    mask = inputs.get("attention_mask")
    return int(mask.sum() if mask is not None else ids.numel()), int(ids.shape[0])
