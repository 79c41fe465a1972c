"""trainer_factory for the canary: our DPO set-up with an explicit frozen reference model."""

import copy

from trl import DPOConfig, DPOTrainer

from team_dpo.data import to_preference_columns

BETA = 0.1


def build_trainer(context):
    config = context.config
    dataset = context.dataset.map(to_preference_columns, remove_columns=context.dataset.column_names)
    reference = copy.deepcopy(context.model).eval()
    for p in reference.parameters():
        p.requires_grad_(False)
    args = DPOConfig(**context.trainer_kwargs(), beta=BETA, max_length=config.max_length)
    return DPOTrainer(model=context.model, ref_model=reference, args=args, train_dataset=dataset,
                      processing_class=context.tokenizer)
