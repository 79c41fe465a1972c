"""Builders of valid, realistic test data, so that a test states only what matters to it.

    make_metrics()                                  # a healthy 30-step SFT run on one H100, bf16
    make_metrics(step_time_s=0.11)                  # the same run, 10 % slower
    make_metrics(num_steps=50, seed=3)              # another sample of the noise
    make_metrics(series={"train/loss": [...]})      # replace (or add) a column; None drops it
    make_metrics(run={"git_sha": None})             # a dict merges into that part of the document
    make_metrics(status=Status(state="failed", stage="train", message="boom"))   # a model replaces it

The summary and stability sections are derived from the final series (as the real writer does), unless
given. Deterministic: the same arguments give the same Metrics.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import math
import random
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import BaseModel

import canary_action
from canary_action.fingerprint import fingerprint_hash
from canary_action.metrics import schema
from canary_action.metrics.schema import EnvFingerprint, GPUInfo, Metrics, Stability
from canary_action.metrics.summarize import find_divergence, find_grad_norm_spikes, summarize

TOKENS_PER_STEP = 8 * 512  # 8 sequences of up to 512 tokens
#: The held-out evaluation starts a process of its own (seconds of imports) beside every run and pair. Tests that
#: judge something else turn it off, on the command line or in a config's text; the tests of the evaluation, and
#: the end-to-end ones, keep it.
NO_HELDOUT = ("--set", "heldout.enabled=false")
NO_HELDOUT_YAML = "heldout:\n  enabled: false\n"
NO_HELDOUT_BLOCK: dict[str, Any] = {"heldout": {"enabled": False}}


def make_series(
    num_steps: int = 30,
    *,
    step_time_s: float = 0.1,
    first_step_time_s: float = 2.5,
    jitter: float = 0.02,
    seed: int = 0,
) -> dict[str, list[float | None]]:
    """Per-step columns of a healthy run: a slow first step, steady jittery steps, a loss that learns."""
    rng = random.Random(seed)
    rows = range(1, num_steps + 1)
    times = [first_step_time_s if s == 1 else step_time_s * (1 + rng.gauss(0, jitter)) for s in rows]
    tokens = [float(TOKENS_PER_STEP - rng.randrange(0, 600)) for _ in rows]  # padding varies per batch
    return {
        schema.STEP: [float(s) for s in rows],
        schema.STEP_TIME_S: _column(times),
        schema.DATA_WAIT_S: [0.02 * t for t in times],
        schema.NUM_TOKENS: _column(tokens),
        schema.NUM_SAMPLES: [8.0 for _ in rows],
        schema.LOSS: [2.5 * math.exp(-s / 15) + 1.2 + rng.gauss(0, 0.03) for s in rows],
        schema.GRAD_NORM: [1.5 * math.exp(-s / 20) + 0.5 + abs(rng.gauss(0, 0.05)) for s in rows],
        schema.LEARNING_RATE: [5e-5 * min(1.0, s / 5) for s in rows],  # linear warm-up over 5 steps
        schema.PEAK_ALLOCATED_MIB: [1800.0 + (150.0 if s > 1 else 0.0) for s in rows],
        schema.PEAK_RESERVED_MIB: [2048.0 + (256.0 if s > 1 else 0.0) for s in rows],
        schema.HOST_RSS_MIB: [3100.0 + 0.5 * s for s in rows],
        schema.GPU_UTILIZATION_PCT: [min(100.0, 88.0 + rng.gauss(0, 3)) for _ in rows],
    }


def make_env(**overrides: Any) -> EnvFingerprint:
    """One H100 with the pinned stack; the fingerprint hash follows the fields."""
    fields: dict[str, Any] = {
        "python": "3.11.9",
        "platform": "Linux-6.8.0-1015-aws-x86_64-with-glibc2.35",
        "cpu_model": "AMD EPYC 7R13 Processor",
        "cpu_count": 16,
        "canary": canary_action.__version__,
        "torch": "2.13.0+cu128",
        "cuda": "12.8",
        "cudnn": "9.10.2",
        "transformers": "5.23.0",
        "trl": "1.16.0",
        "peft": "0.21.2",
        "accelerate": "1.15.0",
        "datasets": "5.2.0",
        "tokenizers": "0.23.3",
        "nccl": "2.27.3",
        "gpu_driver": "570.133.20",
        "gpu_count": 1,
        "gpus": [GPUInfo(index=0, name="NVIDIA H100 80GB HBM3", memory_total_mib=81559.0, uuid="GPU-0e4f")],
        **overrides,
        "fingerprint_hash": "",
    }
    env = EnvFingerprint.model_validate(fields)
    return env.model_copy(update={"fingerprint_hash": overrides.get("fingerprint_hash") or fingerprint_hash(env)})


def make_metrics(
    *,
    num_steps: int = 30,
    step_time_s: float = 0.1,
    seed: int = 0,
    series: Mapping[str, Sequence[float | None] | None] | None = None,
    **overrides: Any,
) -> Metrics:
    """A valid metrics.json document as a Metrics object. Keyword overrides name top-level Metrics fields."""
    columns: dict[str, list[float | None]] = make_series(num_steps, step_time_s=step_time_s, seed=seed)
    for name, values in (series or {}).items():
        if values is None:
            columns.pop(name, None)
        else:
            columns[name] = list(values)
    config = {"name": "sft-smoke", "training_type": "sft", "model_name": "builtin:pythia-70m",
              "dataset_name": "builtin:sft", "max_steps": num_steps, "seed": seed}  # fmt: skip
    duration = sum(t for t in columns.get(schema.STEP_TIME_S, []) if t is not None)
    started = datetime(2026, 1, 5, 12, 0, 0, tzinfo=UTC)
    finished = started + timedelta(seconds=round(duration, 3))
    doc: dict[str, Any] = {
        "run": {
            "run_id": f"sft-smoke-{seed}",
            "config_name": "sft-smoke",
            "config_hash": hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest(),
            "canary_version": canary_action.__version__,
            "git_sha": "3f2a9c1d4e5b6a7980f1e2d3c4b5a69788776655",
            "git_dirty": False,
            "started_at": _iso(started),
            "finished_at": _iso(finished),
            "duration_s": duration,
        },
        "env": make_env(),
        "workload": {
            "device": "cuda:0",
            "dtype": "bf16",
            "model_name": "builtin:pythia-70m",
            "model_fingerprint": hashlib.sha256(b"pythia-70m").hexdigest(),
            "num_parameters": 70_426_624,
            "num_trainable_parameters": 70_426_624,
            "dataset_name": "builtin:sft",
            "dataset_fingerprint": hashlib.sha256(f"sft-{seed}".encode()).hexdigest(),
            "num_examples": 8 * num_steps,
        },
        "config": config,
        "series": columns,
        "summary": summarize(columns, warmup="auto", profiler_steps=None),
        "stability": _stability(columns),
        "status": {"state": "completed"},
    }
    for key, value in overrides.items():
        if key not in Metrics.model_fields or key == "series":
            known = [*Metrics.model_fields, "num_steps", "step_time_s", "seed"]
            close = difflib.get_close_matches(key, known, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise TypeError(f"make_metrics() got an unknown override {key!r}{hint}")
        base = doc.get(key)
        if key == "env" and isinstance(value, Mapping):
            doc[key] = make_env(**value)  # rebuilt, so that the hash still matches the fields
        elif isinstance(value, Mapping) and isinstance(base, Mapping | BaseModel):
            doc[key] = {**(base.model_dump() if isinstance(base, BaseModel) else base), **value}
        else:
            doc[key] = value
    return Metrics.model_validate(doc)


def _column(values: Sequence[float]) -> list[float | None]:
    return list(values)


def _iso(moment: datetime) -> str:
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _stability(cols: Mapping[str, Sequence[float | None]]) -> Stability:
    steps = cols.get(schema.STEP)
    divergence = find_divergence(cols.get(schema.LOSS, []), steps)
    return Stability(
        loss_diverged=divergence is not None,
        divergence_step=divergence,
        grad_norm_spikes=find_grad_norm_spikes(cols.get(schema.GRAD_NORM, []), steps),
    )
