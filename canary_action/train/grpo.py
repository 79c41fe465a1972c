"""GRPO canary: TRL's GRPOTrainer — group-relative advantages over num_generations completions per prompt.

Data, rewards and batch counting are shared with the other online family (online.py).
"""

from __future__ import annotations

from typing import Any

from datasets import Dataset

from canary_action.config.schema import GRPOConfig
from canary_action.train import online
from canary_action.train.setup import TrainingSetup


def preflight(config: GRPOConfig) -> None:
    online.preflight(config)


def prepare_dataset(dataset: Dataset, setup: TrainingSetup[GRPOConfig]) -> Dataset:
    return online.prepare_dataset(dataset, setup)


def training_args(setup: TrainingSetup[GRPOConfig]) -> Any:
    from trl import GRPOConfig as TrlGRPOConfig

    config = setup.config
    return TrlGRPOConfig(
        **setup.trainer_kwargs(),
        num_generations=config.num_generations,
        max_completion_length=config.max_new_tokens,
        temperature=config.temperature,
        beta=config.beta,  # 0 by default: no reference model, as in TRL
    )


trainer_inputs = online.trainer_inputs


def build_trainer(setup: TrainingSetup[GRPOConfig]) -> Any:
    from trl import GRPOTrainer

    return GRPOTrainer(args=training_args(setup), **trainer_inputs(setup))


count_batch = online.count_batch
