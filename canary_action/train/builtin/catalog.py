"""Names of the builtin assets, with no heavy import, so that config validation can check them anywhere.

A config names them with the `builtin:` prefix: `model_name: builtin:pythia-70m`,
`dataset_name: builtin:preference`, `reward_funcs: [builtin:length]`.
"""

from __future__ import annotations

from typing import Final, Literal

PREFIX: Final = "builtin:"

DatasetKind = Literal["preference", "sft", "messages", "prompts"]

#: name -> what it is. Each architecture is the real model's config with random weights: same compute.
MODELS: Final[dict[str, str]] = {
    "pythia-70m": "GPT-NeoX shaped exactly like EleutherAI/pythia-70m (70,426,624 parameters)",
    "smollm-135m": "Llama shaped exactly like HuggingFaceTB/SmolLM-135M (134,515,008 parameters)",
    "tiny-gpt-neox": "a 2-layer GPT-NeoX for CI: seconds per run on a CPU",
    "tiny-llama": "a 2-layer Llama for CI: seconds per run on a CPU",
}

#: name -> the data shape it yields. Lengths are seeded and follow a controlled distribution.
DATASETS: Final[dict[str, DatasetKind]] = {
    "preference": "preference",  # prompt, chosen, rejected
    "sft": "sft",  # text
    "sft-messages": "messages",  # messages: [{role, content}, ...]
    "prompts": "prompts",  # prompt
}

#: name -> what it rewards. All are cheap, deterministic functions of the completion text.
REWARDS: Final[dict[str, str]] = {
    "length": "closeness of the completion's length to half of max_new_tokens",
    "unique-words": "share of distinct words in the completion",
    "keyword": "presence of the word 'canary' in the completion",
    "early-letters": "share of words starting with a-g: a dense signal a random-weight model can learn from",
}


def split(name: str) -> str | None:
    """`builtin:foo` -> `foo`; anything else -> None."""
    return name[len(PREFIX) :] if name.startswith(PREFIX) else None
