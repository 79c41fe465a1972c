"""Builtin datasets: seeded rows, planned token lengths to the token, within the configured limits."""

from __future__ import annotations

import itertools
import statistics
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from canary_action.errors import ConfigError
from canary_action.train.builtin import catalog, data
from canary_action.train.builtin.tokenizer import build_tokenizer

LIMITS = {"max_length": 256, "max_prompt_length": 64}
COLUMNS = {
    "preference": ["prompt", "chosen", "rejected"],
    "sft": ["text"],
    "messages": ["messages"],
    "prompts": ["prompt"],
}


def _measured(tokenizer: Any, name: str, row: dict[str, Any]) -> dict[str, int]:
    """Token counts as the builtin tokenizer sees each column (sft-messages: rendered by the template)."""

    def count(text: str) -> int:
        return len(tokenizer(text)["input_ids"])

    if catalog.DATASETS[name] == "messages":
        messages = row["messages"]
        prompt = tokenizer.apply_chat_template(messages[:1], tokenize=False, add_generation_prompt=True)
        return {
            "prompt": count(prompt),
            "messages": count(tokenizer.apply_chat_template(messages, tokenize=False)),
        }
    return {column: count(text) for column, text in row.items()}


@pytest.mark.parametrize("name", list(catalog.DATASETS))
def test_columns_follow_the_kind(name: str) -> None:
    dataset = data.build_dataset(name, size=8, seed=0, **LIMITS)
    assert dataset.column_names == COLUMNS[catalog.DATASETS[name]]
    assert len(dataset) == 8


@pytest.mark.parametrize("name", list(catalog.DATASETS))
def test_tokenized_lengths_are_exactly_the_planned_ones(name: str) -> None:
    dataset = data.build_dataset(name, size=64, seed=1, **LIMITS)
    planned = data.length_profile(name, size=64, seed=1, **LIMITS)
    tokenizer = build_tokenizer()
    assert [_measured(tokenizer, name, row) for row in dataset.to_list()] == planned


@pytest.mark.parametrize("name", list(catalog.DATASETS))
def test_same_seed_same_rows_other_seed_other_rows(name: str) -> None:
    rows = data.build_dataset(name, size=16, seed=3, **LIMITS).to_list()
    assert data.build_dataset(name, size=16, seed=3, **LIMITS).to_list() == rows
    assert data.build_dataset(name, size=16, seed=4, **LIMITS).to_list() != rows


def _within_limits(name: str, plan: dict[str, int], max_length: int, max_prompt_length: int) -> bool:
    kind = catalog.DATASETS[name]
    if kind == "preference":  # DPO appends one EOS to each completion
        longest = plan["prompt"] + max(plan["chosen"], plan["rejected"]) + 1
        return plan["prompt"] <= max_prompt_length and longest <= max_length
    if kind == "sft":  # SFT appends one EOS
        return plan["text"] + 1 <= max_length
    if kind == "messages":  # the template's markers and EOS are counted in the rendering
        return plan["prompt"] <= max_prompt_length and plan["prompt"] < plan["messages"] <= max_length
    return plan["prompt"] <= max_prompt_length


@settings(max_examples=60, deadline=None)
@given(
    name=st.sampled_from(list(catalog.DATASETS)),
    seed=st.integers(0, 2**32),
    max_prompt_length=st.integers(4, 300),
    completion_room=st.integers(2, 300),
)
def test_lengths_always_fit_the_limits(name: str, seed: int, max_prompt_length: int, completion_room: int) -> None:
    max_length = max_prompt_length + completion_room
    plans = data.length_profile(name, size=32, seed=seed, max_length=max_length, max_prompt_length=max_prompt_length)
    assert all(min(plan.values()) >= 1 for plan in plans)
    assert all(_within_limits(name, plan, max_length, max_prompt_length) for plan in plans)


def test_lengths_spread_around_half_the_budget_and_some_reach_the_cap() -> None:
    plans = data.length_profile("preference", size=2000, seed=0, **LIMITS)
    prompts = [plan["prompt"] for plan in plans]
    chosen = [plan["chosen"] for plan in plans]
    assert 28 <= statistics.median(prompts) <= 36  # median: half of max_prompt_length (64)
    assert 86 <= statistics.median(chosen) <= 105  # half of 256 - 64 - 1
    assert 0.05 < prompts.count(64) / len(prompts) < 0.2  # log-normal sigma 0.5: about 12 % clipped
    assert len(set(prompts)) > 30


def test_preference_pairs_differ_in_a_learnable_way() -> None:
    for row in data.build_dataset("preference", size=32, seed=0, **LIMITS):
        assert set(row["chosen"].split()) <= set(data.GOOD_WORDS)
        assert set(row["rejected"].split()) <= set(data.BAD_WORDS)
        assert set(row["prompt"].split()) <= set(data.NEUTRAL_WORDS)
    assert not set(data.GOOD_WORDS) & set(data.BAD_WORDS)


def test_preference_completions_join_the_prompt_on_a_word_boundary() -> None:
    # TRL tokenizes prompt + chosen as one string: no word may fuse across the seam.
    tokenizer = build_tokenizer()
    row = data.build_dataset("preference", size=1, seed=0, **LIMITS)[0]
    joined = tokenizer(row["prompt"] + row["chosen"])["input_ids"]
    assert joined == tokenizer(row["prompt"])["input_ids"] + tokenizer(row["chosen"])["input_ids"]


def test_messages_are_a_user_then_an_assistant_turn() -> None:
    row = data.build_dataset("sft-messages", size=1, seed=0, **LIMITS)[0]
    assert [message["role"] for message in row["messages"]] == ["user", "assistant"]


def test_limits_too_tight_report_every_problem() -> None:
    with pytest.raises(ConfigError) as caught:
        data.build_dataset("sft-messages", size=0, seed=0, max_length=4, max_prompt_length=3)
    assert len(caught.value.errors) == 3


def test_unknown_dataset_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="unknown builtin dataset 'imdb'"):
        data.build_dataset("imdb", size=1, seed=0, **LIMITS)


@pytest.mark.parametrize("name", list(catalog.DATASETS))
def test_the_held_out_part_is_drawn_apart_from_the_training_part(name: str) -> None:
    """The held-out evaluation's examples: the same shapes and lengths' distribution, none of the training rows."""
    train = data.build_dataset(name, size=256, seed=3, **LIMITS).to_list()
    heldout = data.build_dataset(name, size=64, seed=3, part="heldout", **LIMITS).to_list()
    assert data.build_dataset(name, size=64, seed=3, part="heldout", **LIMITS).to_list() == heldout
    assert not [row for row in heldout if row in train]
    assert list(heldout[0]) == list(train[0])


def test_builtin_text_has_an_order_a_model_can_learn() -> None:
    """Most words are followed by one of four of their own: the next word depends on this one, so a model trained
    to predict another position (a lost or a doubled label shift) learns less than one predicting the next."""
    words = " ".join(row["text"] for row in data.build_dataset("sft", size=256, seed=0, **LIMITS)).split()
    successors = data._successors()
    followed = sum(nxt in successors[word] for word, nxt in itertools.pairwise(words)) / (len(words) - 1)
    skipped = sum(nxt in successors[word] for word, nxt in zip(words, words[2:], strict=False)) / (len(words) - 2)
    assert followed > 0.7  # 0.75 by construction, plus the chance draws that land on a successor
    assert skipped < 0.25  # two positions on, the pairs do not hold
