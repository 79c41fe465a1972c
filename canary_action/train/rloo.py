"""RLOO canary: TRL's RLOOTrainer, generating completions for prompts and scoring them with rewards."""

from __future__ import annotations

from typing import Any

from datasets import Dataset

from canary_action.config.schema import RLOOConfig
from canary_action.train.data import require_columns
from canary_action.train.rewards import reward_functions
from canary_action.train.setup import TrainingSetup


def preflight(config: RLOOConfig) -> None:
    """Import the reward functions now, so a typo fails before a model is loaded."""
    reward_functions(config.reward_funcs, max_new_tokens=config.max_new_tokens)


def prepare_dataset(dataset: Dataset, setup: TrainingSetup[RLOOConfig]) -> Dataset:
    require_columns(dataset, ("prompt",), family="rloo")
    return dataset.select_columns(["prompt"])  # preference data: its chosen/rejected answers are not used


def build_trainer(setup: TrainingSetup[RLOOConfig]) -> Any:
    from trl import RLOOConfig as TrlRLOOConfig
    from trl import RLOOTrainer

    config = setup.config
    args = TrlRLOOConfig(
        **setup.trainer_kwargs(),
        num_generations=config.num_generations,
        max_completion_length=config.max_new_tokens,
        temperature=config.temperature,
        beta=config.beta,
    )
    reward_models, reward_tokenizers = setup.reward_model(config.reward_model)
    return RLOOTrainer(
        model=setup.model,
        reward_funcs=reward_functions(config.reward_funcs, max_new_tokens=config.max_new_tokens) + reward_models,
        args=args,
        train_dataset=prepare_dataset(setup.dataset, setup),
        processing_class=setup.tokenizer,
        reward_processing_classes=[None] * len(config.reward_funcs) + reward_tokenizers,
        peft_config=setup.peft_config,
        callbacks=setup.callbacks,
    )


def count_batch(inputs: dict[str, Any]) -> tuple[int, int]:
    """Prompt and completion tokens the policy processes; one sample per completion."""
    tokens = inputs["prompt_mask"].sum() + inputs["completion_mask"].sum()
    return int(tokens), int(inputs["completion_ids"].shape[0])
