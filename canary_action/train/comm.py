"""Time spent in gradient collectives, per optimizer step, timed by a DDP communication hook.

The hook is torch's default all-reduce (`default_hooks.allreduce_hook`: the same collective DDP runs without a
hook) with a clock around it: a step's communication time lasts from the first gradient bucket handed to the
hook to the completion of the last bucket's all-reduce. It includes waiting for slower ranks (that is the
point: a straggler shows as the others' communication time) and any backward compute that overlaps the
buckets in flight (DDP starts the first buckets while later gradients are still being computed).

On the CPU (gloo) the clock is the host's: a bucket's future completes when its all-reduce has finished. On
CUDA (NCCL) a future completes when the collective is queued, so the clock is a pair of CUDA events on the
stream instead, read after the step's synchronisation.

FSDP and DeepSpeed run their own collectives, which DDP hooks cannot see: there communication is not measured,
and metrics.json's measurement_warnings says so.
"""

from __future__ import annotations

import time
from typing import Any

import torch
from torch._C._distributed_c10d import GradBucket  # what torch.distributed re-exports, typed
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel
from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments

from canary_action.metrics.merge import rank_column
from canary_action.train.callback import RunRecord


class CommTimer(TrainerCallback):
    """Adds `dist/rank<k>/comm_s` to each step's row; attach after MetricsCallback, which creates the row."""

    def __init__(self, record: RunRecord, rank: int, on_cuda: bool, warnings: list[str]) -> None:
        self.record = record
        self.column = rank_column(rank, "comm_s")
        self.on_cuda = on_cuda
        self.warnings = warnings
        self.trainer: Any = None
        self.registered = False
        self._calls = 0  # hook calls in the current step
        self._fired = False  # ever
        self._start: float | torch.cuda.Event | None = None
        self._end: float | torch.cuda.Event | None = None

    def attach(self, trainer: Any) -> None:
        """The trainer whose DDP wrapper gets the hook: the wrapper exists only once training has begun."""
        self.trainer = trainer

    def on_train_begin(self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **_: Any) -> None:
        wrapped = getattr(self.trainer, "model_wrapped", None)
        if not isinstance(wrapped, DistributedDataParallel):
            self.warnings.append(
                f"communication time not measured: the trained model is a {type(wrapped).__name__}, not "
                "DistributedDataParallel, so no DDP communication hook can time its collectives"
            )
            return
        try:
            # A lambda: DDP checks the hook's annotations, which `from __future__ import annotations` makes strings.
            hook = lambda state, bucket: self._timed_allreduce(state, bucket)  # noqa: E731, PLW0108
            wrapped.register_comm_hook(state=None, hook=hook)
        except (RuntimeError, ValueError) as error:  # said in metrics.json, and training goes on unmeasured
            self.warnings.append(f"communication time not measured: DDP refused the timing hook ({error})")
            return
        self.registered = True

    def on_step_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **_: Any) -> None:
        if not self.registered or not self.record.rows:
            return
        # MetricsCallback synchronised the device before creating this row: the CUDA events are complete.
        self.record.rows[-1][self.column] = self._elapsed() if self._calls else None
        if self._calls:
            self._fired = True
        elif not self._fired and state.global_step == 1:
            self.warnings.append("communication time not measured: the DDP hook did not fire in the first step")
        self._calls, self._start, self._end = 0, None, None

    def _timed_allreduce(self, state: object, bucket: GradBucket) -> torch.futures.Future[torch.Tensor]:
        if self._calls == 0:
            self._start = self._now()
        self._calls += 1
        future = default_hooks.allreduce_hook(state, bucket)  # type: ignore[arg-type]  # None: the default group

        def finished(done: torch.futures.Future[torch.Tensor]) -> torch.Tensor:
            now = self._now()
            # gloo completes buckets on its own threads, not necessarily in order: the latest end closes the window
            if not isinstance(now, float) or not isinstance(self._end, float) or now > self._end:
                self._end = now
            return done.value()

        return future.then(finished)

    def _now(self) -> float | torch.cuda.Event:
        if not self.on_cuda:
            return time.perf_counter()
        event = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
        event.record()
        return event

    def _elapsed(self) -> float | None:
        start, end = self._start, self._end
        if isinstance(start, float) and isinstance(end, float):
            return end - start
        if isinstance(start, torch.cuda.Event) and isinstance(end, torch.cuda.Event):
            return float(start.elapsed_time(end)) / 1000  # milliseconds
        return None
