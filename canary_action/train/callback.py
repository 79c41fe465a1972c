"""MetricsCallback: one row of measurements per optimizer step, attached to any transformers Trainer.

Timing: a step lasts from the end of the previous optimizer step to the end of this one, so it holds
everything the loop does for that step (fetching batches, forward/backward, the optimizer, logging). On CUDA
the callback synchronises at each step end, so the time is the device's time, not the launch queue's.
Work that must not be timed (the profiler's start, stop and trace export: `BetweenSteps`) runs between a
step's end and the next step's start, so it lands in no step at all.

Order inside the Trainer loop (transformers >= 4.49): get_batch_samples -> on_step_begin -> micro-batches ->
clip -> on_pre_optimizer_step -> optimizer.step -> zero_grad -> on_step_end -> log (on_log, same step).
So gradients are checked in on_pre_optimizer_step, and the logged loss of step k arrives after step k ends.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import torch
from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments

from canary_action import interrupts
from canary_action.metrics import schema as m
from canary_action.train import process_counters
from canary_action.train.gpu_time import KernelClock
from canary_action.train.probes import DeviceProbe

# Keys of the Trainer's own logs that are not per-step training metrics.
_NOT_PER_STEP = frozenset({"epoch", "total_flos", "train_runtime", "train_samples_per_second",
                           "train_steps_per_second", "train_loss", "step"})  # fmt: skip
_RENAMED = {"loss": m.LOSS, "grad_norm": m.GRAD_NORM, "learning_rate": m.LEARNING_RATE}
_MAX_PARAMETER_NAMES = 20
# A non-finite value in these stops the run; elsewhere (a reward, a ratio) it is recorded, not fatal.
_STOP_KEYS = frozenset({"loss", "grad_norm", "loss/policy_avg", "loss/value_avg"})


class TrainingStopped(Exception):  # noqa: N818  # a signal, not an error
    """Ends a trainer loop that ignores `control.should_training_stop` (TRL's PPO). Not a failure."""


class StepGate(Protocol):
    """Decides, between optimizer steps, when this process may go on: a lockstep pair's turns (launch/pair.py).

    The time spent waiting in `wait` lies outside every measured step.
    """

    chunk_steps: int
    """Steps between two waits."""

    def wait(self, completed_steps: int) -> str | None:
        """Block until this process may train on; None to go on, or the reason to stop (e.g. "pair_ended")."""

    def columns(self) -> dict[str, float]:
        """Extra series columns for the step now running (the lockstep round)."""


class BetweenSteps(Protocol):
    """Work that must lie outside every measured step: the profiler's start, and its stop and trace export.

    Called once before step 1 (`completed_steps` 0) and after each step's row is recorded (and after the
    gate's wait), just before the next step's clock starts. `going_on` is False when the run stops there.
    """

    def between_steps(self, completed_steps: int, *, going_on: bool) -> None:
        """Do the work due after `completed_steps` optimizer steps."""


@dataclass
class StepCounters:
    """Filled by the trainer instrumentation (instrument.py) during a step, read and reset at its end."""

    num_tokens: int = 0
    num_samples: int = 0
    data_wait_s: float = 0.0
    generation_s: float | None = None

    def take(self) -> StepCounters:
        taken = StepCounters(self.num_tokens, self.num_samples, self.data_wait_s, self.generation_s)
        self.num_tokens, self.num_samples, self.data_wait_s, self.generation_s = 0, 0, 0.0, None
        return taken


@dataclass
class RunRecord:
    """Everything measured so far. Survives a crash: the runner writes it whatever happens."""

    rows: list[dict[str, float | None]] = field(default_factory=list)
    non_finite: list[m.NonFiniteEvent] = field(default_factory=list)
    stop_reason: str | None = None
    stop_step: int | None = None

    @property
    def num_steps(self) -> int:
        return len(self.rows)

    def series(self) -> dict[str, list[float | None]]:
        """Columnar view: one list per metric, None where a step did not record it."""
        names: dict[str, None] = {}
        for row in self.rows:
            names.update(dict.fromkeys(row))
        return {name: [row.get(name) for row in self.rows] for name in names}


class MetricsCallback(TrainerCallback):
    def __init__(
        self,
        record: RunRecord,
        counters: StepCounters,
        probe: DeviceProbe,
        *,
        stop_on_non_finite: bool,
        timeout_s: float,
        profiler_steps: range | None = None,
        gate: StepGate | None = None,
        between: Sequence[BetweenSteps] = (),
        clock: KernelClock | None = None,
    ) -> None:
        self.record = record
        self.counters = counters
        self.probe = probe
        self.stop_on_non_finite = stop_on_non_finite
        self.timeout_s = timeout_s
        self.profiler_steps = profiler_steps or range(0)
        self.gate = gate
        self.between = between
        self.clock = clock
        self._waited_s = 0.0
        self.first_step_at: float | None = None
        """When step 1's clock started (perf_counter): the end of the time before the first step."""
        self._train_start = 0.0
        self._last_step_end = 0.0
        self._last_step_cpu = 0.0
        self._last_counters: process_counters.Counters | None = None
        self._grad_norms: torch.Tensor | None = None
        self._grad_names: list[str] = []
        self._pending: dict[str, float | None] = {}

    # -- the loop -------------------------------------------------------------------------------------------
    def on_train_begin(self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **_: Any) -> None:
        self.probe.reset_peaks()
        if self.gate is not None and (reason := self.gate.wait(0)) is not None:
            self.record.stop_reason, self.record.stop_step = reason, 0
            raise TrainingStopped(reason)  # before any step: the loop would still run one
        self._train_start = time.perf_counter()
        self._run_between(0, going_on=True)
        if self.clock is not None:
            self.clock.before_step(1)
        self._last_step_end = self.first_step_at = time.perf_counter()
        self._last_step_cpu = time.process_time()
        self._last_counters = process_counters.read()

    def on_pre_optimizer_step(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        model: Any = None,
        **_: Any,
    ) -> None:
        # One fused norm per gradient, kept on the device: no sync here; read after the step-end sync.
        # A NaN or Inf anywhere in a gradient makes its norm NaN or Inf, so the norms are enough to find it.
        named = [(n, p.grad) for n, p in model.named_parameters() if p.grad is not None] if model is not None else []
        self._grad_names = [n for n, _ in named]
        grads = [g for _, g in named]
        self._grad_norms = torch.stack(torch._foreach_norm(grads)).float() if grads else None

    def on_step_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, model: Any = None, **_: Any
    ) -> None:
        interrupts.raise_if_pending()  # a Ctrl-C swallowed inside the step (a finaliser's) still ends the run
        self.probe.synchronize()
        now, cpu, process = time.perf_counter(), time.process_time(), process_counters.read()
        step = state.global_step
        counters = self.counters.take()
        row: dict[str, float | None] = {
            m.STEP: float(step),
            m.STEP_TIME_S: now - self._last_step_end,
            m.CPU_S: cpu - self._last_step_cpu,
            m.NUM_TOKENS: float(counters.num_tokens),
            m.NUM_SAMPLES: float(counters.num_samples),
            m.DATA_WAIT_S: counters.data_wait_s,
            m.IN_PROFILER_WINDOW: 1.0 if step in self.profiler_steps else 0.0,
        }
        if counters.generation_s is not None:
            row[m.GENERATION_S] = counters.generation_s
        if self._last_counters is not None:
            row.update(process_counters.step_columns(self._last_counters, process))
        if model is not None:
            row[m.WEIGHT_SUM] = weight_sum(model)
        row.update(self.probe.step_readings())
        if self.gate is not None:
            row.update(self.gate.columns())
        row.update(self._pending)
        self._pending = {}
        self.record.rows.append(row)
        self._check_gradients(step, control)
        if now - self._train_start - self._waited_s > self.timeout_s:
            self._stop(control, "timeout", step)
        if self.clock is not None:  # before the gate: a session closes before the side waits for its turn
            self.clock.after_step(step, self.record.rows, going_on=not control.should_training_stop)
        if self.gate is not None and not control.should_training_stop:
            paused = time.perf_counter()
            reason = self.gate.wait(step)
            self._waited_s += time.perf_counter() - paused
            if reason is not None:
                self._stop(control, reason, step)
        # After the gate, so a lockstep side does this work in its own turn, not over the other side's step.
        self._run_between(step, going_on=not control.should_training_stop)
        if self.clock is not None and not control.should_training_stop:
            self.clock.before_step(step + 1)
        # Measured after our own bookkeeping, so the callback's cost lands in the next step's time (and in
        # the overhead benchmark), not outside every measurement; after the gate and the work between steps,
        # so waiting and the profiler's start and export (seconds: the trace of every op) land in none.
        self._last_step_end, self._last_step_cpu = time.perf_counter(), time.process_time()
        self._last_counters = process_counters.read()

    def on_train_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **_: Any) -> None:
        if self.clock is not None:  # a stop decided after a step's end (a NaN in its logs): its steps are timed
            self.clock.close(self.record.rows)

    def on_log(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        logs: Any = None,
        **_: Any,
    ) -> None:
        # Trainer logs step k right after on_step_end(k); TRL's old PPO loop logs it just before. Either way the
        # values land in step k's row: directly, or through `_pending` until the row exists.
        step = state.global_step
        if not logs or step == 0 or step < self.record.num_steps:
            return  # nothing, or the end-of-training summary log
        has_row = bool(self.record.rows) and self.record.rows[-1][m.STEP] == step
        row = self.record.rows[-1] if has_row else self._pending
        for key, value in logs.items():
            if key in _NOT_PER_STEP or not isinstance(value, int | float) or isinstance(value, bool):
                continue
            row[_RENAMED.get(key, m.ALGO_PREFIX + key)] = float(value) if math.isfinite(value) else None
            if not math.isfinite(value):
                source: Literal["loss", "log"] = "loss" if key == "loss" else "log"
                self.record.non_finite.append(m.NonFiniteEvent(step=step, source=source, key=key, value=_kind(value)))
                if key in _STOP_KEYS:
                    self._stop(control, "non_finite", step)

    # -- helpers --------------------------------------------------------------------------------------------
    def _run_between(self, completed_steps: int, *, going_on: bool) -> None:
        for work in self.between:
            work.between_steps(completed_steps, going_on=going_on)

    def _check_gradients(self, step: int, control: TrainerControl) -> None:
        if self._grad_norms is None:
            return
        norms = self._grad_norms.cpu()
        self._grad_norms = None
        if bool(norms.isfinite().all()):
            return
        bad = [
            (name, norm) for name, norm in zip(self._grad_names, norms.tolist(), strict=True) if not math.isfinite(norm)
        ]
        self.record.non_finite.append(
            m.NonFiniteEvent(
                step=step,
                source="grad",
                key="gradients",
                value=_kind(bad[0][1]),
                parameters=[name for name, _ in bad[:_MAX_PARAMETER_NAMES]],
            )
        )
        self._stop(control, "non_finite", step)

    def _stop(self, control: TrainerControl, reason: str, step: int) -> None:
        if reason == "non_finite" and not self.stop_on_non_finite:
            return
        if self.record.stop_reason is None:
            self.record.stop_reason, self.record.stop_step = reason, step
        control.should_training_stop = True


def weight_sum(model: Any) -> float | None:
    """The checksum of the trainable weights (m.WEIGHT_SUM); None when it is not finite (JSON has no NaN).

    Read after the step's time was taken, with the rest of the callback's bookkeeping: one float32 sum per tensor
    (a float64 sum casts a copy of each tensor first: 30x slower on a CPU) and one device sync, added up in float64.
    A float32 sum can miss a change in the last bits of one weight; the losses and gradient norms of the next
    steps cannot, and the comparison reads all three.
    """
    sums = [p.detach().sum() for p in model.parameters() if p.requires_grad]
    if not sums:
        return None
    total = float(torch.stack(sums).double().sum())
    return total if math.isfinite(total) else None


def _kind(value: float) -> Literal["nan", "inf", "-inf"]:
    if math.isnan(value):
        return "nan"
    return "inf" if value > 0 else "-inf"
