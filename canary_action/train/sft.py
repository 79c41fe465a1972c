"""SFT canary: TRL's SFTTrainer on text, chat messages, prompt/completion pairs or preference data."""

from __future__ import annotations

from typing import Any

from datasets import Dataset

from canary_action.config.schema import SFTConfig
from canary_action.train.data import require_columns
from canary_action.train.setup import TrainingSetup


def preflight(config: SFTConfig) -> None:
    """Nothing beyond the schema: SFT needs no optional component."""


def prepare_dataset(dataset: Dataset, setup: TrainingSetup[SFTConfig]) -> Dataset:
    columns = require_columns(dataset, ("text",), ("messages",), ("prompt", "completion"), ("chosen",), family="sft")
    if columns == ("chosen",):  # preference data: learn the preferred answer (hh-rlhf's chosen transcript)
        setup.notices.append("sft on preference data: training on the `chosen` column")
        return dataset.select_columns(["chosen"]).rename_column("chosen", "text")
    return dataset.select_columns(list(columns))


def training_args(setup: TrainingSetup[SFTConfig]) -> Any:
    from trl import SFTConfig as TrlSFTConfig

    config = setup.config
    return TrlSFTConfig(
        **setup.trainer_kwargs(),
        max_length=config.max_length,
        packing=config.packing,
        completion_only_loss=config.completion_only_loss,
    )


def trainer_inputs(setup: TrainingSetup[SFTConfig]) -> dict[str, Any]:
    return setup.shared_inputs(lambda dataset: prepare_dataset(dataset, setup))


def build_trainer(setup: TrainingSetup[SFTConfig]) -> Any:
    from trl import SFTTrainer

    return SFTTrainer(args=training_args(setup), **trainer_inputs(setup))


def count_batch(inputs: dict[str, Any]) -> tuple[int, int]:
    """Non-padding tokens and sequences of one micro-batch (padding-free batches have no attention mask)."""
    if "attention_mask" in inputs:
        return int(inputs["attention_mask"].sum()), int(inputs["input_ids"].shape[0])
    return int(inputs["input_ids"].numel()), int((inputs["position_ids"] == 0).sum())
