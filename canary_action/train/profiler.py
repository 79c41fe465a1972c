"""An optional torch.profiler window over a few optimizer steps: a chrome trace and a top-ops summary.

The window's steps are marked in the series (perf/in_profiler_window) and left out of timing summaries:
profiling slows every op it records.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile
from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments

from canary_action.config.schema import ProfilerConfig
from canary_action.metrics.schema import ProfiledOp, ProfilerSummary, Status

_US_PER_MS = 1000.0


class ProfilerWindow(TrainerCallback):
    def __init__(self, config: ProfilerConfig, trace_dir: Path, on_cuda: bool) -> None:
        self.config = config
        self.steps = range(config.start_step, config.start_step + config.num_steps)
        self.trace_path = trace_dir / "trace.json"
        self.on_cuda = on_cuda
        self._profile: Any = None
        self._last_step = 0
        self.summary: ProfilerSummary | None = None

    def on_step_begin(self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **_: Any) -> None:
        if state.global_step + 1 == self.steps.start and self._profile is None:
            activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if self.on_cuda else [])
            self._profile = profile(
                activities=activities,
                record_shapes=self.config.record_shapes,
                profile_memory=self.config.profile_memory,
                with_stack=self.config.with_stack,
            )
            self._profile.start()

    def on_step_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **_: Any) -> None:
        self._last_step = state.global_step
        if self._profile is not None and state.global_step >= self.steps.stop - 1:
            self._finish()

    def on_train_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **_: Any) -> None:
        if self._profile is not None:  # the run ended inside the window: keep what was recorded
            self._finish()

    def shortfall(self, status: Status, num_steps: int) -> str | None:
        """In words, what a run that ended before or inside the window left of it; None when it recorded it whole.
        (The config refuses a window past max_steps: only a run that stops early gets here.)"""
        first, last = self.steps.start, self.steps.stop - 1
        recorded = self.summary.end_step if self.summary is not None else None
        if recorded is not None and recorded >= last:
            return None
        if status.state == "failed":
            how = "was interrupted" if status.reason == "interrupted" else f"failed ({status.exception_type})"
        else:
            how = f"stopped early ({status.reason})" if status.reason else "stopped early"
        ended = f"the run {how} after {num_steps} step{'s' if num_steps != 1 else ''}"
        window = f"the profiler window (steps {first}-{last})"
        if recorded is None and num_steps < first:
            return f"profiler: nothing recorded: {ended}, before {window}"
        if recorded is None:
            return f"profiler: nothing recorded: {ended}, inside {window}, before its trace was written"
        return f"profiler: recorded steps {first}-{recorded} of the window {first}-{last} only: {ended}"

    def _finish(self) -> None:
        profiled, self._profile = self._profile, None
        if self.on_cuda:
            torch.cuda.synchronize()
        profiled.stop()
        self.trace_path.parent.mkdir(parents=True, exist_ok=True)
        profiled.export_chrome_trace(str(self.trace_path))
        averages = profiled.key_averages()
        ops = [
            ProfiledOp(
                name=event.key,
                count=int(event.count),
                cpu_self_time_ms=event.self_cpu_time_total / _US_PER_MS,
                device_self_time_ms=getattr(event, "self_device_time_total", 0.0) / _US_PER_MS,
            )
            for event in averages
        ]
        ops.sort(key=lambda op: (op.device_self_time_ms, op.cpu_self_time_ms), reverse=True)
        self.summary = ProfilerSummary(
            trace_path=str(self.trace_path),
            start_step=self.steps.start,
            end_step=self._last_step,
            cpu_time_total_ms=sum(op.cpu_self_time_ms for op in ops),
            device_time_total_ms=sum(op.device_self_time_ms for op in ops),
            top_ops=ops[: self.config.top_k],
        )
