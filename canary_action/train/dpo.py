"""DPO canary: TRL's DPOTrainer on preference data (prompt, chosen, rejected)."""

from __future__ import annotations

from typing import Any

from datasets import Dataset

from canary_action.config.schema import DPOConfig
from canary_action.train.data import require_columns
from canary_action.train.setup import TrainingSetup


def preflight(config: DPOConfig) -> None:
    """Nothing beyond the schema: DPO needs no optional component."""


def prepare_dataset(dataset: Dataset, setup: TrainingSetup[DPOConfig]) -> Dataset:
    # Without a prompt column TRL extracts the shared prefix of chosen and rejected (hh-rlhf's shape).
    columns = require_columns(dataset, ("prompt", "chosen", "rejected"), ("chosen", "rejected"), family="dpo")
    return dataset.select_columns(list(columns))


def training_args(setup: TrainingSetup[DPOConfig]) -> Any:
    from trl import DPOConfig as TrlDPOConfig

    config = setup.config
    return TrlDPOConfig(
        **setup.trainer_kwargs(),
        beta=config.beta,
        loss_type=[config.loss_type],
        max_length=config.max_length,
        precompute_ref_log_probs=config.precompute_ref_log_probs,
    )


def trainer_inputs(setup: TrainingSetup[DPOConfig]) -> dict[str, Any]:
    # ref_model=None: with LoRA, TRL disables the adapter for reference log-probs; without LoRA it reloads
    # the policy by path (setup.py makes that path local for builtin models).
    return {**setup.shared_inputs(lambda dataset: prepare_dataset(dataset, setup)), "ref_model": None}


def build_trainer(setup: TrainingSetup[DPOConfig]) -> Any:
    from trl import DPOTrainer

    return DPOTrainer(args=training_args(setup), **trainer_inputs(setup))


def count_batch(inputs: dict[str, Any]) -> tuple[int, int]:
    """Tokens of the chosen and rejected sequences (each with its prompt); one sample per pair.

    TRL's DPO collator stacks each pair's chosen and rejected rows in one `input_ids`; a team's trainer that keeps
    them apart (`chosen_input_ids`, `rejected_input_ids`) counts the same way.
    """
    if "input_ids" not in inputs and "chosen_input_ids" in inputs:
        tokens = sum(_tokens(inputs, side) for side in ("prompt", "chosen", "rejected"))
        return tokens, int(inputs["chosen_input_ids"].shape[0])
    return int(inputs["attention_mask"].sum()), int(inputs["input_ids"].shape[0]) // 2


def _tokens(inputs: dict[str, Any], side: str) -> int:
    mask = inputs.get(f"{side}_attention_mask")
    ids = inputs.get(f"{side}_input_ids")
    if mask is not None:
        return int(mask.sum())
    return int(ids.numel()) if ids is not None else 0
