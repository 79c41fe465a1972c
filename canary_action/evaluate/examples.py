"""The held-out examples, tokenized by the canary's own rules, whatever the training pipeline does.

A pull request can change how its own training tokenizes, masks, truncates or formats (a chat template dropped,
the EOS left off, truncation on the wrong side): the evaluation does not follow it. Its rules, per metric:

- next_token: text + EOS; chat messages through the tokenizer's chat template; prompt + completion (+ EOS), scored
  on the completion only; preference data: prompt + chosen (+ EOS). Every other token is scored, predicted from
  the tokens before it. Sequences longer than max_length keep their start.
- preference: prompt (its last max_prompt_length tokens) and each answer + EOS, cut to max_length; without a prompt
  column, the token prefix chosen and rejected share is the prompt (hh-rlhf's shape, as TRL reads it).
- reward: the prompt's last max_prompt_length tokens; the completion is sampled from a fixed seed (scoring.py says
  why not greedily).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from datasets import Dataset
from transformers import PreTrainedTokenizerBase

from canary_action.config.schema import CommonConfig
from canary_action.errors import ConfigError
from canary_action.evaluate.plan import metric_for
from canary_action.metrics.heldout import HeldoutMetric
from canary_action.train.data import load_heldout


@dataclass(frozen=True)
class Sequence:
    """One next-token example: the ids, and which positions are scored (predicted from the ids before them)."""

    ids: list[int]
    scored: list[bool]


@dataclass(frozen=True)
class PreferencePair:
    prompt: list[int]
    chosen: list[int]
    rejected: list[int]


@dataclass(frozen=True)
class HeldoutSet:
    metric: HeldoutMetric
    dataset: str
    fingerprint: str
    sequences: list[Sequence]
    pairs: list[PreferencePair]
    prompts: list[list[int]]
    prompt_texts: list[Any]
    columns: dict[str, list[Any]]
    """The rows' other columns, handed to reward functions as TRL does."""

    @property
    def size(self) -> int:
        return len(self.sequences) or len(self.pairs) or len(self.prompts)


def heldout_set(config: CommonConfig, tokenizer: PreTrainedTokenizerBase) -> HeldoutSet:
    rows, dataset = load_heldout(config, tokenizer)
    metric = metric_for(config) or _metric_of_columns(rows.column_names)
    columns = set(rows.column_names)
    sequences: list[Sequence] = []
    pairs: list[PreferencePair] = []
    prompts: list[list[int]] = []
    prompt_texts: list[Any] = []
    if metric == "next_token":
        sequences = [_sequence(row, tokenizer, config.max_length) for row in rows]
    elif metric == "preference":
        _require(columns, {"chosen", "rejected"}, metric)
        pairs = [_pair(row, tokenizer, config) for row in rows]
    else:
        _require(columns, {"prompt"}, metric)
        prompt_texts = list(rows["prompt"])
        prompts = [_ids(tokenizer, _prompt_text(p, tokenizer))[-config.max_prompt_length :] for p in prompt_texts]
    other = {c: list(rows[c]) for c in rows.column_names if c != "prompt"} if metric == "reward" else {}
    return HeldoutSet(
        metric=metric, dataset=dataset, fingerprint=_fingerprint(config, metric, rows), sequences=sequences,
        pairs=pairs, prompts=prompts, prompt_texts=prompt_texts, columns=other,
    )  # fmt: skip


def _metric_of_columns(columns: list[str]) -> HeldoutMetric:
    if {"chosen", "rejected"} <= set(columns):
        return "preference"
    if {"text"} & set(columns) or {"messages"} & set(columns) or {"prompt", "completion"} <= set(columns):
        return "next_token"
    raise ConfigError(
        f"heldout.metric auto cannot tell what to score from the held-out data's columns ({', '.join(columns)})",
        fix="set heldout.metric (next_token or preference), or name an evaluation set (heldout.dataset_name)",
    )


def _require(columns: set[str], needed: set[str], metric: str) -> None:
    if not needed <= columns:
        raise ConfigError(
            f"heldout.metric {metric} needs the columns {', '.join(sorted(needed))}; the held-out data has "
            f"{', '.join(sorted(columns))}",
            fix="name an evaluation set of that shape (heldout.dataset_name), or another heldout.metric",
        )


def _ids(tokenizer: PreTrainedTokenizerBase, text: str) -> list[int]:
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def _eos(tokenizer: PreTrainedTokenizerBase) -> list[int]:
    return [tokenizer.eos_token_id] if tokenizer.eos_token_id is not None else []


def _prompt_text(prompt: Any, tokenizer: PreTrainedTokenizerBase) -> str:
    if isinstance(prompt, str):
        return prompt
    return str(tokenizer.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True))


def _sequence(row: dict[str, Any], tokenizer: PreTrainedTokenizerBase, max_length: int) -> Sequence:
    if "messages" in row:
        rendered: Any = tokenizer.apply_chat_template(row["messages"], tokenize=True, return_dict=True)
        ids = list(rendered["input_ids"])
        scored = [True] * len(ids)
    elif "prompt" in row and "completion" in row:
        head, tail = _ids(tokenizer, _prompt_text(row["prompt"], tokenizer)), _ids(tokenizer, row["completion"])
        ids, scored = head + tail + _eos(tokenizer), [False] * len(head) + [True] * (len(tail) + len(_eos(tokenizer)))
    else:
        text = row["text"] if "text" in row else (row.get("prompt") or "") + row["chosen"]
        ids = _ids(tokenizer, text) + _eos(tokenizer)
        scored = [True] * len(ids)
    scored[0] = False  # the first token has nothing before it to be predicted from
    return Sequence(ids=ids[:max_length], scored=scored[:max_length])


def _pair(row: dict[str, Any], tokenizer: PreTrainedTokenizerBase, config: CommonConfig) -> PreferencePair:
    if not all(isinstance(row.get(c, ""), str) for c in ("prompt", "chosen", "rejected")):
        raise ConfigError(
            "heldout.metric preference reads plain-text prompt/chosen/rejected columns; these are conversations",
            fix="name a plain-text evaluation set (heldout.dataset_name), or set heldout.metric: next_token",
        )
    chosen, rejected = _ids(tokenizer, row["chosen"]), _ids(tokenizer, row["rejected"])
    if "prompt" in row:
        prompt = _ids(tokenizer, row["prompt"])
    else:
        shared = next((i for i, (a, b) in enumerate(zip(chosen, rejected, strict=False)) if a != b), 0)
        prompt, chosen, rejected = chosen[:shared], chosen[shared:], rejected[shared:]
    prompt = prompt[-config.max_prompt_length :]
    room = max(1, config.max_length - len(prompt))
    eos = _eos(tokenizer)
    return PreferencePair(prompt=prompt, chosen=(chosen + eos)[:room], rejected=(rejected + eos)[:room])


def _fingerprint(config: CommonConfig, metric: HeldoutMetric, rows: Dataset) -> str:
    """Equal when two evaluations score the same examples the same way."""
    settings: dict[str, Any] = {"metric": metric, "max_length": config.max_length,
                                "max_prompt_length": config.max_prompt_length}  # fmt: skip
    if metric == "reward":
        sampling = ("reward_funcs", "reward_model", "max_new_tokens", "temperature")
        settings |= {key: getattr(config, key, None) for key in sampling}
    digest = hashlib.sha256(json.dumps(settings, sort_keys=True).encode())
    for row in rows:
        digest.update(json.dumps(row, sort_keys=True, default=str).encode())
    return digest.hexdigest()
