"""Builtin rewards: TRL's calling convention, values in [0, 1], and the ordering each one promises."""

from __future__ import annotations

import pickle
from typing import Any

import pytest

from canary_action.errors import ConfigError
from canary_action.train.builtin import catalog, rewards

# What TRL's GRPO and RLOO pass besides the completions.
TRL_KWARGS: dict[str, Any] = {
    "prompts": ["baba"] * 3,
    "completion_ids": [[6], [7], [8]],
    "trainer_state": None,
}


def _words(n: int) -> str:
    return " ".join(["bebe"] * n)


@pytest.mark.parametrize("name", list(catalog.REWARDS))
def test_every_catalog_reward_resolves_with_a_loggable_name(name: str) -> None:
    func = rewards.get(name)
    assert func.__name__ == name.replace("-", "_") + "_reward"  # logged as rewards/<name>/mean
    values = func(["baba bebe", "", "canary canary"], **TRL_KWARGS)
    assert len(values) == 3
    assert all(isinstance(v, float) and 0.0 <= v <= 1.0 for v in values)


def test_length_reward_peaks_at_the_target_and_falls_off_both_ways() -> None:
    values = rewards.length_reward([_words(n) for n in (0, 4, 8, 12, 16, 40)], target_words=8)
    assert values == [0.0, 0.5, 1.0, 0.5, 0.0, 0.0]


def test_length_target_is_half_of_max_new_tokens() -> None:
    func = rewards.get("length", max_new_tokens=64)
    assert func.__name__ == "length_reward"
    assert func([_words(32), _words(16)]) == [1.0, 0.5]
    assert rewards.get("length")([_words(rewards.DEFAULT_TARGET_WORDS)]) == [1.0]
    # GRPO may hand reward functions to worker processes: the configured one must pickle.
    assert pickle.loads(pickle.dumps(func))([_words(32)]) == [1.0]


def test_length_reward_refuses_an_empty_target() -> None:
    with pytest.raises(ConfigError):
        rewards.length_reward(["baba"], target_words=0)


def test_unique_words_reward_is_the_share_of_distinct_words() -> None:
    values = rewards.unique_words_reward(["baba bebe bibo bobo", "baba baba bebe bebe", "baba baba baba baba", ""])
    assert values == [1.0, 0.5, 0.25, 0.0]


def test_keyword_reward_wants_the_whole_word_in_any_case() -> None:
    values = rewards.keyword_reward(["baba canary", "The Canary, singing", "canaryish", "baba"])
    assert values == [1.0, 1.0, 0.0, 0.0]


def test_conversational_completions_score_like_their_text() -> None:
    texts = ["baba bebe canary", _words(32)]
    conversations = [[{"role": "assistant", "content": text}] for text in texts]
    for name in catalog.REWARDS:
        func = rewards.get(name)
        assert func(conversations, **TRL_KWARGS) == func(texts, **TRL_KWARGS)


def test_unknown_reward_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="unknown builtin reward 'accuracy'"):
        rewards.get("accuracy")
