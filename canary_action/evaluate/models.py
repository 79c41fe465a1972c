"""The models the evaluator scores: each subject's starting model, built by the canary's own loaders from its
config, and that model with a snapshot's trained tensors put in.

A snapshot comes from a training process the evaluator does not trust (a pull request's side): it is read without
following links (files.opened_inside), as tensors only (safetensors), and refused unless every tensor names a
parameter of the rebuilt model, with its shape, in a floating dtype, as many as its snapshot.json says — all
checked from the file's header before a tensor is read.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

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


_FLOATS: Final = frozenset({"F64", "F32", "F16", "BF16", "F8_E4M3", "F8_E5M2"})


def read_meta(run_dir: Path, name: str) -> SnapshotMeta:
    """A snapshot's snapshot.json, read without following links. Raises SnapshotRefused."""
    try:
        text = read_inside(run_dir, [SNAPSHOT_DIR, name, META_FILE], limit=MAX_META_BYTES)
        return SnapshotMeta.model_validate_json(text)
    except (OSError, FileRefusedError, ValidationError, ValueError) as error:
        raise SnapshotRefused(f"snapshot {name} cannot be read: {str(error)[:300]}") from error


def load_trained(run_dir: Path, name: str, meta: SnapshotMeta, start: PreTrainedModel) -> PreTrainedModel:
    """A copy of the starting model, its LoRA structure rebuilt, with the snapshot's tensors in place.

    Every tensor's name, shape and dtype is checked against the rebuilt model from the file's header before any
    tensor is read, and each is then read straight into its parameter: what a snapshot declares cannot make this
    process allocate more than the model it rebuilds. Raises SnapshotRefused.
    """
    model: Any = copy.deepcopy(start)
    if meta.lora is not None:
        from peft import LoraConfig, get_peft_model

        try:
            model = get_peft_model(model, LoraConfig(**meta.lora.model_dump(), task_type="CAUSAL_LM"))
        except Exception as error:  # PEFT's refusals (targets the model lacks...) have no common base
            raise SnapshotRefused(
                f"snapshot {name}: its LoRA structure cannot be rebuilt: {str(error)[:300]}"
            ) from error
    parameters = dict(model.named_parameters())
    try:
        # /proc/self/fd/N: the descriptor's own file (opened without following a link), however its path changes.
        with (
            opened_inside(run_dir, [SNAPSHOT_DIR, name, WEIGHTS_FILE], limit=MAX_SNAPSHOT_BYTES) as fd,
            safe_open(f"/proc/self/fd/{fd}", framework="pt") as stored,
        ):
            keys = list(stored.keys())  # not a dict
            if len(keys) != meta.num_tensors:
                raise SnapshotRefused(f"snapshot {name} holds {len(keys)} tensors, not the {meta.num_tensors} it names")
            for key in keys:
                _check(name, key, stored.get_slice(key), parameters)
            with torch.no_grad():
                for key in keys:
                    target = parameters[key]
                    target.copy_(stored.get_tensor(key).to(target.dtype))
    except SnapshotRefused:
        raise
    except (OSError, FileRefusedError, ValueError) as error:
        raise SnapshotRefused(f"snapshot {name} cannot be read: {str(error)[:300]}") from error
    except Exception as error:  # safetensors' own errors (a corrupt header) have no common base
        raise SnapshotRefused(f"snapshot {name} is not a safetensors file: {str(error)[:300]}") from error
    return model.eval()  # type: ignore[no-any-return]


def _check(name: str, key: str, stored: Any, parameters: dict[str, torch.nn.Parameter]) -> None:
    """A tensor the header declares, against the rebuilt model's parameter of that name."""
    if key not in parameters:
        raise SnapshotRefused(f"snapshot {name} names a tensor the rebuilt model lacks: {key[:200]}")
    if stored.get_dtype() not in _FLOATS:
        raise SnapshotRefused(f"snapshot {name}: {key[:200]} is {stored.get_dtype()}, not a floating-point tensor")
    shape, wanted = tuple(stored.get_shape()), tuple(parameters[key].shape)
    if shape != wanted:
        raise SnapshotRefused(f"snapshot {name}: {key[:200]} is {shape} in the snapshot, {wanted} rebuilt")
