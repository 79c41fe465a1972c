"""The builtin tokenizer: a fixed word vocabulary, one token per word, a chat template TRL can use."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys

import jinja2
import pytest

from canary_action.train.builtin import tokenizer as builtin
from canary_action.train.builtin.tokenizer import build_tokenizer

_FINGERPRINT = (
    "import hashlib; from canary_action.train.builtin.tokenizer import build_tokenizer; "
    "print(hashlib.sha256(build_tokenizer().backend_tokenizer.to_str().encode()).hexdigest())"
)


def test_same_vocabulary_every_call_in_fresh_objects() -> None:
    first, second = build_tokenizer(), build_tokenizer()
    assert first is not second
    assert first.get_vocab() == second.get_vocab()
    first.padding_side = "left"  # what TRL does to the instance it is given
    first.chat_template = None
    assert second.padding_side == "right"
    assert second.chat_template == builtin.CHAT_TEMPLATE


def test_same_vocabulary_in_another_process() -> None:
    # The trainer runs in Rust with per-process hash seeds: the ids must not depend on them.
    here = hashlib.sha256(build_tokenizer().backend_tokenizer.to_str().encode()).hexdigest()
    there = subprocess.run(
        [sys.executable, "-c", _FINGERPRINT],
        env={**os.environ, "PYTHONHASHSEED": "12345"},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert there == here


def test_vocabulary_and_special_tokens() -> None:
    tokenizer = build_tokenizer()
    assert len(tokenizer) == builtin.VOCAB_SIZE
    assert (tokenizer.eos_token, tokenizer.eos_token_id) == (builtin.EOS, builtin.EOS_ID)
    assert (tokenizer.pad_token, tokenizer.pad_token_id) == (builtin.PAD, builtin.PAD_ID)
    assert tokenizer.bos_token is None  # like Pythia and SmolLM: nothing is prepended
    assert set(builtin.SPECIAL_TOKENS) <= set(tokenizer.all_special_tokens)
    assert len(set(builtin.WORDS)) == len(builtin.WORDS)
    assert builtin.KEYWORD not in builtin.WORDS


def test_every_word_is_exactly_one_token_and_nothing_is_added() -> None:
    tokenizer = build_tokenizer()
    words = [*builtin.WORDS, builtin.KEYWORD]
    ids = tokenizer(" ".join(words))["input_ids"]
    assert len(ids) == len(words)
    assert tokenizer.unk_token_id not in ids
    assert tokenizer.decode(ids) == " ".join(words)


def test_unknown_text_becomes_unk_not_an_error() -> None:
    tokenizer = build_tokenizer()
    assert tokenizer("baba Hello, world")["input_ids"][1:] == [tokenizer.unk_token_id] * 3


def test_chat_template_renders_turns_and_the_generation_prompt() -> None:
    tokenizer = build_tokenizer()
    messages = [
        {"role": "system", "content": "dada"},
        {"role": "user", "content": "baba bebe"},
        {"role": "assistant", "content": "bibo"},
    ]
    rendered = tokenizer.apply_chat_template(messages, tokenize=False)
    assert rendered == "<|system|>\ndada<|eos|><|user|>\nbaba bebe<|eos|><|assistant|>\nbibo<|eos|>"
    prompt = tokenizer.apply_chat_template(messages[:2], tokenize=False, add_generation_prompt=True)
    assert prompt == "<|system|>\ndada<|eos|><|user|>\nbaba bebe<|eos|><|assistant|>\n"
    assert rendered.startswith(prompt)  # TRL splits prompt and completion on this prefix


def test_chat_template_marks_the_assistant_tokens() -> None:
    tokenizer = build_tokenizer()
    messages = [{"role": "user", "content": "baba bebe"}, {"role": "assistant", "content": "bibo bobo"}]
    out = tokenizer.apply_chat_template(messages, return_dict=True, return_assistant_tokens_mask=True)
    # <|user|> baba bebe <|eos|> <|assistant|> | bibo bobo <|eos|>
    assert out["assistant_masks"] == [0, 0, 0, 0, 0, 1, 1, 1]


def test_chat_template_rejects_unknown_roles() -> None:
    with pytest.raises(jinja2.TemplateError, match="not tool"):
        build_tokenizer().apply_chat_template([{"role": "tool", "content": "baba"}], tokenize=False)
