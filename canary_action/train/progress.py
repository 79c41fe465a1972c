"""What the log shows while a canary runs: quiet (about fifteen lines a run) but present, so a CI log shows life.

Before the first step, one line as each stage of the start begins (StageLines: the model, the data, the
trainer); then a progress line every tenth of the run (ProgressLine), with the time left at the recent pace.
"""

from __future__ import annotations

import statistics
import sys
import time
from typing import Any, Final

from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments

from canary_action.config.schema import CommonConfig
from canary_action.metrics import schema as m
from canary_action.train.callback import RunRecord
from canary_action.train.stages import current_stage

#: Steps whose median time paces the ETA: recent enough to follow a change of pace (the profiler window, a
#: warm-up ending), enough that one slow step does not swing it.
ETA_WINDOW: Final = 10
#: Stages that load on behalf of an enclosing one: their lines are indented under it.
_NESTED_IN: Final = ("build", "load_model", "load_data")


class StageLines:
    """Announces each stage of a run's start once, as a line on stderr (stages.announce_stages calls it)."""

    def __init__(self, config: CommonConfig, label: str | None = None) -> None:
        self.config = config
        self.label = label or config.name  # a lockstep side's names it: `[tiny-dpo base]`
        self._seen: set[str] = set()

    def __call__(self, name: str) -> None:
        config = self.config
        phrases = {
            "load_model": f"loading the model {config.model_name}",
            "load_data": f"loading the data {config.dataset_name} ({config.dataset_size:,} examples)",
            "build": f"building the {config.training_type} trainer",
            "train": f"training {config.max_steps:,} steps",
        }
        if name not in phrases or name in self._seen:
            return
        self._seen.add(name)
        indent = "  " if current_stage() in _NESTED_IN else ""
        print(f"[{self.label}] {indent}{phrases[name]}", file=sys.stderr, flush=True)


class ProgressLine(TrainerCallback):
    """A line every tenth of the run, starting `[name]` (a lockstep side's: `[name base]`, `[name head]`)."""

    def __init__(self, record: RunRecord, max_steps: int, name: str) -> None:
        self.record = record
        self.max_steps = max_steps
        self.name = name
        self.every = max(1, max_steps // 10)
        self._start = time.perf_counter()
        self._printed = 0

    def on_train_begin(self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **_: Any) -> None:
        self._start = time.perf_counter()

    def on_log(self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **_: Any) -> None:
        step = state.global_step
        due = step % self.every == 0 or step in (1, self.max_steps)
        if not self.record.rows or not due or step == self._printed:  # the final summary log repeats a step
            return
        self._printed = step
        row = self.record.rows[-1]
        loss = row.get(m.LOSS)
        step_time = row.get(m.STEP_TIME_S) or 0.0
        tokens = row.get(m.NUM_TOKENS) or 0.0
        left = eta_s(self.record.rows, self.max_steps - step)
        print(
            f"[{self.name}] step {step:>{len(str(self.max_steps))}}/{self.max_steps}"
            f" | {step_time:6.3f} s/step | {tokens / step_time if step_time else 0:8.0f} tok/s"
            f" | loss {'-' if m.LOSS not in row else 'nan/inf' if loss is None else f'{loss:.4f}'}"
            f" | {time.perf_counter() - self._start:6.1f} s elapsed"
            + (f" | ETA {duration_text(left)}" if left is not None else ""),
            file=sys.stderr,
            flush=True,
        )


def eta_s(rows: list[dict[str, float | None]], remaining_steps: int) -> float | None:
    """Seconds left: the remaining steps at the median time of the last ETA_WINDOW timed steps; None when
    nothing is left or no step was timed yet."""
    recent = [t for row in rows[-ETA_WINDOW:] if (t := row.get(m.STEP_TIME_S)) is not None]
    if remaining_steps <= 0 or not recent:
        return None
    return remaining_steps * statistics.median(recent)


def duration_text(seconds: float) -> str:
    """`<1 s`, `45 s`, `3 min 05 s`, `1 h 02 min`: what a person reads at a glance."""
    whole = round(seconds)
    if whole < 1:
        return "<1 s"
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min {whole % 60:02d} s"
    return f"{whole // 3600} h {whole % 3600 // 60:02d} min"
