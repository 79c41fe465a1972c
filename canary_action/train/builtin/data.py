"""Builtin synthetic datasets: seeded, with token lengths drawn from a controlled distribution.

Every word is one token of the builtin tokenizer, so a planned length is an exact token count.

Length model. Each length is a log-normal draw with median half its budget and sigma 0.5 (about 12 % of
draws reach twice the median), rounded and clipped to [1, cap]: most sequences are well inside the limits
and a few are at them, as in real data. Budgets and caps, with the tokens each format adds:

- preference: prompt budget = cap = max_prompt_length. Each completion (chosen, rejected drawn apart):
  budget max_length - max_prompt_length - 1, cap max_length - prompt - 1 (TRL's DPO appends one EOS).
- sft: text budget = cap = max_length - 1 (TRL's SFT appends one EOS).
- sft-messages: user budget = cap = max_prompt_length - 3 (the user marker, its EOS and the assistant
  marker of the generation prompt); assistant budget max_length - max_prompt_length - 1, cap max_length -
  rendered prompt - 1 (the closing EOS).
- prompts: prompt budget = cap = max_prompt_length.

Content. Prompts, SFT text and user turns draw from the neutral words with Zipf weights (1/rank), so a
language model's loss falls quickly from log(vocab) towards the unigram entropy. Chosen answers use only
"good" words and rejected ones only "bad" words: a preference DPO learns within a few steps, so reward
accuracy above 0.5 is a meaningful learning check.
"""

from __future__ import annotations

import functools
import itertools
import math
import random
from typing import Final, Literal

import datasets

from canary_action.errors import ConfigError
from canary_action.train.builtin import catalog
from canary_action.train.builtin.tokenizer import WORDS

_SIGMA: Final = 0.5
# A fixed permutation (seed 0, whatever the dataset seed) spreads each pool over the whole vocabulary and
# sets the neutral words' frequency ranks, so no pool or frequent word shares a prefix by accident.
_PERMUTED: Final = tuple(random.Random(0).sample(WORDS, len(WORDS)))
GOOD_WORDS: Final = _PERMUTED[:128]
BAD_WORDS: Final = _PERMUTED[128:256]
NEUTRAL_WORDS: Final = _PERMUTED[256:]  # in Zipf rank order
_USER_TURN_TOKENS: Final = 3  # <|user|> ... <|eos|> <|assistant|>
Part = Literal["train", "heldout"]


@functools.cache
def _zipf_cum_weights() -> list[float]:
    return list(itertools.accumulate(1.0 / rank for rank in range(1, len(NEUTRAL_WORDS) + 1)))


#: Text has an order: most words are followed by one of a few words of their own (a fixed map, seed 0), the rest
#: by a word drawn on its own. A model that predicts the next token learns the pairs; one trained to predict
#: another position (a label shift lost, or done twice) cannot, so its held-out loss shows the slip.
_FOLLOW: Final = 0.75
_SUCCESSORS_PER_WORD: Final = 4


@functools.cache
def _successors() -> dict[str, tuple[str, ...]]:
    rng = random.Random(0)
    weights = _zipf_cum_weights()
    return {w: tuple(rng.choices(NEUTRAL_WORDS, cum_weights=weights, k=_SUCCESSORS_PER_WORD)) for w in NEUTRAL_WORDS}


def _draw(rng: random.Random, budget: int, cap: int) -> int:
    return min(cap, max(1, round(rng.lognormvariate(math.log(budget / 2), _SIGMA))))


def _kind(name: str) -> catalog.DatasetKind:
    if name not in catalog.DATASETS:
        raise ConfigError(
            f"unknown builtin dataset {name!r}",
            fix=f"use one of: {', '.join('builtin:' + known for known in catalog.DATASETS)}",
        )
    return catalog.DATASETS[name]


def _check_limits(kind: catalog.DatasetKind, *, size: int, max_length: int, max_prompt_length: int) -> None:
    min_prompt = _USER_TURN_TOKENS + 1 if kind == "messages" else 1
    problems = []
    if size < 1:
        problems.append(f"size is {size}; it must be at least 1")
    if max_prompt_length < min_prompt:
        problems.append(f"max_prompt_length is {max_prompt_length}; {kind} data needs at least {min_prompt}")
    if max_length - max_prompt_length < 2:
        problems.append(
            f"max_length ({max_length}) leaves no room for a completion after max_prompt_length "
            f"({max_prompt_length}) and the EOS: it must exceed it by 2 or more"
        )
    if problems:
        raise ConfigError(
            "the builtin dataset cannot fit these limits",
            errors=problems,
            fix="raise max_length or lower max_prompt_length",
        )


