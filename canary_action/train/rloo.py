"""RLOO canary: TRL's RLOOTrainer — leave-one-out baselines over num_generations completions per prompt.

Data, rewards and batch counting are shared with the other online family (online.py).
"""

from __future__ import annotations

from typing import Any

from datasets import Dataset

from canary_action.config.schema import RLOOConfig
from canary_action.train import online
from canary_action.train.setup import TrainingSetup


def preflight(config: RLOOConfig) -> None:
    online.preflight(config)


def prepare_dataset(dataset: Dataset, setup: TrainingSetup[RLOOConfig]) -> Dataset:
    return online.prepare_dataset(dataset, setup)


def training_args(setup: TrainingSetup[RLOOConfig]) -> Any:
    from trl import RLOOConfig as TrlRLOOConfig

    config = setup.config
    return TrlRLOOConfig(
        **setup.trainer_kwargs(),
        num_generations=config.num_generations,
        max_completion_length=config.max_new_tokens,
        temperature=config.temperature,
        beta=config.beta,  # RLOO keeps a KL term to the reference by default (TRL: 0.05)
    )


trainer_inputs = online.trainer_inputs


def build_trainer(setup: TrainingSetup[RLOOConfig]) -> Any:
    from trl import RLOOTrainer

    return RLOOTrainer(args=training_args(setup), **trainer_inputs(setup))


count_batch = online.count_batch
