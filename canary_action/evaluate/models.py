"""The models the evaluator scores: each subject's starting model, built by the canary's own loaders from its
config, and that model with a snapshot's trained tensors put in.

A snapshot comes from a training process the evaluator does not trust (a pull request's side): it is read without
following links (files.opened_inside), as tensors only (safetensors), and refused unless every tensor names a
parameter of the rebuilt model, with its shape, in a floating dtype, as many as its snapshot.json says.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from pydantic import ValidationError
from safetensors import safe_open
from transformers import PreTrainedModel

from canary_action.config.schema import CommonConfig
from canary_action.evaluate.plan import (
    MAX_META_BYTES,
    MAX_SNAPSHOT_BYTES,
    META_FILE,
    SNAPSHOT_DIR,
    WEIGHTS_FILE,
    SnapshotMeta,
)
from canary_action.files import FileRefusedError, opened_inside, read_inside
from canary_action.train.builtin import catalog
from canary_action.train.placement import Placement
from canary_action.train.setup import TrainingSetup


class SnapshotRefused(Exception):  # noqa: N818  # a reason said in the evaluation, not a crash
    """A snapshot the evaluator will not score: the message says why."""


@dataclass
class Loader:
    """Loads models as training did (TrainingSetup.load_model: builtin weights from the seed, the Hub's from its
    cache), in float32 on `device`, keeping each starting model for the next subject that starts from it."""

    device: torch.device
    scratch: Path
    _starts: dict[tuple[Any, ...], PreTrainedModel]

    def setup(self, config: CommonConfig) -> TrainingSetup[CommonConfig]:
        return TrainingSetup(config, Placement(self.device, "fp32"), self.scratch, [], [])

    def start(self, config: CommonConfig) -> PreTrainedModel:
        key = start_key(config)
        if key not in self._starts:
            model: Any = self.setup(config).load_model(config.model_name, task="causal-lm")
            self._starts[key] = model.to(self.device).eval()
        return self._starts[key]


def start_key(config: CommonConfig) -> tuple[Any, ...]:
    """What makes two configs start from the same weights: the model, its revision, and the seed a builtin model's
    weights are drawn from."""
    seed = config.seed if catalog.split(config.model_name) is not None else None
    return config.model_name, config.model_revision, config.attn_implementation, seed


def read_snapshot(run_dir: Path, name: str) -> tuple[SnapshotMeta, dict[str, torch.Tensor]]:
    """A snapshot's meta and tensors, read without following links. Raises SnapshotRefused."""
    try:
        meta = SnapshotMeta.model_validate_json(
            read_inside(run_dir, [SNAPSHOT_DIR, name, META_FILE], limit=MAX_META_BYTES)
        )
        # /proc/self/fd/N: the descriptor's own file (opened without following a link), however its path changes.
        with (
            opened_inside(run_dir, [SNAPSHOT_DIR, name, WEIGHTS_FILE], limit=MAX_SNAPSHOT_BYTES) as fd,
            safe_open(f"/proc/self/fd/{fd}", framework="pt") as stored,
        ):
            tensors = {key: stored.get_tensor(key) for key in stored.keys()}  # noqa: SIM118  # not a dict
    except (OSError, FileRefusedError, ValidationError, ValueError) as error:
        raise SnapshotRefused(f"snapshot {name} cannot be read: {str(error)[:300]}") from error
    except Exception as error:  # safetensors' own errors (a corrupt header) have no common base
        raise SnapshotRefused(f"snapshot {name} is not a safetensors file: {str(error)[:300]}") from error
    if len(tensors) != meta.num_tensors or not all(t.is_floating_point() for t in tensors.values()):
        raise SnapshotRefused(f"snapshot {name} does not hold the {meta.num_tensors} floating-point tensors it names")
    return meta, tensors


def trained(start: PreTrainedModel, meta: SnapshotMeta, tensors: dict[str, torch.Tensor]) -> PreTrainedModel:
    """A copy of the starting model, its LoRA structure rebuilt, with the snapshot's tensors in place."""
    model: Any = copy.deepcopy(start)
    if meta.lora is not None:
        from peft import LoraConfig, get_peft_model

        model = get_peft_model(model, LoraConfig(**meta.lora.model_dump(), task_type="CAUSAL_LM"))
    parameters = dict(model.named_parameters())
    unknown = [name for name in tensors if name not in parameters]
    if unknown:
        raise SnapshotRefused(f"the snapshot names {len(unknown)} tensors the rebuilt model lacks, e.g. {unknown[0]}")
    with torch.no_grad():
        for name, tensor in tensors.items():
            target = parameters[name]
            if target.shape != tensor.shape:
                raise SnapshotRefused(f"{name}: {tuple(tensor.shape)} in the snapshot, {tuple(target.shape)} rebuilt")
            target.copy_(tensor.to(target.dtype))
    return model.eval()  # type: ignore[no-any-return]
