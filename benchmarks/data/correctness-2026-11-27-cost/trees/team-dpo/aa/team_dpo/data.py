"""Map the preference data into the columns DPOTrainer reads."""


def to_preference_columns(example):
    return {"prompt": example.get("prompt", ""), "chosen": example["chosen"], "rejected": example["rejected"]}
