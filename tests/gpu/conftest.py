"""Tests marked `gpu` need a CUDA device: they run where one is (scripts/gpu-check.sh runs them), and are
skipped everywhere else, CI included, with the reason said."""

from __future__ import annotations

import pytest
import torch


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (run scripts/gpu-check.sh where one is)")
    for item in items:
        if item.get_closest_marker("gpu") is not None:
            item.add_marker(skip)
