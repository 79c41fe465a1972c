"""PPO canary: TRL's value-model PPOTrainer, where the installed TRL still ships it.

TRL moved PPO to `trl.experimental.ppo` and removed it after 1.12; on a newer TRL this family refuses to run
(exit 2) and names the alternatives. PPO runs its own loop rather than the Trainer's: it counts episodes, not
steps, never calls compute_loss, and ignores `should_training_stop` — handled below and in instrument.py.
"""

from __future__ import annotations

import warnings
from typing import Any

from datasets import Dataset
from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments

from canary_action.config.schema import PPOConfig
from canary_action.train.callback import TrainingStopped
from canary_action.train.data import require_columns
from canary_action.train.precheck import no_value_model_ppo
from canary_action.train.setup import TrainingSetup


def preflight(config: PPOConfig) -> None:
    try:
        with warnings.catch_warnings():  # "trl.experimental is unstable": known, and the reason for this module
            warnings.simplefilter("ignore")
            import trl.experimental.ppo  # noqa: F401
    except ImportError as error:  # precheck.py looked it up; this is where it is imported
        raise no_value_model_ppo() from error


def prepare_dataset(dataset: Dataset, setup: TrainingSetup[PPOConfig]) -> Dataset:
    require_columns(dataset, ("prompt",), family="ppo")
    tokenizer = setup.tokenizer
    return dataset.map(
        lambda example: tokenizer(example["prompt"], add_special_tokens=False),
        remove_columns=dataset.column_names,
    )


def build_trainer(setup: TrainingSetup[PPOConfig]) -> Any:
    from trl.experimental.ppo import PPOConfig as TrlPPOConfig
    from trl.experimental.ppo import PPOTrainer

    config = setup.config
    kwargs = setup.trainer_kwargs()
    del kwargs["max_steps"]  # PPO counts episodes: one optimizer update per batch of rollouts
    args = TrlPPOConfig(
        **kwargs,
        total_episodes=config.max_steps * config.batch_size * config.gradient_accumulation_steps,
        num_ppo_epochs=config.ppo_epochs,
        kl_coef=config.init_kl_coef,
        cliprange=config.cliprange,
        vf_coef=config.vf_coef,
        response_length=config.max_new_tokens,
        temperature=config.temperature,
        stop_token="eos",
        local_rollout_forward_batch_size=config.batch_size,
        num_sample_generations=0,  # no sample tables: they cost generation time outside any step
    )
    reward_name = config.reward_model or config.model_name
    setup.tokenizer.padding_side = "left"  # rollout prompts are batched for generation: pad on the left
    trainer = PPOTrainer(
        args=args,
        processing_class=setup.tokenizer,
        model=setup.model,
        ref_model=None if config.use_peft else setup.load_model(config.model_name, task="causal-lm"),
        reward_model=setup.load_model(reward_name, task="sequence-classification"),
        value_model=setup.load_model(config.value_model or reward_name, task="sequence-classification"),
        train_dataset=prepare_dataset(setup.dataset, setup),
        callbacks=setup.callbacks,
        peft_config=setup.peft_config,
    )
    trainer.add_callback(_HonourStop())
    setup.notices.append(
        "ppo: data/num_tokens counts prompt tokens only; TRL's PPO loop generates out of the canary's sight"
    )
    return trainer


def count_batch(inputs: dict[str, Any]) -> tuple[int, int]:
    """Prompt tokens of a rollout batch (PPO generates inside its loop, out of the canary's sight)."""
    return int(inputs["attention_mask"].sum()), int(inputs["input_ids"].shape[0])


class _HonourStop(TrainerCallback):
    """PPO's loop never reads should_training_stop: end it from the step-end callback instead (but let the
    last step end the loop normally, so on_train_end still runs)."""

    def on_step_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **_: Any) -> None:
        if control.should_training_stop and state.global_step < state.max_steps:
            raise TrainingStopped(state.global_step)
