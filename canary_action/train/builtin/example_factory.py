"""Example `trainer_factory` functions: `build_trainer` for `training_type: custom` (configs/tiny/custom.yaml),
`build_dpo_trainer` for `training_type: dpo` (configs/tiny/dpo-factory.yaml).

A team points `trainer_factory` at its own function of this shape. It receives the canary's context (docs/api.md)
and returns an unstarted `transformers.Trainer`; the canary attaches its callbacks, enforces per-step logging and
max_steps, runs it and writes metrics.json, counting samples and tokens as the training type does.
"""

from __future__ import annotations

from typing import Any

from transformers import DataCollatorForLanguageModeling, Trainer, TrainingArguments


def build_trainer(context: Any) -> Trainer:
    """A plain causal-LM Trainer with its own tokenization and collator, as a team's pipeline would; it uses the
    canary's loaders only for convenience."""
    config = context.config
    tokenizer = context.tokenizer

    def tokenize(example: dict[str, Any]) -> dict[str, Any]:
        return tokenizer(example["text"], truncation=True, max_length=config.max_length)  # type: ignore[no-any-return]

    dataset = context.dataset.map(tokenize, remove_columns=context.dataset.column_names)
    return Trainer(
        model=context.model,
        args=TrainingArguments(**context.trainer_kwargs()),
        train_dataset=dataset,
        data_collator=DataCollatorForLanguageModeling(tokenizer, mlm=False),
    )


def build_dpo_trainer(context: Any) -> Trainer:
    """A team's own DPO trainer: TRL's DPOTrainer subclassed (where a team puts its loss or logging changes), with
    an explicit frozen reference model. The config's DPO keys (beta, loss_type, max_length...) arrive in
    context.training_args(), so the factory does not repeat them; trainer_inputs() is what TRL's own DPO canary
    passes (model, data in prompt/chosen/rejected columns, tokenizer, LoRA, callbacks)."""
    import copy

    from trl import DPOTrainer

    class TeamDPOTrainer(DPOTrainer):
        """Stands for the team's subclass; this example changes nothing of TRL's."""

    inputs = context.trainer_inputs()
    if inputs["peft_config"] is None:  # with LoRA, TRL's reference is the model with its adapter switched off
        reference = copy.deepcopy(inputs["model"]).eval()
        reference.requires_grad_(False)
        inputs["ref_model"] = reference
    trainer: Trainer = TeamDPOTrainer(args=context.training_args(), **inputs)
    return trainer
