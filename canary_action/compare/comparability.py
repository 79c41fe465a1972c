"""Which baselines can be compared with the current run, check group by check group.

A different GPU, dtype, batch or sequence shape, model, dataset, world size or distributed strategy changes
what a step costs: a slower step then says nothing about the pull request, so perf and memory checks become
`not-comparable` (naming the fields) instead of failing. Library versions are deliberately not on these lists:
a torch or TRL bump is often exactly the regression to catch, and it becomes evidence for the suspects instead.

Unknown is never equal: a field one run records and the other does not is a difference ("unknown"), unless
allowed with --allow-change. One exception, so that rlhf-canary 0.1 baselines stay usable: 0.1 files record no
fingerprints, no dtype and few config keys; those fields are taken as the current run's (the loader has checked
that model and dataset names match, and the result notes the assumption). The hardware is never assumed: it
decides what a step time means; 0.1's device is inferred from its environment or is unknown, and it recorded
no CPU at all.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Final

from canary_action.compare.result import Change
from canary_action.compare.runs import RunData

Getter = Callable[[RunData], object]
Fields = dict[str, Getter]


def _config(key: str) -> Getter:
    return lambda run: run.config.get(key)


def _gpus(run: RunData) -> object:
    return ", ".join(gpu.name for gpu in run.env.gpus) if run.env.gpus else None


def _device_kind(run: RunData) -> object:
    return run.device_kind


def _strategy(run: RunData) -> object:
    """ddp, fsdp, deepspeed; "none" for one process; unknown for a multi-process run that left no block."""
    if run.distributed is not None:
        return run.distributed.strategy
    return "none" if run.world_size == 1 else None


def _on_cpu(getter: Getter) -> Getter:
    """A CPU figure only matters when the run trained on the CPU."""
    return lambda run: getter(run) if _device_kind(run) == "cpu" else None


#: Fields that only mean something when another one is equal (the GPU model on two CUDA runs, the strategy of two
#: runs of one world size): when that one differs or is unknown, they would only restate it.
DEPENDS_ON: Final = {
    "gpu": "device", "gpu_count": "device", "cpu_model": "device", "cpu_count": "device", "strategy": "world_size",
}  # fmt: skip
UNKNOWN: Final = "unknown"
#: What a step runs on: never assumed, not even for a 0.1 baseline.
HARDWARE: Final = frozenset({"device", "gpu", "gpu_count", "cpu_model", "cpu_count"})

#: What a step costs: the hardware and the workload's shape.
PERF_FIELDS: Final[Fields] = {
    "device": _device_kind,
    "gpu": _gpus,
    "gpu_count": lambda run: run.env.gpu_count if run.env.gpus else None,
    "cpu_model": _on_cpu(lambda run: run.env.cpu_model),
    "cpu_count": _on_cpu(lambda run: run.env.cpu_count),
    "dtype": lambda run: run.workload.dtype if run.workload else None,
    "model": lambda run: run.workload.model_fingerprint if run.workload else None,
    "dataset": lambda run: run.workload.dataset_fingerprint if run.workload else None,
    # Processes in the job (1 when not distributed): more ranks, more and larger collectives per step.
    "world_size": lambda run: run.world_size,
    # ddp, fsdp, deepspeed: what each rank holds and exchanges. Single-process runs have none (not a difference).
    "strategy": _strategy,
    **{key: _config(key) for key in (
        "training_type", "batch_size", "gradient_accumulation_steps", "max_length", "max_prompt_length",
        "max_new_tokens", "num_generations", "packing",
    )},
}  # fmt: skip

#: What makes step N of two runs the same experiment: same model, data, order and batch shape (the effective
#: batch is the per-rank batch times the world size).
LEARNING_FIELDS: Final[Fields] = {
    "model": PERF_FIELDS["model"],
    "dataset": PERF_FIELDS["dataset"],
    "world_size": PERF_FIELDS["world_size"],
    **{key: _config(key) for key in (
        "training_type", "seed", "batch_size", "gradient_accumulation_steps", "max_length", "max_prompt_length",
    )},
}  # fmt: skip


@dataclass(frozen=True)
class Split:
    """The baselines a group of checks may use, and why the others were left out."""

    usable: list[RunData]
    differences: list[Change]
    """With no usable baseline: how the newest baseline differs (the reason for not-comparable)."""
    excluded: list[str]


def differences(
    fields: dict[str, Getter], baseline: RunData, current: RunData, allowed: Collection[str]
) -> list[Change]:
    """The fields whose values differ, a value only one run records included; allowed ones skipped."""
    changes = []
    for name, get in fields.items():
        before, after = get(baseline), get(current)
        if name in allowed or before == after or not _parent_equal(name, baseline, current):
            continue
        if before is None and name not in HARDWARE and baseline.format == "rlhf-canary-0.1":
            continue  # not in 0.1's format: assumed (see the module docstring; the result notes it)
        changes.append(Change(field=name, baseline=_text(before), current=_text(after)))
    return changes


def _parent_equal(name: str, baseline: RunData, current: RunData) -> bool:
    parent = DEPENDS_ON.get(name)
    if parent is None:
        return True
    before = PERF_FIELDS[parent](baseline)
    return before is not None and before == PERF_FIELDS[parent](current)


def split(fields: Fields, baselines: Sequence[RunData], current: RunData, allowed: Collection[str]) -> Split:
    usable, excluded = [], []
    first: list[Change] | None = None
    for run in baselines:
        found = differences(fields, run, current, allowed)
        if found:
            first = found if first is None else first
            excluded.append(f"{run.run_id}: {', '.join(c.field for c in found)} differ")
        else:
            usable.append(run)
    return Split(usable=usable, differences=[] if usable else (first or []), excluded=excluded)


def describe(changes: Sequence[Change]) -> str:
    return "; ".join(f"{c.field} {c.baseline} → {c.current}" for c in changes)


def _text(value: object) -> str:
    if value is None:
        return UNKNOWN
    text = value if isinstance(value, str) else json.dumps(value)
    return text if len(text) <= 24 else text[:12] + "…"  # fingerprints: a prefix is enough to see they differ
