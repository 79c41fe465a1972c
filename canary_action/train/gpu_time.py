"""The GPU's own busy time per optimizer step, on CUDA: what the device computed, apart from what the host did.

A small canary is host-bound: an H200 ran the builtin pythia-70m DPO at 8 % utilisation, 136 ms of device time
in 2,035 ms of CPU time over five steps, so a kernel that got 50 % slower moves step time by a few percent,
inside the noise. Step time cannot see it; the device's own time can.

How it is measured. CUDA events around a step time the GPU's timeline, idle gaps included (the host's time
again, for a host-bound step). Summed kernel records are what the GPU did: a CUDA-only torch.profiler session
(CUPTI activity records; no CPU ops, no stacks, no shapes) stays open over a few steps, and every step's end is
marked on the device by one tiny kernel the training never launches (torch.cuda._sleep's `spin_kernel`),
launched after the step's synchronisation. The device runs the step's work before the marker and the next
step's after it, so the records between two markers are one step's: its busy time is the union of their
intervals (kernels, copies, memsets; streams that overlap count once), and their count is the step's kernels.
A session is opened before its first step's clock starts and closed, its records read, after its last step's
time is taken: both lie outside every measured step. Sessions end at every multiple of SESSION_STEPS steps (a
lockstep side's chunk_steps: closed before the side waits for its turn, never open over the other side's), and
before the profiler window (one profiler at a time).

Records lost at a session's start. CUPTI has been reported to drop or corrupt kernel records at the start of a
session (pytorch/pytorch#192021; a CUPTI timestamp fix in CUDA 13.1). Each session starts with PRIME_MARKERS
marker kernels, which absorb such a loss, and every session is checked: the step markers must all be there, and
no record may start before the session or end before it starts. A session that fails the check times none of
its steps (None in the series), and the run's measurement warnings say how many steps that left untimed.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import torch
from torch._C._autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

from canary_action.metrics import schema as m

SESSION_STEPS: Final = 8
PRIME_MARKERS: Final = 2
MARKER_NAME: Final = "spin_kernel"
_MARKER_CYCLES: Final = 1  # the shortest spin: the marker costs the device a launch, nothing more
#: Device activity that is the GPU's own work; annotations and host-side records are not.
DEVICE_WORK: Final = frozenset({"kernel", "gpu_memcpy", "gpu_memset"})


@dataclass(frozen=True)
class DeviceRecord:
    """One record of the device's activity, as the profiler gives it (nanoseconds, its own clock)."""

    name: str
    start_ns: int
    end_ns: int
    is_marker: bool = False


@dataclass(frozen=True)
class StepTime:
    busy_s: float
    num_kernels: int


def busy_ns(records: Sequence[DeviceRecord]) -> int:
    """The union of the records' intervals: time the device was doing any of them."""
    total, end = 0, None
    for record in sorted(records, key=lambda r: r.start_ns):
        if end is None or record.start_ns > end:
            total += record.end_ns - record.start_ns
            end = record.end_ns
        elif record.end_ns > end:
            total += record.end_ns - end
            end = record.end_ns
    return total


def split_steps(records: Sequence[DeviceRecord], steps: int, session_start_ns: int) -> list[StepTime] | None:
    """The session's records cut into its `steps` steps at the markers; None when the session cannot be trusted:
    a marker missing, or a record out of its time (the start-of-session loss of pytorch#192021)."""
    ordered = sorted(records, key=lambda r: r.start_ns)
    if any(r.start_ns <= 0 or r.end_ns < r.start_ns or r.start_ns < session_start_ns for r in ordered):
        return None
    markers = [i for i, r in enumerate(ordered) if r.is_marker]
    if len(markers) != PRIME_MARKERS + steps:
        return None
    bounds = markers[PRIME_MARKERS - 1 :]  # the last priming marker opens step 1
    times = []
    for low, high in itertools.pairwise(bounds):
        work = [r for r in ordered[low + 1 : high] if not r.is_marker]
        times.append(StepTime(busy_s=busy_ns(work) / 1e9, num_kernels=len(work)))
    return times


def cuda_records(events: Sequence[Any]) -> list[DeviceRecord]:
    """The GPU's own work among a profiler's kineto events (torch 2.x `_KinetoEvent`s)."""
    found = []
    for event in events:
        if event.device_type() != DeviceType.CUDA:
            continue
        kind = event.activity_type() if hasattr(event, "activity_type") else "kernel"
        if kind not in DEVICE_WORK or event.is_user_annotation():
            continue
        start, name = event.start_ns(), event.name()
        found.append(DeviceRecord(name, start, start + event.duration_ns(), is_marker=MARKER_NAME in name))
    return found


