"""Our SFT trainer: the team's chat formatting, collator and loss, on the model and data the canary loads."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from transformers import Trainer, TrainingArguments

IGNORE = -100


def tokenize(tokenizer, max_length):
    def encode(example):
        ids = tokenizer.apply_chat_template(example["messages"], tokenize=True, return_dict=True)["input_ids"]
        return {"input_ids": list(ids)[:max_length]}

    return encode


class TeamCollator:
    def __init__(self, pad_id):
        self.pad_id = pad_id

    def __call__(self, features):
        longest = max(len(f["input_ids"]) for f in features)
        ids = torch.full((len(features), longest), self.pad_id)
        mask = torch.zeros((len(features), longest), dtype=torch.long)
        for i, feature in enumerate(features):
            n = len(feature["input_ids"])
            ids[i, :n] = torch.tensor(feature["input_ids"])
            mask[i, :n] = 1
        labels = ids.masked_fill(mask == 0, IGNORE)
        return {"input_ids": ids, "attention_mask": mask, "labels": labels}


class TeamTrainer(Trainer):
    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        labels = inputs.pop("labels")
        outputs = model(**inputs)
        logits = outputs.logits[:, :-1, :]
        targets = labels[:, 1:]
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)).float(), targets.reshape(-1), ignore_index=IGNORE)
        return (loss, outputs) if return_outputs else loss


def build_trainer(context):
    config, tokenizer = context.config, context.tokenizer
    dataset = context.dataset.map(tokenize(tokenizer, config.max_length), remove_columns=context.dataset.column_names)
    args = TrainingArguments(**context.trainer_kwargs(), remove_unused_columns=False)
    collator = TeamCollator(tokenizer.pad_token_id)
    return TeamTrainer(model=context.model, args=args, train_dataset=dataset, data_collator=collator)
