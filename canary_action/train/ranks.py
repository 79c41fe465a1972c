"""One rank of a multi-process run, as the run's code sees it: who it is, where its records go, and the one
decision the ranks must take together (stopping).

Files, under <run_dir>/ranks/ (read back by launch/ranks.py):
- `rank<k>.steps.jsonl`: the rank's rows, one JSON line per optimizer step, appended as the run goes, so a
  rank killed mid-run (the launcher ends the others when one dies) still leaves its measured steps;
- `rank<k>.json`: its RankRecord (status, events, notices, workload), written at its end;
- `rank<k>.error.log`: the traceback, when it failed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments

from canary_action.metrics.merge import RankRecord
from canary_action.metrics.stream import rank_steps_path
from canary_action.train.callback import RunRecord
from canary_action.train.stream import RowStream


@dataclass(frozen=True)
class RankContext:
    rank: int
    local_rank: int
    world_size: int
    directory: Path  # <run_dir>/ranks

    @classmethod
    def from_environment(cls, run_dir: Path) -> RankContext:
        """The torchrun variables the launcher sets in every process it starts."""
        return cls(
            rank=int(os.environ["RANK"]),
            local_rank=int(os.environ["LOCAL_RANK"]),
            world_size=int(os.environ["WORLD_SIZE"]),
            directory=run_dir / "ranks",
        )

    @property
    def steps_path(self) -> Path:
        return steps_path(self.directory, self.rank)

    @property
    def record_path(self) -> Path:
        return record_path(self.directory, self.rank)

    @property
    def error_log(self) -> Path:
        return self.directory / f"rank{self.rank}.error.log"


def steps_path(directory: Path, rank: int) -> Path:
    return rank_steps_path(directory, rank)


def record_path(directory: Path, rank: int) -> Path:
    return directory / f"rank{rank}.json"


class RankSync(TrainerCallback):
    """At each step end: agree on stopping, and stream the finished rows to the rank's steps file.

    Stopping is collective: a rank that leaves the loop alone leaves the others waiting in the next all-reduce
    until the process-group timeout. NaN in gradients (all-reduced) or logs (gathered) reaches every rank at
    the same step, but the wall-clock timeout does not (ranks start training at different moments): each
    step the ranks all-reduce their stop flags (a one-element MAX, microseconds). Attach last.
    """

    def __init__(self, record: RunRecord, context: RankContext) -> None:
        self.record = record
        self.context = context
        self.stream = RowStream(record, context.steps_path)

    def on_step_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **_: Any) -> None:
        flag = torch.tensor([1.0 if control.should_training_stop else 0.0], device=args.device)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        if flag.item() and not control.should_training_stop:
            control.should_training_stop = True
            if self.record.stop_reason is None:
                self.record.stop_reason, self.record.stop_step = "peer", state.global_step
        self.stream.on_step_end(args, state, control)

    def flush(self) -> None:
        self.stream.flush()


def write_record(context: RankContext, record: RankRecord) -> None:
    context.directory.mkdir(parents=True, exist_ok=True)
    tmp = context.record_path.with_suffix(".tmp")
    tmp.write_text(record.model_dump_json(indent=2), encoding="utf-8")
    tmp.replace(context.record_path)  # whole or absent: the launcher reads it after the process ended
