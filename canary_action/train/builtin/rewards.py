"""Builtin reward functions for GRPO and RLOO: cheap, deterministic functions of the completion text.

They follow TRL's signature, `fn(completions, **kwargs) -> list[float]`; TRL also passes prompts,
completion_ids, trainer_state and the dataset's other columns as keyword arguments, which these ignore.
Completions are strings for plain-text prompts and lists of messages for conversational ones. Words are
whitespace-separated, which for the builtin tokenizer means tokens. Every reward lies in [0, 1].
TRL logs `rewards/<__name__>/mean`, so each function carries a plain name; a configured length reward is a
`functools.partial` (it pickles, unlike a closure) that carries the name too.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from canary_action.errors import ConfigError
from canary_action.train.builtin import catalog
from canary_action.train.builtin.tokenizer import KEYWORD

RewardFunc = Callable[..., list[float]]
Completion = str | Sequence[Mapping[str, Any]]

#: Half of the configs' default max_new_tokens (64): the middle of the range a policy can reach, so the
#: reward can rise from both too-short and too-long samples.
DEFAULT_TARGET_WORDS: Final = 32
_KEYWORD_PATTERN: Final = re.compile(rf"\b{KEYWORD}\b", re.IGNORECASE)


def _text(completion: Completion) -> str:
    if isinstance(completion, str):
        return completion
    # Conversational: the generated turn(s); TRL hands back [{"role": "assistant", "content": ...}].
    return " ".join(str(message["content"]) for message in completion)


def length_reward(
    completions: Sequence[Completion], *, target_words: int = DEFAULT_TARGET_WORDS, **_kwargs: Any
) -> list[float]:
    """1 at exactly `target_words` words, falling linearly to 0 at no words or twice the target."""
    if target_words < 1:
        raise ConfigError(f"the length reward needs a target of at least 1 word, not {target_words}")
    return [max(0.0, 1.0 - abs(len(_text(c).split()) - target_words) / target_words) for c in completions]


def unique_words_reward(completions: Sequence[Completion], **_kwargs: Any) -> list[float]:
    """The share of distinct words (0 for an empty completion): rewards not repeating oneself."""
    rewards = []
    for completion in completions:
        words = _text(completion).split()
        rewards.append(len(set(words)) / len(words) if words else 0.0)
    return rewards


def keyword_reward(completions: Sequence[Completion], **_kwargs: Any) -> list[float]:
    """1 if the completion contains the word 'canary' (any case), else 0."""
    return [float(_KEYWORD_PATTERN.search(_text(c)) is not None) for c in completions]


#: Word initials the `early-letters` reward prefers: a quarter of the builtin vocabulary's initials.
EARLY_LETTERS: Final = frozenset("abcdefg")


def early_letters_reward(completions: Sequence[Completion], **_kwargs: Any) -> list[float]:
    """The share of words starting with a-g. Dense and learnable from random weights: a quarter of the builtin
    vocabulary qualifies, so sampled completions differ in reward from the first step (unlike length, which
    random policies max out, or the rare keyword) and GRPO/RLOO get non-zero advantages to learn from."""
    rewards = []
    for completion in completions:
        words = _text(completion).split()
        rewards.append(sum(word[0].lower() in EARLY_LETTERS for word in words) / len(words) if words else 0.0)
    return rewards


_BUILTIN: Final[dict[str, RewardFunc]] = {
    "length": length_reward,
    "unique-words": unique_words_reward,
    "keyword": keyword_reward,
    "early-letters": early_letters_reward,
}


def get(name: str, *, max_new_tokens: int | None = None) -> RewardFunc:
    """The builtin reward `name` (without the `builtin:` prefix).

    `max_new_tokens`, when given, sets the length reward's target to half of it, as the catalog promises;
    without it the target is `DEFAULT_TARGET_WORDS`.
    """
    if name not in catalog.REWARDS or name not in _BUILTIN:
        raise ConfigError(
            f"unknown builtin reward {name!r}",
            fix=f"use one of: {', '.join('builtin:' + known for known in catalog.REWARDS)}",
        )
    if name == "length" and max_new_tokens is not None:
        configured = functools.partial(length_reward, target_words=max(1, max_new_tokens // 2))
        return functools.update_wrapper(configured, length_reward)
    return _BUILTIN[name]
