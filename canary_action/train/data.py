"""Loading the examples a canary trains on: builtin synthetic data, a local file, or a Hub dataset.

Shared by every family. Each family then checks and reshapes the columns it needs (`prepare_dataset`),
with `require_columns` so that a dataset of the wrong shape fails with the columns it has and needs —
never with a missing column silently turned into "".
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from datasets import Dataset, load_dataset
from transformers import PreTrainedTokenizerBase

from canary_action.config.schema import CommonConfig
from canary_action.errors import ConfigError, TrainingError
from canary_action.train import hub
from canary_action.train.builtin import catalog
from canary_action.train.builtin import data as builtin_data


def load(config: CommonConfig, tokenizer: PreTrainedTokenizerBase) -> Dataset:
    builtin = catalog.split(config.dataset_name)
    if builtin is not None:
        return builtin_data.build_dataset(
            builtin,
            size=config.dataset_size,
            seed=config.seed,
            max_length=config.max_length,
            max_prompt_length=config.max_prompt_length,
        )
    loaded = _read(config.dataset_name, config.dataset_split, config.dataset_subset, config.dataset_revision)
    dataset = loaded.select(range(min(config.dataset_size, len(loaded))))
    return truncate_prompts(dataset, tokenizer, config.max_prompt_length)


def load_heldout(config: CommonConfig, tokenizer: PreTrainedTokenizerBase) -> tuple[Dataset, str]:
    """The held-out examples of the config's `heldout` block, and where they came from in words: its own dataset's
    first num_examples rows; else the training data's held-out part (builtin: a part drawn apart; a file or a Hub
    dataset: the rows after the first dataset_size, which training never reads)."""
    wanted = config.heldout.num_examples
    name = config.heldout.dataset_name or config.dataset_name
    builtin = catalog.split(name)
    if builtin is not None:
        rows = builtin_data.build_dataset(
            builtin, size=wanted, seed=config.seed, max_length=config.max_length,
            max_prompt_length=config.max_prompt_length, part="heldout",
        )  # fmt: skip
        return rows, f"{name}, its held-out part ({wanted} examples drawn apart from the training ones)"
    own = config.heldout.dataset_name is not None
    split = (config.heldout.dataset_split or config.dataset_split) if own else config.dataset_split
    subset, revision = (None, None) if own else (config.dataset_subset, config.dataset_revision)
    loaded = _read(name, split, subset, revision, key="heldout.dataset_name" if own else "dataset_name")
    start = 0 if own else config.dataset_size
    if len(loaded) <= start:
        raise ConfigError(
            f"dataset {name} has {len(loaded)} rows: none after the first dataset_size ({start}) to hold out",
            fix="name an evaluation set of your own (heldout.dataset_name), or lower dataset_size",
        )
    rows = loaded.select(range(start, min(start + wanted, len(loaded))))
    where = f"rows {start}-{start + len(rows) - 1} of {name} ({split})"
    return truncate_prompts(rows, tokenizer, config.max_prompt_length), where + (
        "" if own else ", after the training rows"
    )


def _read(name: str, split: str, subset: str | None, revision: str | None, *, key: str = "dataset_name") -> Dataset:
    """A local file's rows, or a Hub dataset's split (from the cache, or the Hub: hub.require)."""
    path = Path(name)
    if path.suffix in hub.LOCAL_DATA_FORMATS:
        if not path.is_file():
            raise ConfigError(
                f"dataset file {path} does not exist", fix=f"fix {key}, or use builtin:<name> for offline runs"
            )
        return load_dataset(hub.LOCAL_DATA_FORMATS[path.suffix], data_files=str(path), split="train")
    hub.require([hub.HubName(name, "dataset", revision)])
    return load_dataset(name, subset, split=split, revision=revision)


def truncate_prompts(dataset: Dataset, tokenizer: PreTrainedTokenizerBase, max_prompt_length: int) -> Dataset:
    """Keep the last `max_prompt_length` tokens of plain-text prompts (TRL >= 1.0 no longer does this)."""
    if "prompt" not in dataset.column_names or not isinstance(dataset[0]["prompt"], str):
        return dataset

    def keep_end(example: dict[str, str]) -> dict[str, str]:
        ids: list[int] = tokenizer(example["prompt"], add_special_tokens=False)["input_ids"]
        if len(ids) <= max_prompt_length:
            return example
        return {"prompt": str(tokenizer.decode(ids[-max_prompt_length:]))}

    return dataset.map(keep_end)


def require_columns(dataset: Dataset, *alternatives: tuple[str, ...], family: str) -> tuple[str, ...]:
    """The first column set the dataset has in full; otherwise a TrainingError naming what is there."""
    for columns in alternatives:
        if set(columns) <= set(dataset.column_names):
            return columns
    wanted = " or ".join("(" + ", ".join(c) + ")" for c in alternatives)
    raise TrainingError(
        f"{family} needs dataset columns {wanted}; the dataset has ({', '.join(dataset.column_names)})",
        fix="point dataset_name at data of that shape, or use the builtin data for this family",
    )


def fingerprint(dataset: Dataset) -> str:
    """sha256 of the examples in order: equal fingerprints, equal training data."""
    digest = hashlib.sha256()
    for row in dataset:
        digest.update(json.dumps(row, sort_keys=True, default=str).encode())
    return digest.hexdigest()
