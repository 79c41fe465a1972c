"""RowStream: the run's finished rows appended to its steps file as training goes (metrics/stream.py says why)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments

from canary_action.metrics.stream import append_rows
from canary_action.train.callback import RunRecord


class RowStream(TrainerCallback):
    """Appends each finished row to `path`. Attach after MetricsCallback, which creates each step's row."""

    def __init__(self, record: RunRecord, path: Path) -> None:
        self.record = record
        self.path = path
        self._written = 0

    def on_step_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **_: Any) -> None:
        # The newest row still receives this step's logs (on_log comes after on_step_end): write up to it.
        self.flush(keep_last=True)

    def on_log(self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **_: Any) -> None:
        # After MetricsCallback put the logs in the newest row: it is complete, so a kill now loses no step.
        self.flush()

    def flush(self, *, keep_last: bool = False) -> None:
        end = len(self.record.rows) - (1 if keep_last else 0)
        if end > self._written:
            append_rows(self.path, self.record.rows[self._written : end])
            self._written = end
