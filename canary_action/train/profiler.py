"""An optional torch.profiler window over a few optimizer steps: a chrome trace and a top-ops summary.

The window's steps are marked in the series (perf/in_profiler_window) and left out of timing summaries:
profiling slows every op it records. The profiler starts, stops and exports its trace between steps
(MetricsCallback's `between` work), outside every measured step. Done in a step's callbacks, the export
(seconds to tens of seconds: every op of the window) was timed into the first step after the window, a steady
step, and skewed the mean, tokens/s and the noise estimate. Marking that step as profiled too would have hidden
the cost by dropping a real step's measurement; this way every recorded step time is the step's own, and the
trace covers exactly the window's measured time (from the end of the step before it to the end of its last).

Expected on stderr: `USDT: ... profiler_start` / `profiler_stop` (libkineto, printed whatever its log level),
and with `profile_memory` on the CPU `Memory block of unknown size was allocated before the profiling started`
(c10's allocator: a tensor made before the window was freed inside it, a free the trace lacks). Only
TORCH_CPP_LOG_LEVEL=ERROR, set before torch loads, hides that line, and with it every other C++ warning of the
run, so the canary leaves both.
"""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile
from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments

from canary_action.config.blocks import ProfilerConfig
from canary_action.metrics.schema import ProfiledOp, ProfilerSummary, Status

_US_PER_MS = 1000.0
#: Perfetto and chrome://tracing open gzip directly. Five steps of pythia-70m on an H200 wrote 103 MB of JSON
#: (294k events); compressed, the artifact holds a fraction of it.
TRACE_NAME = "trace.json.gz"


def export_compressed(profiled: Any, path: Path) -> None:
    """The chrome trace, gzip-compressed at `path`: exported beside it, compressed, the plain file removed."""
    plain = path.with_name(path.name.removesuffix(".gz") + ".tmp")
    try:
        profiled.export_chrome_trace(str(plain))
        with plain.open("rb") as source, gzip.open(path, "wb", compresslevel=6) as target:
            shutil.copyfileobj(source, target, length=1 << 20)
    finally:
        plain.unlink(missing_ok=True)


class ProfilerWindow(TrainerCallback):
    def __init__(self, config: ProfilerConfig, trace_dir: Path, on_cuda: bool) -> None:
        self.config = config
        self.steps = range(config.start_step, config.start_step + config.num_steps)
        self.trace_path = trace_dir / TRACE_NAME
        self.on_cuda = on_cuda
        self._profile: Any = None
        self.summary: ProfilerSummary | None = None

    def between_steps(self, completed_steps: int, *, going_on: bool) -> None:
        """Start before the window's first step, stop after its last (or where the run stops inside it)."""
        if self._profile is None and going_on and completed_steps + 1 == self.steps.start:
            activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if self.on_cuda else [])
            self._profile = profile(
                activities=activities,
                record_shapes=self.config.record_shapes,
                profile_memory=self.config.profile_memory,
                with_stack=self.config.with_stack,
            )
            self._profile.start()
        elif self._profile is not None and (not going_on or completed_steps >= self.steps.stop - 1):
            self._finish(completed_steps)

    def on_train_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **_: Any) -> None:
        # A stop decided after the step's end (a non-finite loss in its logs, a peer rank's): keep what was recorded.
        if self._profile is not None:
            self._finish(state.global_step)

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

    def _finish(self, last_step: int) -> None:
        profiled, self._profile = self._profile, None
        if self.on_cuda:
            torch.cuda.synchronize()
        profiled.stop()
        if last_step < self.steps.start:
            return  # started, then the run stopped before the window's first step: nothing of it was recorded
        self.trace_path.parent.mkdir(parents=True, exist_ok=True)
        export_compressed(profiled, self.trace_path)
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
            end_step=last_step,
            cpu_time_total_ms=sum(op.cpu_self_time_ms for op in ops),
            device_time_total_ms=sum(op.device_self_time_ms for op in ops),
            top_ops=ops[: self.config.top_k],
        )
