"""An example `trainer_factory` for `training_type: custom` (configs/tiny/custom.yaml).

A team points `trainer_factory` at its own function of this shape. It receives the canary's context and
returns an unstarted `transformers.Trainer`; the canary attaches its callback, enforces per-step logging and
max_steps, runs it and writes metrics.json. This one builds a plain causal-LM Trainer with its own
tokenization and collator, as a team's pipeline would; it uses the canary's loaders only for convenience.
"""

from __future__ import annotations

from typing import Any

from transformers import DataCollatorForLanguageModeling, Trainer, TrainingArguments


def build_trainer(context: Any) -> Trainer:
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