def _stream(name: str, seed: int, part: Part, what: str) -> random.Random:
    # The training part keeps the names it always had: its examples (and runs' dataset fingerprints) do not move.
    return random.Random(f"builtin:{name}/{seed}/{what}" if part == "train" else f"builtin:{name}/{seed}/{part}/{what}")


def length_profile(
    name: str, *, size: int, seed: int, max_length: int, max_prompt_length: int, part: Part = "train"
) -> list[dict[str, int]]:
    """Planned token counts of every example, per column, as the builtin tokenizer counts the column's text.

    sft-messages examples report `messages` (the rendered conversation) and `prompt` (the rendered user turn
    with the generation prompt). `build_dataset` with the same arguments produces exactly these lengths.
    """
    kind = _kind(name)
    _check_limits(kind, size=size, max_length=max_length, max_prompt_length=max_prompt_length)
    rng = _stream(name, seed, part, "lengths")
    completion_budget = max_length - max_prompt_length - 1
    plans: list[dict[str, int]] = []
    for _ in range(size):
        if kind == "preference":
            prompt = _draw(rng, max_prompt_length, max_prompt_length)
            cap = max_length - prompt - 1
            chosen = _draw(rng, completion_budget, cap)
            plans.append({"prompt": prompt, "chosen": chosen, "rejected": _draw(rng, completion_budget, cap)})
        elif kind == "sft":
            plans.append({"text": _draw(rng, max_length - 1, max_length - 1)})
        elif kind == "messages":
            user_budget = max_prompt_length - _USER_TURN_TOKENS
            prompt = _draw(rng, user_budget, user_budget) + _USER_TURN_TOKENS
            assistant = _draw(rng, completion_budget, max_length - prompt - 1)
            plans.append({"prompt": prompt, "messages": prompt + assistant + 1})
        else:
            plans.append({"prompt": _draw(rng, max_prompt_length, max_prompt_length)})
    return plans


def build_dataset(
    name: str, *, size: int, seed: int, max_length: int, max_prompt_length: int, part: Part = "train"
) -> datasets.Dataset:
    """Builtin dataset `name`: the same arguments give the same rows; another seed gives other rows, and the
    `heldout` part rows drawn apart from the training part's (same distribution, other draws): the held-out
    evaluation's examples.

    Columns: preference -> prompt, chosen, rejected (TRL's standard format: completions start with a space so
    that prompt + completion splits into the same words); sft -> text; sft-messages -> messages (a user
    turn, then an assistant turn); prompts -> prompt.
    """
    kind = _kind(name)
    plans = length_profile(
        name, size=size, seed=seed, max_length=max_length, max_prompt_length=max_prompt_length, part=part
    )
    rng = _stream(name, seed, part, "words")

    def neutral(num_words: int) -> str:
        weights = _zipf_cum_weights()
        words = rng.choices(NEUTRAL_WORDS, cum_weights=weights, k=1)
        while len(words) < num_words:
            follows = _successors().get(words[-1])
            if follows and rng.random() < _FOLLOW:
                words.append(rng.choice(follows))
            else:
                words += rng.choices(NEUTRAL_WORDS, cum_weights=weights, k=1)
        return " ".join(words)

    def uniform(pool: tuple[str, ...], num_words: int) -> str:
        return " ".join(rng.choices(pool, k=num_words))

    if kind == "preference":
        return datasets.Dataset.from_list(
            [
                {
                    "prompt": neutral(plan["prompt"]),
                    "chosen": " " + uniform(GOOD_WORDS, plan["chosen"]),
                    "rejected": " " + uniform(BAD_WORDS, plan["rejected"]),
                }
                for plan in plans
            ]
        )
    if kind == "sft":
        return datasets.Dataset.from_list([{"text": neutral(plan["text"])} for plan in plans])
    if kind == "messages":
        rows = []
        for plan in plans:
            user = neutral(plan["prompt"] - _USER_TURN_TOKENS)
            assistant = neutral(plan["messages"] - plan["prompt"] - 1)
            rows.append({"messages": [{"role": "user", "content": user}, {"role": "assistant", "content": assistant}]})
        return datasets.Dataset.from_list(rows)
    return datasets.Dataset.from_list([{"prompt": neutral(plan["prompt"])} for plan in plans])
