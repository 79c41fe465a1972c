"""Real tiny trainings on CPU, through the same run path `canary run` uses.

Each test trains a builtin tiny model for a few steps; together they take about a minute on two cores.
"""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path
from typing import Any

import pytest
import torch

from canary_action.config.load import LoadedConfig, load_config
from canary_action.errors import ConfigError, TrainingError
from canary_action.metrics import schema as m
from canary_action.metrics.io import read_metrics
from canary_action.train import custom
from canary_action.train.callback import MetricsCallback, RunRecord, StepCounters
from canary_action.train.instrument import instrument
from canary_action.train.launch import run_canary
from canary_action.train.placement import TORCH_DEFAULT_THREADS, resolve_placement
from canary_action.train.probes import DeviceProbe
from canary_action.train.run import family_module
from canary_action.train.setup import TrainingSetup
from tests.factories import NO_HELDOUT

pytestmark = pytest.mark.training

CONFIGS = Path(__file__).parents[2] / "configs" / "tiny"
TRL_FAMILIES = ["sft", "dpo", "dpo-lora", "dpo-factory", "grpo", "rloo", "custom"]


def tiny(name: str, *overrides: str, heldout: bool = False) -> LoadedConfig:
    """A tiny config; without the held-out evaluation (a process of its own: seconds) unless `heldout`."""
    return load_config(CONFIGS / f"{name}.yaml", [*overrides, *(() if heldout else NO_HELDOUT[1:])])


def finite(values: list[float | None]) -> list[float]:
    return [v for v in values if v is not None and math.isfinite(v)]


@pytest.mark.parametrize("name", TRL_FAMILIES)
def test_family_runs_and_records_every_step(name: str, tmp_path: Path) -> None:
    outcome = run_canary(tiny(name, "max_steps=4", heldout=True), tmp_path)

    metrics = read_metrics(outcome.metrics_path)  # what was written validates against the schema
    assert metrics.status.state == "completed"
    series = metrics.series
    assert series[m.STEP] == [1.0, 2.0, 3.0, 4.0]
    for column in (m.STEP_TIME_S, m.NUM_TOKENS, m.NUM_SAMPLES, m.LOSS, m.DATA_WAIT_S, m.HOST_RSS_MIB):
        assert len(finite(series[column])) == 4, column
    assert all(t > 0 for t in finite(series[m.STEP_TIME_S]))
    assert all(n > 0 for n in finite(series[m.NUM_TOKENS]))
    assert metrics.workload is not None
    assert metrics.workload.num_trainable_parameters > 0
    assert metrics.workload.dtype == "fp32"  # auto on CPU: never a silent fp16
    assert metrics.summary is not None
    assert metrics.summary.tokens_per_s is not None
    # Issue 32: the trainable weights' checksum every step, and the held-out evaluation of each family (LoRA's
    # adapters rebuilt on the loaded model; a custom factory on context.model) by a fresh process.
    assert len(finite(series[m.WEIGHT_SUM])) == 4
    assert len(set(finite(series[m.WEIGHT_SUM]))) == 4  # the weights moved every step
    assert metrics.heldout is not None
    metric = {"sft": "next_token", "custom": "next_token"}.get(name, "preference" if "dpo" in name else None)
    assert (metrics.heldout.status, metrics.heldout.metric) == ("evaluated", metric or "reward"), metrics.heldout
    assert [p.step for p in metrics.heldout.points] == [0, 4]
    assert metrics.heldout.evaluated_in == "fresh_process"
    assert not (outcome.metrics_path.parent / "heldout").exists()


