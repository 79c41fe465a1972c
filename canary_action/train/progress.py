"""A progress line in the log: quiet (about ten lines a run) but present, so a CI log shows life."""

from __future__ import annotations

import sys
import time
from typing import Any

from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments

from canary_action.metrics import schema as m
from canary_action.train.callback import RunRecord


class ProgressLine(TrainerCallback):
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
        print(
            f"[{self.name}] step {step:>{len(str(self.max_steps))}}/{self.max_steps}"
            f" | {step_time:6.3f} s/step | {tokens / step_time if step_time else 0:8.0f} tok/s"
            f" | loss {'-' if m.LOSS not in row else 'nan/inf' if loss is None else f'{loss:.4f}'}"
            f" | {time.perf_counter() - self._start:6.1f} s elapsed",
            file=sys.stderr,
            flush=True,
        )
