"""Overhead of the canary's measurement (MetricsCallback + trainer instrumentation) on a TRL job.

A/B interleaved in one process: the same DPO job is built from scratch (same seed, same data) with and
without the canary attached, alternating A, B, A, B, ..., so slow drifts of a shared machine hit both arms
alike. Each job's time is its `trainer.train()` wall time minus the first step, divided by its steps.

    python benchmarks/overhead.py [--config configs/tiny/dpo.yaml] [--pairs 8] [--steps 40]

Prints one JSON object: per-arm medians and the median of the paired ratios with a bootstrap interval.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

from transformers import TrainerCallback
from transformers.trainer_callback import PrinterCallback

from canary_action.config.load import load_config
from canary_action.train.callback import MetricsCallback, RunRecord, StepCounters
from canary_action.train.gpu_time import clock_for
from canary_action.train.instrument import instrument
from canary_action.train.placement import resolve_placement
from canary_action.train.probes import DeviceProbe
from canary_action.train.run import family_module
from canary_action.train.setup import TrainingSetup


class _StepClock(TrainerCallback):
    """The only thing both arms carry: step-end timestamps, to drop the first step (compile, warm-up)."""

    def __init__(self) -> None:
        self.ends: list[float] = []

    def on_step_end(self, *args: Any, **kwargs: Any) -> None:
        self.ends.append(time.perf_counter())


def one_job(config_path: Path, steps: int, with_canary: bool, overrides: Sequence[str] = ()) -> float:
    config = load_config(config_path, [f"max_steps={steps}", *overrides]).config
    family = family_module(config.training_type)
    placement = resolve_placement(config)
    steps_clock = _StepClock()
    record, counters, probe = RunRecord(), StepCounters(), DeviceProbe(placement.device)
    callbacks: list[Any] = [steps_clock]
    if with_canary:  # as run.py attaches it: the GPU's clock too, on CUDA with gpu_time on
        clock = clock_for(enabled=config.gpu_time, on_cuda=placement.on_cuda, chunk_steps=None, skipped=None)
        metrics = MetricsCallback(record, counters, probe, stop_on_non_finite=True, timeout_s=3600, clock=clock)
        callbacks.insert(0, metrics)
    with TemporaryDirectory() as run_dir:
        trainer = family.build_trainer(TrainingSetup(config, placement, Path(run_dir), callbacks, []))
        trainer.remove_callback(PrinterCallback)
        if with_canary:
            instrument(trainer, counters, probe, family.count_batch, None)
        trainer.train()
    probe.synchronize()
    return (steps_clock.ends[-1] - steps_clock.ends[0]) / (len(steps_clock.ends) - 1)


def bootstrap_median(values: list[float], rounds: int = 5000, seed: int = 0) -> tuple[float, float]:
    rng = random.Random(seed)
    medians = sorted(statistics.median(rng.choices(values, k=len(values))) for _ in range(rounds))
    return medians[int(0.025 * rounds)], medians[int(0.975 * rounds)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=Path("configs/tiny/dpo.yaml"))
    parser.add_argument("--pairs", type=int, default=8)
    parser.add_argument("--steps", type=int, default=40)
    overrides = "config overrides as canary run's --set (gpu_time=false: without the GPU clock)"
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE", help=overrides)
    args = parser.parse_args()
    one_job(args.config, 5, True, args.overrides)  # warm caches (builtin model copy, imports) outside the measurement
    plain, canary = [], []
    for _ in range(args.pairs):
        plain.append(one_job(args.config, args.steps, False, args.overrides))
        canary.append(one_job(args.config, args.steps, True, args.overrides))
    ratios = [c / p for c, p in zip(canary, plain, strict=True)]
    low, high = bootstrap_median(ratios)
    print(json.dumps({
        "config": str(args.config),
        "device": str(resolve_placement(load_config(args.config).config).device),
        "pairs": args.pairs,
        "overrides": args.overrides,
        "steps_per_job": args.steps,
        "plain_step_s_median": statistics.median(plain),
        "canary_step_s_median": statistics.median(canary),
        "overhead_pct_median": 100 * (statistics.median(ratios) - 1),
        "overhead_pct_95ci": [100 * (low - 1), 100 * (high - 1)],
    }, indent=2))  # fmt: skip


if __name__ == "__main__":
    main()