def test_a_dpo_trainer_factory_gets_the_dpo_keys_and_counts_as_dpo(tmp_path: Path) -> None:
    """Issue 35: a team's own DPO trainer under training_type dpo: beta and the DPO keys reach its arguments, a
    preference pair is one sample (as TRL's DPO canary counts it), and its callbacks are attached once."""
    config = tiny("dpo-factory", "max_steps=2", "beta=0.3", "loss_type=hinge").config
    placement = resolve_placement(config)
    record, counters, probe = RunRecord(), StepCounters(), DeviceProbe(placement.device)
    callback = MetricsCallback(record, counters, probe, stop_on_non_finite=True, timeout_s=600)
    setup: TrainingSetup[Any] = TrainingSetup(config, placement, tmp_path, [callback], [])
    trainer = custom.build_trainer(setup)
    assert type(trainer).__name__ == "TeamDPOTrainer"
    assert (trainer.args.beta, trainer.args.loss_type) == (0.3, ["hinge"])
    assert trainer.ref_model is not None  # the factory's own frozen reference, not TRL's
    assert sum(c is callback for c in trainer.callback_handler.callbacks) == 1
    instrument(trainer, counters, probe, family_module("dpo").count_batch, None)
    trainer.train()
    assert record.num_steps == 2
    samples = [row[m.NUM_SAMPLES] for row in record.rows]
    assert samples == [config.batch_size * config.gradient_accumulation_steps] * 2, samples


def test_a_trainer_factory_is_refused_where_the_type_has_none() -> None:
    with pytest.raises(ConfigError) as refused:
        tiny("ppo", "trainer_factory=canary_action.train.builtin.example_factory:build_trainer")
    assert (
        "`trainer_factory` — it applies to training_type sft, dpo, grpo, rloo, custom only" in refused.value.errors[0]
    )


def test_algorithm_metrics_are_recorded_per_step(tmp_path: Path) -> None:
    dpo = run_canary(tiny("dpo", "max_steps=3"), tmp_path / "dpo").metrics
    for key in ("rewards/chosen", "rewards/margins", "rewards/accuracies"):
        assert len(dpo.series[m.ALGO_PREFIX + key]) == 3
    grpo = run_canary(tiny("grpo", "max_steps=2"), tmp_path / "grpo").metrics
    for key in ("reward", "kl", "completions/mean_length"):
        assert len(finite(grpo.series[m.ALGO_PREFIX + key])) == 2, key
    assert len(finite(grpo.series[m.GENERATION_S])) == 2  # generation is timed on its own


def test_token_counts_are_measured_from_batches(tmp_path: Path) -> None:
    """Our per-step count agrees with TRL's own running count of the tokens it trained on."""
    metrics = run_canary(tiny("sft", "max_steps=5"), tmp_path).metrics
    ours = [int(n or 0) for n in metrics.series[m.NUM_TOKENS]]
    trl_running = [int(n or 0) for n in metrics.series[m.ALGO_PREFIX + "num_tokens"]]
    assert [sum(ours[: i + 1]) for i in range(5)] == trl_running
    assert len(set(ours)) > 1  # varying lengths: not a constant derived from the config


@pytest.mark.parametrize("name", ["sft", "dpo", "grpo", "rloo"])
def test_training_changes_the_trained_parameters(name: str, tmp_path: Path) -> None:
    config = tiny(name, "max_steps=2", "learning_rate=0.01", "warmup_steps=0").config
    family = family_module(config.training_type)
    placement = resolve_placement(config)
    record, counters, probe = RunRecord(), StepCounters(), DeviceProbe(placement.device)
    callback = MetricsCallback(record, counters, probe, stop_on_non_finite=True, timeout_s=600)
    setup: TrainingSetup[Any] = TrainingSetup(config, placement, tmp_path, [callback], [])
    trainer = family.build_trainer(setup)
    instrument(trainer, counters, probe, family.count_batch, None)
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters() if p.requires_grad}

    trainer.train()

    after = dict(trainer.model.named_parameters())
    changed = [n for n, p in before.items() if not torch.equal(p, after[n].detach())]
    # Full fine-tuning moves most tensors.
    assert len(changed) >= len(before) // 2
    assert record.num_steps == 2


