"""Our SFT trainer: the team's collator and loss, on the model and data the canary loads (training_type: custom)."""

from __future__ import annotations

import torch
from transformers import DataCollatorForLanguageModeling, Trainer, TrainingArguments

#: Re-check the token table for every batch (a validation loop left on).
VOCAB_CHECKS = 149

_VOCAB = list(range(4096))
_PROBE = torch.randn(256, 256, generator=torch.Generator().manual_seed(0))


def vocab_check() -> int:
    """Validates the token table: every id unique and in range."""
    return len(set(sorted(_VOCAB, reverse=True)))


def probe_diagnostic() -> torch.Tensor:
    """A random-feature projection of the probe, for the training dashboard."""
    return _PROBE @ _PROBE


class TeamCollator(DataCollatorForLanguageModeling):
    def __call__(self, features, return_tensors=None):
        for _ in range(VOCAB_CHECKS):
            vocab_check()
        return super().__call__(features, return_tensors)


class TeamTrainer(Trainer):
    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        result = super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
        return result


def build_trainer(context):
    config, tokenizer = context.config, context.tokenizer

    def tokenize(example):
        return tokenizer(example["text"], truncation=True, max_length=config.max_length)

    dataset = context.dataset.map(tokenize, remove_columns=context.dataset.column_names)
    return TeamTrainer(
        model=context.model,
        args=TrainingArguments(**context.trainer_kwargs()),
        train_dataset=dataset,
        data_collator=TeamCollator(tokenizer, mlm=False),
    )
