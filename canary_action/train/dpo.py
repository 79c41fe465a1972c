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


def build_trainer(setup: TrainingSetup[DPOConfig]) -> Any:
    from trl import DPOConfig as TrlDPOConfig
    from trl import DPOTrainer

    config = setup.config
    args = TrlDPOConfig(
        **setup.trainer_kwargs(),
        beta=config.beta,
        loss_type=[config.loss_type],
        max_length=config.max_length,
        precompute_ref_log_probs=config.precompute_ref_log_probs,
    )
    # ref_model=None: with LoRA, TRL disables the adapter for reference log-probs; without LoRA it reloads
    # the policy by path (setup.py makes that path local for builtin models).
    return DPOTrainer(
        model=setup.model,
        ref_model=None,
        args=args,
        train_dataset=prepare_dataset(setup.dataset, setup),
        processing_class=setup.tokenizer,
        peft_config=setup.peft_config,
        callbacks=setup.callbacks,
    )


def count_batch(inputs: dict[str, Any]) -> tuple[int, int]:
    """Tokens of the chosen and rejected sequences (each with its prompt); one sample per pair."""
    return int(inputs["attention_mask"].sum()), int(inputs["input_ids"].shape[0]) // 2