def _cuda_marker() -> None:
    torch.cuda._sleep(_MARKER_CYCLES)  # type: ignore[no-untyped-call]


@dataclass(frozen=True)
class Source:
    """What a clock's sessions record: the profiler activity, the marker launched at each step's end, how to read
    the device's records from the session's events, and how to wait for the device."""

    activity: ProfilerActivity
    mark: Callable[[], None]
    records: Callable[[Sequence[Any]], list[DeviceRecord]]
    synchronize: Callable[[], None]


CUDA_SOURCE: Final = Source(ProfilerActivity.CUDA, _cuda_marker, cuda_records, torch.cuda.synchronize)


def clock_for(*, enabled: bool, on_cuda: bool, chunk_steps: int | None, skipped: range | None) -> KernelClock | None:
    """The clock a run on CUDA with gpu_time on gets: sessions closed at a lockstep side's chunk boundaries (where
    it waits for its turn) or every SESSION_STEPS steps, and none over the profiler window."""
    if not (enabled and on_cuda):
        return None
    return KernelClock(chunk_steps or SESSION_STEPS, skipped=skipped or range(0))


@dataclass
class KernelClock:
    """CUDA-only profiler sessions over the run's steps, each step's busy time written into its row."""

    session_steps: int = SESSION_STEPS
    skipped: range = range(0)
    """Steps never timed (the profiler window: one profiler at a time)."""
    source: Source = CUDA_SOURCE
    _session: Any = None
    _steps: list[int] = field(default_factory=list)
    untimed: int = 0
    """Steps whose session failed the check (see the module's docstring)."""

    def before_step(self, step: int) -> None:
        """Just before step `step`'s clock starts: open a session unless one is open or the step is skipped."""
        if self._session is not None or step in self.skipped:
            return
        self._session = profile(activities=[self.source.activity])
        with _quiet_stderr():  # libkineto prints `USDT: ... profiler_start` whatever its log level
            self._session.start()
        for _ in range(PRIME_MARKERS):
            self.source.mark()
        self._steps = []

    def after_step(self, step: int, rows: Sequence[dict[str, float | None]], *, going_on: bool) -> None:
        """After step `step`'s time was taken (and its device synchronised): mark its end; close the session at
        every multiple of session_steps (where a lockstep side waits for its turn: its chunk_steps), before a
        skipped step and when the run stops, writing each step's figures into `rows` (the run's rows, the step's
        among the last)."""
        if self._session is None:
            return
        self.source.mark()
        self._steps.append(step)
        if going_on and step % self.session_steps and step + 1 not in self.skipped:
            return
        self.close(rows)

    def close(self, rows: Sequence[dict[str, float | None]]) -> None:
        """Close the open session (if any) and write its steps' figures."""
        session, self._session = self._session, None
        if session is None:
            return
        self.source.synchronize()
        with _quiet_stderr():
            session.stop()
        results = session.profiler.kineto_results
        times = split_steps(self.source.records(results.events()), len(self._steps), _start_ns(results))
        if times is None:
            self.untimed += len(self._steps)
            return
        by_step = {int(row[m.STEP] or 0): row for row in rows[-len(self._steps) :]}
        for step, timed in zip(self._steps, times, strict=True):
            if (row := by_step.get(step)) is not None:
                row[m.GPU_BUSY_S] = timed.busy_s
                row[m.NUM_GPU_KERNELS] = float(timed.num_kernels)

    def warnings(self, num_steps: int) -> list[str]:
        if not self.untimed:
            return []
        return [
            f"GPU time: {self.untimed} of {num_steps} steps not timed on the GPU: their profiler session lost or "
            "misdated kernel records (a CUPTI start-of-session loss, pytorch/pytorch#192021; CUDA 13.1's CUPTI "
            "fixes its timestamps)"
        ]


def _start_ns(results: Any) -> int:
    """The session's start on the records' clock (0 where this torch does not say: nothing is out of time)."""
    start = getattr(results, "trace_start_ns", None)
    return int(start()) if callable(start) else 0


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """Descriptor 2 on /dev/null for the duration: libkineto writes its start and stop lines there directly."""
    sys.stderr.flush()  # what Python holds in its buffer belongs to the log, not to /dev/null
    saved = os.dup(2)
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 2)
        os.close(null)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
