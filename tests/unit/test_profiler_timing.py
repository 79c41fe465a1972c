"""The profiler's start, stop and trace export lie outside every measured step.

Exported inside a step's callbacks, the trace (20 s on a tiny 80-step DPO run) was timed into the first step
after the window, a steady step: the mean, tokens/s and the noise estimate took it. Here the callbacks run in
the Trainer's order on a clock that only the steps and the profiler move.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from transformers import DefaultFlowCallback, TrainerControl, TrainerState, TrainingArguments
from transformers.trainer_callback import CallbackHandler

from canary_action.config.blocks import ProfilerConfig
from canary_action.metrics import schema as m
from canary_action.metrics.summarize import summarize
from canary_action.train import callback, profiler
from canary_action.train.callback import MetricsCallback, RunRecord, StepCounters
from canary_action.train.probes import DeviceProbe
from canary_action.train.profiler import ProfilerWindow

STEP_S = 0.5
START_S = 3.0  # what starting the profiler takes
EXPORT_S = 20.0  # what stopping it and writing the trace take


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def perf_counter(self) -> float:
        return self.now


class SlowProfile:
    """torch.profiler.profile as ProfilerWindow drives it, spending the clock's time where the real one spends real
    time, so a test can see which step (if any) it lands in."""

    clock = Clock()
    started = 0

    def __init__(self, **_: Any) -> None:
        pass

    def start(self) -> None:
        SlowProfile.started += 1
        self.clock.now += START_S

    def stop(self) -> None:
        self.clock.now += EXPORT_S / 2

    def export_chrome_trace(self, path: str) -> None:
        Path(path).write_text('{"traceEvents": []}', encoding="utf-8")
        self.clock.now += EXPORT_S / 2

    def key_averages(self) -> list[Any]:
        return []


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fresh = Clock()
    monkeypatch.setattr(SlowProfile, "clock", fresh)
    monkeypatch.setattr(SlowProfile, "started", 0)
    monkeypatch.setattr(
        callback, "time", SimpleNamespace(perf_counter=fresh.perf_counter, process_time=fresh.perf_counter)
    )
    monkeypatch.setattr(profiler, "profile", SlowProfile)
    return fresh


def train(tmp_path: Path, clock: Clock, max_steps: int, start_step: int, num_steps: int) -> tuple[RunRecord, Any]:
    """The Trainer's loop around the callbacks, in the order run.py attaches them; each step takes STEP_S."""
    record = RunRecord()
    config = ProfilerConfig(enabled=True, start_step=start_step, num_steps=num_steps)
    window = ProfilerWindow(config, tmp_path / "traces", on_cuda=False)
    metrics = MetricsCallback(
        record,
        StepCounters(),
        DeviceProbe(torch.device("cpu")),
        stop_on_non_finite=True,
        timeout_s=3600.0,
        profiler_steps=window.steps,
        between=[window],
    )
    callbacks = [DefaultFlowCallback, metrics, window]
    handler = CallbackHandler(callbacks, None, None, None, None)  # type: ignore[no-untyped-call]
    args = TrainingArguments(output_dir=str(tmp_path / "trainer"), max_steps=max_steps, report_to=[])
    state, control = TrainerState(max_steps=max_steps), TrainerControl()
    control = handler.on_train_begin(args, state, control)
    while not control.should_training_stop:
        control = handler.on_step_begin(args, state, control)
        clock.now += STEP_S
        state.global_step += 1
        control = handler.on_step_end(args, state, control)
    handler.on_train_end(args, state, control)
    return record, window


@pytest.mark.parametrize(
    ("max_steps", "start_step", "num_steps"),
    [(12, 4, 3), (6, 4, 3), (4, 1, 2)],
    ids=["inside the run", "ending at the last step", "from step 1"],
)
def test_no_step_is_timed_with_the_profiler_start_or_its_export(
    tmp_path: Path, clock: Clock, max_steps: int, start_step: int, num_steps: int
) -> None:
    record, window = train(tmp_path, clock, max_steps, start_step, num_steps)
    series = record.series()
    assert series[m.STEP_TIME_S] == [STEP_S] * max_steps  # before the fix: the step after the window took 20.5 s
    last = start_step + num_steps - 1
    assert series[m.IN_PROFILER_WINDOW] == [1.0 if start_step <= s <= last else 0.0 for s in range(1, max_steps + 1)]
    assert window.summary is not None
    assert (window.summary.start_step, window.summary.end_step) == (start_step, last)
    assert json.loads(gzip.decompress(Path(window.summary.trace_path or "").read_bytes()))["traceEvents"] == []
    summary = summarize(series, warmup=0, profiler_steps=window.steps)
    assert summary.step_time_s is not None
    assert summary.step_time_s.mean == pytest.approx(STEP_S)


def test_a_window_the_run_stops_inside_keeps_the_steps_it_recorded(tmp_path: Path, clock: Clock) -> None:
    window = ProfilerWindow(ProfilerConfig(enabled=True, start_step=4, num_steps=3), tmp_path, on_cuda=False)
    window.between_steps(3, going_on=True)
    window.between_steps(4, going_on=False)  # e.g. the timeout, at step 4's end
    assert window.summary is not None
    assert (window.summary.start_step, window.summary.end_step) == (4, 4)


def test_a_run_stopped_before_the_window_began_records_nothing(tmp_path: Path, clock: Clock) -> None:
    window = ProfilerWindow(ProfilerConfig(enabled=True, start_step=4, num_steps=3), tmp_path, on_cuda=False)
    window.between_steps(2, going_on=False)  # stopping: the profiler does not start for a step that never runs
    assert SlowProfile.started == 0
    window.between_steps(3, going_on=True)  # started; then a NaN in step 3's logs stops the run before step 4
    window.on_train_end(None, SimpleNamespace(global_step=3), None)  # type: ignore[arg-type]
    assert SlowProfile.started == 1
    assert window.summary is None
    assert window.shortfall(m.Status(state="stopped_early", reason="non_finite", step=3), 3) == (
        "profiler: nothing recorded: the run stopped early (non_finite) after 3 steps, before the profiler window "
        "(steps 4-6)"
    )
