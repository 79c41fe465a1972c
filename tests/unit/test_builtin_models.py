"""Builtin architectures: published shapes, seeded weights, and a directory TRL can reload."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import transformers

from canary_action.errors import ConfigError
from canary_action.train.builtin import catalog, models
from canary_action.train.builtin.tokenizer import EOS_ID, PAD_ID, build_tokenizer


def _on_meta(name: str) -> transformers.PreTrainedModel:
    # Shapes only: parameter counts depend on the config alone, and the meta device skips drawing
    # 135M random numbers.
    with torch.device("meta"):
        return transformers.AutoModelForCausalLM.from_config(models.build_config(name))


def _num_parameters(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())  # parameters() yields tied weights once


def _state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def _assert_identical(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert a.keys() == b.keys()
    for key, tensor in a.items():
        assert torch.equal(tensor, b[key]), key


@pytest.mark.parametrize("name", sorted(models.published_parameter_counts))
def test_real_shapes_have_the_published_parameter_count(name: str) -> None:
    assert _num_parameters(_on_meta(name)) == models.published_parameter_counts[name]


def test_pythia_70m_has_the_papers_non_embedding_count() -> None:
    model = _on_meta("pythia-70m")
    embeddings = model.get_input_embeddings().weight.numel() + model.get_output_embeddings().weight.numel()
    assert _num_parameters(model) - embeddings == 18_915_328


def test_pythia_70m_rotates_a_quarter_of_each_head() -> None:
    config = models.build_config("pythia-70m")
    assert config.rope_parameters["partial_rotary_factor"] == 0.25
    assert config.rope_parameters["rope_theta"] == 10000
    assert (config.use_parallel_residual, config.tie_word_embeddings) == (True, False)
    inv_freq = _on_meta("pythia-70m").gpt_neox.rotary_emb.inv_freq
    assert inv_freq.numel() * 2 == 512 // 8 // 4  # head dim 64, a quarter of it rotated


def test_smollm_135m_is_grouped_query_with_tied_embeddings() -> None:
    config = models.build_config("smollm-135m")
    assert (config.num_attention_heads, config.num_key_value_heads, config.head_dim) == (9, 3, 64)
    assert config.rope_parameters["rope_theta"] == 10000.0
    model = _on_meta("smollm-135m")
    assert model.get_output_embeddings().weight is model.get_input_embeddings().weight


@pytest.mark.parametrize("name", list(catalog.MODELS))
def test_every_builtin_model_agrees_with_the_builtin_tokenizer(name: str) -> None:
    config = models.build_config(name)
    assert (config.eos_token_id, config.pad_token_id) == (EOS_ID, PAD_ID)
    assert config.vocab_size >= len(build_tokenizer())


@pytest.mark.parametrize("name", ["tiny-gpt-neox", "tiny-llama"])
def test_tiny_models_are_tiny_and_cover_the_whole_vocabulary(name: str) -> None:
    config = models.build_config(name)
    assert (config.num_hidden_layers, config.hidden_size, config.num_attention_heads) == (2, 64, 4)
    assert config.vocab_size % 64 == 0
    assert config.vocab_size - 64 < len(build_tokenizer()) <= config.vocab_size
    assert config.max_position_embeddings == 1024
    assert _num_parameters(_on_meta(name)) < 1_000_000


def test_unknown_model_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="unknown builtin model 'gpt-5'"):
        models.build_config("gpt-5")


@pytest.mark.parametrize("name", ["tiny-gpt-neox", "tiny-llama"])
def test_same_seed_same_weights_other_seed_other_weights(name: str) -> None:
    first = _state(models.build_model(name, seed=7, dtype=torch.float32))
    _assert_identical(first, _state(models.build_model(name, seed=7, dtype=torch.float32)))
    other = _state(models.build_model(name, seed=8, dtype=torch.float32))
    assert not torch.equal(first["lm_head.weight"], other["lm_head.weight"])


def test_building_leaves_the_global_rng_alone() -> None:
    torch.manual_seed(123)
    expected = torch.rand(4)
    torch.manual_seed(123)
    models.build_model("tiny-llama", seed=0, dtype=torch.float32)
    assert torch.equal(torch.rand(4), expected)


def test_a_seed_is_the_same_starting_point_in_every_dtype() -> None:
    full = models.build_model("tiny-llama", seed=3, dtype=torch.float32)
    half = models.build_model("tiny-llama", seed=3, dtype=torch.bfloat16)
    assert half.dtype == half.config.dtype == torch.bfloat16
    for (key, a), b in zip(full.state_dict().items(), half.state_dict().values(), strict=True):
        assert torch.equal(a.to(torch.bfloat16), b), key


def test_attention_implementation_is_passed_through() -> None:
    model = models.build_model("tiny-gpt-neox", seed=0, dtype=torch.float32, attn_implementation="eager")
    assert model.config._attn_implementation == "eager"


@pytest.mark.parametrize("name", ["tiny-gpt-neox", "tiny-llama"])
def test_sequence_classifier_scores_padded_batches(name: str) -> None:
    model = models.build_model(name, seed=0, dtype=torch.float32, task="sequence-classification")
    assert isinstance(model, transformers.PreTrainedModel)
    assert (model.config.num_labels, model.config.pad_token_id) == (1, PAD_ID)
    batch = build_tokenizer()(["baba bebe bibe", "baba"], padding=True, return_tensors="pt")
    with torch.no_grad():
        scores = model(**batch).logits
    assert scores.shape == (2, 1)
    assert torch.isfinite(scores).all()


def test_materialize_round_trips_weights_and_tokenizer(tmp_path: Path) -> None:
    path = models.materialize("tiny-llama", seed=5, directory=tmp_path)
    assert path.parent == tmp_path
    assert all(part in path.name for part in ("tiny-llama", "seed5", "causal-lm"))
    assert (path / "model.safetensors").is_file()
    loaded = transformers.AutoModelForCausalLM.from_pretrained(path)
    _assert_identical(_state(models.build_model("tiny-llama", seed=5, dtype=torch.float32)), _state(loaded))
    tokenizer = transformers.AutoTokenizer.from_pretrained(path)
    builtin = build_tokenizer()
    assert tokenizer.get_vocab() == builtin.get_vocab()
    assert tokenizer.chat_template == builtin.chat_template
    assert (tokenizer.pad_token_id, tokenizer.eos_token_id) == (PAD_ID, EOS_ID)


def test_materialize_reuses_a_complete_copy(tmp_path: Path) -> None:
    path = models.materialize("tiny-gpt-neox", seed=1, directory=tmp_path)
    written = (path / "model.safetensors").stat().st_mtime_ns
    assert models.materialize("tiny-gpt-neox", seed=1, directory=tmp_path) == path
    assert (path / "model.safetensors").stat().st_mtime_ns == written
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no staging directory left behind


def test_materialize_replaces_an_interrupted_copy(tmp_path: Path) -> None:
    path = models.materialize("tiny-gpt-neox", seed=2, directory=tmp_path)
    marker = next(p for p in path.iterdir() if p.name.startswith(".") and p.is_file())
    marker.unlink()
    (path / "model.safetensors").write_bytes(b"truncated")
    assert models.materialize("tiny-gpt-neox", seed=2, directory=tmp_path) == path
    transformers.AutoModelForCausalLM.from_pretrained(path)  # loads again


def test_materialize_keys_on_name_seed_and_task(tmp_path: Path) -> None:
    paths = {
        models.materialize("tiny-llama", seed=0, directory=tmp_path),
        models.materialize("tiny-llama", seed=1, directory=tmp_path),
        models.materialize("tiny-gpt-neox", seed=0, directory=tmp_path),
        models.materialize("tiny-llama", seed=0, directory=tmp_path, task="sequence-classification"),
    }
    assert len(paths) == 4
    classifier = transformers.AutoModelForSequenceClassification.from_pretrained(
        models.materialize("tiny-llama", seed=0, directory=tmp_path, task="sequence-classification")
    )
    assert classifier.config.num_labels == 1