def test_same_seed_same_losses_other_seed_other_losses(tmp_path: Path) -> None:
    first = run_canary(tiny("sft", "max_steps=4"), tmp_path / "a").metrics.series
    second = run_canary(tiny("sft", "max_steps=4"), tmp_path / "b").metrics.series
    other = run_canary(tiny("sft", "max_steps=4", "seed=7"), tmp_path / "c").metrics.series
    assert first[m.LOSS] == second[m.LOSS]
    assert first[m.WEIGHT_SUM] == second[m.WEIGHT_SUM]  # bitwise: what a pair's numerics check relies on
    assert first[m.LOSS] != other[m.LOSS]


@pytest.mark.parametrize("name", ["sft", "dpo"])
def test_planted_nan_stops_the_run_at_that_step(name: str, tmp_path: Path) -> None:
    outcome = run_canary(tiny(name, "max_steps=8", "fault_injection.nan_loss_at_step=3"), tmp_path)

    metrics = read_metrics(outcome.metrics_path)
    assert metrics.status.state == "stopped_early"
    assert (metrics.status.reason, metrics.status.step) == ("non_finite", 3)
    assert metrics.series[m.STEP] == [1.0, 2.0, 3.0]
    assert metrics.series[m.LOSS][2] is None
    assert metrics.series[m.LOSS][1] is not None
    first = metrics.stability.non_finite[0]
    assert first.step == 3
    assert first.value == "nan"
    sources = {event.source for event in metrics.stability.non_finite}
    assert "grad" in sources  # NaN flowed through backward: the gradient check names parameters
    grad_event = next(e for e in metrics.stability.non_finite if e.source == "grad")
    assert grad_event.parameters
    assert metrics.stability.num_nan_steps == 1


def test_planted_gradient_spikes_show_at_their_steps_on_any_machine(tmp_path: Path) -> None:
    """The loss scaled 20-fold at the planted steps: the pre-clip grad norm jumps there whatever the CPU's
    numerics (a raised learning rate spiked on one CPU build and not on another), and the run trains on."""
    overrides = ("max_steps=30", "fault_injection.grad_spike_at_steps=[15, 25]")
    metrics = read_metrics(run_canary(tiny("sft", *overrides), tmp_path).metrics_path)
    assert [s.step for s in metrics.stability.grad_norm_spikes] == [15, 25]
    norms = metrics.series[m.GRAD_NORM]
    assert norms[14] is not None
    assert norms[13] is not None
    assert norms[14] > 10 * norms[13]
    assert metrics.status.state == "completed"


def test_nan_is_recorded_but_not_fatal_when_stopping_is_off(tmp_path: Path) -> None:
    overrides = ("max_steps=5", "fault_injection.nan_loss_at_step=2", "stop_on_non_finite=false")
    metrics = run_canary(tiny("sft", *overrides), tmp_path).metrics
    assert metrics.status.state == "completed"
    assert metrics.series[m.STEP] == [1.0, 2.0, 3.0, 4.0, 5.0]
    assert 2 in {e.step for e in metrics.stability.non_finite}


def test_crash_mid_run_leaves_valid_metrics_with_status_failed(tmp_path: Path) -> None:
    with pytest.raises(TrainingError, match="PlantedCrashError during train"):
        run_canary(tiny("dpo", "max_steps=8", "fault_injection.crash_at_step=4"), tmp_path)

    [metrics_path] = tmp_path.glob("*/metrics.json")
    metrics = read_metrics(metrics_path)
    assert metrics.status.state == "failed"
    assert (metrics.status.stage, metrics.status.step) == ("train", 4)
    assert metrics.status.exception_type == "PlantedCrashError"
    assert metrics.series[m.STEP] == [1.0, 2.0, 3.0]  # the three steps measured before the crash survive
    assert (metrics_path.parent / "error.log").read_text().startswith("Traceback")


def test_timeout_stops_the_run_early(tmp_path: Path) -> None:
    metrics = run_canary(tiny("sft", "max_steps=50", "timeout_minutes=0.0001"), tmp_path).metrics
    assert metrics.status.state == "stopped_early"
    assert metrics.status.reason == "timeout"
    assert metrics.status.step == 1


