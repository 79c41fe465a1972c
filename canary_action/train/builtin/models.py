"""Builtin architectures: the real models' configs with seeded random weights, so no download is needed.

`pythia-70m` and `smollm-135m` keep the published shapes, vocabulary size included: the builtin tokenizer
uses only the first ids, but the compute per step (and so what a perf canary measures) is the real model's.
The tiny ones are for CI. Configs are written with the names of the published config.json files
(`rotary_pct`, `rope_theta`, ...); transformers 5 folds those into `rope_parameters`, older releases keep
them as attributes, so one spelling serves the whole supported range.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from pathlib import Path
from typing import Any, Final, Literal

import torch
import transformers
from transformers import GPTNeoXConfig, LlamaConfig, PretrainedConfig, PreTrainedModel

from canary_action.errors import ConfigError
from canary_action.train.builtin import catalog
from canary_action.train.builtin.tokenizer import PAD_ID, VOCAB_SIZE, build_tokenizer

Task = Literal["causal-lm", "sequence-classification"]

#: Parameter counts published for the real models (Pythia paper, table 1; the SmolLM model card).
published_parameter_counts: Final[dict[str, int]] = {
    "pythia-70m": 70_426_624,
    "smollm-135m": 134_515_008,
}

# Written last into a materialized directory: its presence means every other file is complete.
_COMPLETE_MARKER: Final = ".canary-complete"

# Tiny models: a training step of 8 x 128 tokens takes tens of milliseconds on a CPU, yet they stay
# multi-layer and multi-head so that every code path of the real architecture runs.
_TINY: Final[dict[str, Any]] = {
    "num_hidden_layers": 2,
    "hidden_size": 64,
    "num_attention_heads": 4,
    "intermediate_size": 256,
    "max_position_embeddings": 1024,
    # The embedding rows stay a multiple of 64, as the real models' do (kernels prefer it).
    "vocab_size": -(-VOCAB_SIZE // 64) * 64,
}


def _pythia_70m() -> dict[str, Any]:
    # EleutherAI/pythia-70m config.json: every field that shapes the model, with its published value.
    return {
        "vocab_size": 50304,
        "hidden_size": 512,
        "num_hidden_layers": 6,
        "num_attention_heads": 8,
        "intermediate_size": 2048,
        "hidden_act": "gelu",
        "rotary_pct": 0.25,
        "rotary_emb_base": 10000,
        "max_position_embeddings": 2048,
        "initializer_range": 0.02,
        "layer_norm_eps": 1e-5,
        "use_cache": True,
        "use_parallel_residual": True,
        "tie_word_embeddings": False,
        "bos_token_id": 0,
        "eos_token_id": 0,
    }


def _smollm_135m() -> dict[str, Any]:
    # HuggingFaceTB/SmolLM-135M config.json: every field that shapes the model, with its published value.
    return {
        "vocab_size": 49152,
        "hidden_size": 576,
        "num_hidden_layers": 30,
        "num_attention_heads": 9,
        "num_key_value_heads": 3,
        "intermediate_size": 1536,
        "hidden_act": "silu",
        "max_position_embeddings": 2048,
        "initializer_range": 0.02,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "rope_scaling": None,
        "attention_bias": False,
        "attention_dropout": 0.0,
        "mlp_bias": False,
        "pretraining_tp": 1,
        "use_cache": True,
        "tie_word_embeddings": True,
        "bos_token_id": 0,
        "eos_token_id": 0,
    }


def build_config(name: str) -> PretrainedConfig:
    """The config of builtin model `name`, with the builtin tokenizer's pad id so padding is never guessed."""
    if name == "pythia-70m":
        config: PretrainedConfig = GPTNeoXConfig(**_pythia_70m())
    elif name == "smollm-135m":
        config = LlamaConfig(**_smollm_135m())
    elif name == "tiny-gpt-neox":
        config = GPTNeoXConfig(**{**_pythia_70m(), **_TINY})
    elif name == "tiny-llama":
        # Two key/value heads for four query heads: grouped-query attention, as in SmolLM.
        config = LlamaConfig(**{**_smollm_135m(), **_TINY, "num_key_value_heads": 2})
    else:
        raise ConfigError(
            f"unknown builtin model {name!r}",
            fix=f"use one of: {', '.join('builtin:' + known for known in catalog.MODELS)}",
        )
    config.pad_token_id = PAD_ID
    return config


def build_model(
    name: str,
    *,
    seed: int,
    dtype: torch.dtype,
    task: Task = "causal-lm",
    attn_implementation: str | None = None,
) -> PreTrainedModel:
    """Builtin model `name` with random weights: the same seed gives bit-identical weights.

    Weights are drawn in float32 and then cast, so a seed means the same starting point in every dtype.
    The global torch RNG is left as it was: building a model must not reseed the caller's training.
    """
    config = build_config(name)
    auto: type[transformers.AutoModelForCausalLM] | type[transformers.AutoModelForSequenceClassification]
    if task == "sequence-classification":
        config.num_labels = 1  # a scalar score: what TRL's reward models are
        auto = transformers.AutoModelForSequenceClassification
    else:
        auto = transformers.AutoModelForCausalLM
    # Models are built on the CPU, so only its generator is seeded (and restored afterwards); GPU RNGs are
    # left alone entirely.
    with torch.random.fork_rng(devices=[]):
        torch.default_generator.manual_seed(seed)
        model: PreTrainedModel = auto.from_config(  # type: ignore[no-untyped-call]  # unannotated upstream
            config, dtype=torch.float32, attn_implementation=attn_implementation
        )
    # nn.Module.to itself: transformers' override only adds guards for quantized models, and its @wraps
    # hides the signature from mypy. It casts in place.
    torch.nn.Module.to(model, dtype)
    model.config.dtype = dtype
    return model


def _cache_key(name: str, *, seed: int, task: Task) -> str:
    # The initialisation depends on the config, the tokenizer and the torch/transformers releases; a cached
    # copy from another release would silently start from other weights than a fresh build.
    fingerprint = hashlib.sha256(
        "\n".join(
            [
                build_config(name).to_json_string(),
                build_tokenizer().backend_tokenizer.to_str(),
                torch.__version__,
            ]
        ).encode()
    ).hexdigest()[:12]
    return f"{name}-{task}-seed{seed}-{fingerprint}"


def materialize(name: str, *, seed: int, directory: Path, task: Task = "causal-lm") -> Path:
    """Save builtin model `name` (safetensors, float32) with the builtin tokenizer under `directory`.

    TRL reloads some models by path (DPO, GRPO and RLOO build their reference model with
    `from_pretrained(model.config._name_or_path)`), which for an in-memory model would mean the Hub. A
    complete copy already there is reused, so a cached `directory` saves the build on the next run.
    """
    target = directory / _cache_key(name, seed=seed, task=task)
    if (target / _COMPLETE_MARKER).is_file():
        return target
    directory.mkdir(parents=True, exist_ok=True)
    # Written beside the target and renamed into place: a crash or a concurrent run never leaves a
    # half-written directory under the final name.
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=directory))
    try:
        build_model(name, seed=seed, dtype=torch.float32, task=task).save_pretrained(staging)
        build_tokenizer().save_pretrained(staging)
        (staging / _COMPLETE_MARKER).write_text(f"{name} seed={seed} task={task}\n")
        if (target / _COMPLETE_MARKER).is_file():
            return target  # a concurrent run finished first
        if target.exists():
            shutil.rmtree(target)  # the leftover of an interrupted run: it has no marker
        try:
            staging.rename(target)
        except OSError:
            if not (target / _COMPLETE_MARKER).is_file():  # not a concurrent run that finished first
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target
