"""What the online RL families (GRPO, RLOO) share: prompt-only data, rewards, and how their batches count.

Both TRL trainers take the same inputs and produce the same batch shape; keeping these in one place means a
fix to token counting or reward assembly lands in both.
"""

from __future__ import annotations

from typing import Any

from datasets import Dataset

from canary_action.config.schema import OnlineRLConfig
from canary_action.train.data import require_columns
from canary_action.train.rewards import reward_functions
from canary_action.train.setup import TrainingSetup


def preflight(config: OnlineRLConfig) -> None:
    """Import the reward functions now, so a typo fails before a model is loaded."""
    reward_functions(config.reward_funcs, max_new_tokens=config.max_new_tokens)


def prepare_dataset(dataset: Dataset, setup: TrainingSetup[Any]) -> Dataset:
    require_columns(dataset, ("prompt",), family=setup.config.training_type)
    return dataset.select_columns(["prompt"])  # preference data: its chosen/rejected answers are not used


def trainer_inputs(setup: TrainingSetup[Any]) -> dict[str, Any]:
    """The keyword arguments GRPOTrainer and RLOOTrainer share: model, rewards, data, tokenizer, callbacks."""
    config: OnlineRLConfig = setup.config
    reward_models, reward_tokenizers = setup.reward_model(config.reward_model)
    return {
        **setup.shared_inputs(lambda dataset: prepare_dataset(dataset, setup)),
        "reward_funcs": reward_functions(config.reward_funcs, max_new_tokens=config.max_new_tokens) + reward_models,
        "reward_processing_classes": [None] * len(config.reward_funcs) + reward_tokenizers,
    }


def count_batch(inputs: dict[str, Any]) -> tuple[int, int]:
    """Prompt and completion tokens the policy processes; one sample per completion."""
    tokens = inputs["prompt_mask"].sum() + inputs["completion_mask"].sum()
    return int(tokens), int(inputs["completion_ids"].shape[0])