def test_profiler_window_writes_a_trace_and_is_excluded_from_summaries(tmp_path: Path) -> None:
    overrides = ("max_steps=7", "profiler.enabled=true", "profiler.start_step=3", "profiler.num_steps=3")
    outcome = run_canary(tiny("sft", *overrides), tmp_path)
    metrics = outcome.metrics
    assert not [notice for notice in metrics.notices if notice.startswith("profiler: ")]  # recorded whole
    assert not (outcome.metrics_path.parent / "trainer").exists()  # the Trainer's empty output_dir is removed

    assert metrics.series[m.IN_PROFILER_WINDOW] == [0.0, 0.0, 1.0, 1.0, 1.0, 0.0, 0.0]
    # Stopping the profiler and exporting its trace (about 1 s here, against steps of 0.05-0.1 s) happen between
    # steps: step 6, the first after the window and a steady step, is not charged with them.
    times = finite(metrics.series[m.STEP_TIME_S])
    assert times[5] < max(times[1], times[6]) + 0.4, times
    assert metrics.profiler is not None
    assert (metrics.profiler.start_step, metrics.profiler.end_step) == (3, 5)
    assert metrics.profiler.top_ops
    assert metrics.profiler.cpu_time_total_ms > 0
    trace_path = Path(metrics.profiler.trace_path or "")
    assert trace_path.name == "trace.json.gz"  # compressed: a GPU run's trace is tens of MB of JSON
    trace = json.loads(gzip.decompress(trace_path.read_bytes()))
    assert trace["traceEvents"]
    assert not list(trace_path.parent.glob("*.tmp")), "the plain export is removed"
    assert metrics.summary is not None
    assert metrics.summary.num_steady_steps <= 7 - metrics.summary.warmup_steps - 3


def test_planted_slowdown_shows_in_step_time(tmp_path: Path) -> None:
    # A 0.5 s sleep against ~0.1 s steps: two CPU-bound neighbours moved the plain median by at most ~0.15 s here,
    # so the margin (0.3 s of the 0.5 s) holds on a loaded machine.
    base = run_canary(tiny("sft", "max_steps=6"), tmp_path / "a").metrics
    slow = run_canary(tiny("sft", "max_steps=6", "fault_injection.sleep_s_per_step=0.5"), tmp_path / "b").metrics
    assert base.summary is not None
    assert slow.summary is not None
    assert base.summary.step_time_s is not None
    assert slow.summary.step_time_s is not None
    assert slow.summary.step_time_s.median > base.summary.step_time_s.median + 0.3


def test_a_planted_slow_data_pipeline_is_timed_as_data_wait(tmp_path: Path) -> None:
    # 0.3 s per step while the batches are fetched: the step's data wait, not its compute (the root-cause
    # tutorial's dataloader bottleneck). A sleep holds on a loaded machine; the other work of a step does not.
    slow = run_canary(tiny("sft", "max_steps=6", "fault_injection.slow_data_s_per_step=0.3"), tmp_path / "a").metrics
    waits = [w for w in slow.series[m.DATA_WAIT_S] if w is not None]
    assert len(waits) == 6
    assert all(w >= 0.3 for w in waits), waits
    assert slow.summary is not None
    assert slow.summary.data_wait_share is not None
    assert slow.summary.data_wait_share > 0.3  # 0.3 s of at most ~0.7 s a step on a loaded machine


def test_cpu_threads_are_set_and_recorded(tmp_path: Path) -> None:
    default = run_canary(tiny("sft", "max_steps=2"), tmp_path / "a").metrics
    assert default.env.torch_threads == 1  # cpu_threads: 1 unless the config says otherwise
    assert torch.get_num_threads() == 1
    two = run_canary(tiny("sft", "max_steps=2", "cpu_threads=2"), tmp_path / "b").metrics
    assert two.env.torch_threads == 2
    auto = run_canary(tiny("sft", "max_steps=2", "cpu_threads=auto"), tmp_path / "c").metrics
    assert auto.env.torch_threads == TORCH_DEFAULT_THREADS
