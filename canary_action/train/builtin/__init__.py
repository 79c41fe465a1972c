"""Builtin offline assets: model architectures with random weights, an in-memory tokenizer, synthetic data."""
