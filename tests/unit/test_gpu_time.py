"""The GPU's busy time per step (train/gpu_time.py): the records' union, the cut at the step markers, the check
against the start-of-session loss, and the clock's sessions over real torch.profiler sessions.

No GPU here: the clock runs on the CPU's op records instead (the same profiler sessions, markers and cuts, with a
CPU op for the marker), which proves the sessions, the cut and the rows it fills. The CUDA records themselves are
read by `cuda_records`, checked on a GPU by scripts/gpu-check.sh (tests marked `gpu`).
"""

from __future__ import annotations

from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from torch._C._autograd import DeviceType
from torch.profiler import ProfilerActivity

from canary_action.metrics import schema as m
from canary_action.train.gpu_time import (
    PRIME_MARKERS,
    DeviceRecord,
    KernelClock,
    Source,
    busy_ns,
    split_steps,
)

MARKER_OP = "aten::special_erfcx"  # an op no step below runs: it stands in for the CUDA marker kernel


def test_busy_time_is_the_union_of_the_records() -> None:
    records = [DeviceRecord("a", 0, 10), DeviceRecord("b", 5, 15), DeviceRecord("c", 20, 25), DeviceRecord("d", 21, 22)]
    assert busy_ns(records) == 20  # 0-15 and 20-25: overlapping streams count once
    assert busy_ns([]) == 0


def marked(*, steps: Sequence[Sequence[tuple[int, int]]], start: int = 100) -> list[DeviceRecord]:
    """A session's records: the priming markers, then each step's records followed by its end marker."""
    records, t = [], start
    for _ in range(PRIME_MARKERS):
        records.append(DeviceRecord("spin_kernel", t, t + 1, is_marker=True))
        t += 2
    for work in steps:
        for begin, length in work:
            records.append(DeviceRecord("gemm", t + begin, t + begin + length))
        t += 1000
        records.append(DeviceRecord("spin_kernel", t, t + 1, is_marker=True))
        t += 2
    return records


def test_a_session_is_cut_into_its_steps_at_the_markers() -> None:
    records = marked(steps=[[(0, 300), (100, 300)], [(0, 50)], []])
    times = split_steps(records, 3, session_start_ns=100)
    assert times is not None
    assert [(round(t.busy_s * 1e9), t.num_kernels) for t in times] == [(400, 2), (50, 1), (0, 0)]


@pytest.mark.parametrize(
    "damage",
    ["a step marker lost", "a priming marker lost", "a record before the session", "a record at time 0",
     "a record ending before it starts"],
)  # fmt: skip
def test_a_session_that_lost_or_misdated_records_times_none_of_its_steps(damage: str) -> None:
    """pytorch/pytorch#192021: CUPTI may drop or misdate records at a session's start."""
    records = marked(steps=[[(0, 300)], [(0, 50)]])
    if damage == "a step marker lost":
        records.pop()
    elif damage == "a priming marker lost":
        records.pop(0)
    elif damage == "a record before the session":
        records.append(DeviceRecord("gemm", 50, 60))
    elif damage == "a record at time 0":
        records.append(DeviceRecord("gemm", 0, 10))
    else:
        records.append(DeviceRecord("gemm", 500, 400))
    assert split_steps(records, 2, session_start_ns=100) is None


def _cpu_records(events: Sequence[Any]) -> list[DeviceRecord]:
    """The steps' products and the markers (a CPU op's own inner ops would count twice)."""
    found = []
    for event in events:
        if event.device_type() == DeviceType.CPU and event.name() in ("aten::mm", MARKER_OP):
            start = event.start_ns()
            found.append(DeviceRecord(event.name(), start, start + event.duration_ns(), event.name() == MARKER_OP))
    return found


MARKER_INPUT = torch.zeros(1)
CPU_SOURCE = Source(ProfilerActivity.CPU, lambda: torch.special.erfcx(MARKER_INPUT), _cpu_records, lambda: None)


def run_steps(clock: KernelClock, products: Sequence[int]) -> list[dict[str, float | None]]:
    """Steps as the training callback drives the clock: before each step's clock starts, then after its time."""
    rows: list[dict[str, float | None]] = []
    a = torch.randn(64, 64)
    for step, count in enumerate(products, 1):
        clock.before_step(step)
        for _ in range(count):
            torch.mm(a, a)
        rows.append({m.STEP: float(step)})
        clock.after_step(step, rows, going_on=step < len(products))
    return rows


def test_the_clock_writes_each_steps_records_into_its_row_over_real_profiler_sessions(
    capfd: pytest.CaptureFixture[str],
) -> None:
    clock = KernelClock(session_steps=2, skipped=range(4, 5), source=CPU_SOURCE)
    rows = run_steps(clock, [1, 3, 10, 2, 5])
    kernels = [row.get(m.NUM_GPU_KERNELS) for row in rows]
    assert kernels == [1.0, 3.0, 10.0, None, 5.0]  # step 4 in the skipped window: no session, no figure
    assert all(row[m.GPU_BUSY_S] > 0 for row in rows if m.NUM_GPU_KERNELS in row)  # type: ignore[operator]
    assert clock.untimed == 0
    assert clock.warnings(5) == []
    assert "profiler_start" not in capfd.readouterr().err, "libkineto's start and stop lines are kept off stderr"


def test_a_damaged_session_leaves_its_steps_untimed_and_says_so() -> None:
    """A marker that never reaches the records (as a lost record would) fails the session's check."""
    calls = iter(range(1000))
    skipping = Source(
        ProfilerActivity.CPU,
        lambda: torch.special.erfcx(MARKER_INPUT) if next(calls) != 2 else None,  # the first step marker lost
        _cpu_records,
        lambda: None,
    )  # fmt: skip
    clock = KernelClock(session_steps=2, source=skipping)
    rows = run_steps(clock, [1, 1, 1])
    assert [m.GPU_BUSY_S in row for row in rows] == [False, False, True]
    assert clock.untimed == 2
    [warning] = clock.warnings(3)
    assert warning.startswith("GPU time: 2 of 3 steps not timed on the GPU")
    assert "pytorch/pytorch#192021" in warning


# -- the training callback drives the clock outside every measured step -------------------------------------------
STEP_S, START_S, STOP_S, KERNEL_S = 0.5, 2.0, 3.0, 0.1


class FakeDevice:
    """A device whose records the test writes: one kernel of KERNEL_S in every step, a marker wherever the clock
    marks, on a clock that only the steps and the sessions move."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.records: list[DeviceRecord] = []
        self.sessions = 0

    def ns(self) -> int:
        return int(self.now * 1e9)

    def mark(self) -> None:
        self.records.append(DeviceRecord("spin_kernel", self.ns(), self.ns() + 1, is_marker=True))
        self.now += 1e-6

    def kernel(self) -> None:
        self.records.append(DeviceRecord("gemm", self.ns(), self.ns() + int(KERNEL_S * 1e9)))

    def session(self, **_: Any) -> Any:
        device = self

        class Session:
            profiler = None

            def start(self) -> None:
                device.sessions += 1
                device.records = []
                self.begun = device.ns()
                device.now += START_S

            def stop(self) -> None:
                device.now += STOP_S
                kept, begun = list(device.records), self.begun
                self.profiler = SimpleNamespace(
                    kineto_results=SimpleNamespace(events=lambda: kept, trace_start_ns=lambda: begun)
                )

        return Session()


class Gate:
    """A lockstep side's turns every 2 steps; it checks that no session is open while the side waits."""

    chunk_steps = 2

    def __init__(self, clock: KernelClock) -> None:
        self.clock, self.waits = clock, 0

    def wait(self, completed_steps: int) -> str | None:
        if completed_steps % self.chunk_steps == 0:
            assert self.clock._session is None, "a session stayed open over the other side's turn"
            self.waits += 1
        return None

    def columns(self) -> dict[str, float]:
        return {}


@pytest.mark.parametrize("paired", [False, True])
def test_sessions_open_and_close_outside_every_measured_step(monkeypatch: pytest.MonkeyPatch, paired: bool) -> None:
    from transformers import DefaultFlowCallback, TrainerControl, TrainerState, TrainingArguments
    from transformers.trainer_callback import CallbackHandler

    from canary_action.train import callback, gpu_time
    from canary_action.train.callback import MetricsCallback, RunRecord, StepCounters
    from canary_action.train.probes import DeviceProbe

    device = FakeDevice()
    monkeypatch.setattr(
        callback, "time", SimpleNamespace(perf_counter=lambda: device.now, process_time=lambda: device.now)
    )
    monkeypatch.setattr(gpu_time, "profile", device.session)
    source = Source(ProfilerActivity.CUDA, device.mark, list, lambda: None)
    clock = KernelClock(session_steps=Gate.chunk_steps if paired else 3, source=source)  # as run.py makes it
    gate = Gate(clock) if paired else None
    record = RunRecord()
    metrics = MetricsCallback(
        record, StepCounters(), DeviceProbe(torch.device("cpu")), stop_on_non_finite=True, timeout_s=3600.0,
        gate=gate, clock=clock,
    )  # fmt: skip
    handler = CallbackHandler([DefaultFlowCallback, metrics], None, None, None, None)  # type: ignore[no-untyped-call]
    args = TrainingArguments(output_dir="unused", max_steps=7, report_to=[])
    state, control = TrainerState(max_steps=7), TrainerControl()
    control = handler.on_train_begin(args, state, control)
    while not control.should_training_stop:
        control = handler.on_step_begin(args, state, control)
        device.kernel()
        device.now += STEP_S
        state.global_step += 1
        control = handler.on_step_end(args, state, control)
    handler.on_train_end(args, state, control)
    series = record.series()
    assert series[m.STEP_TIME_S] == [STEP_S] * 7  # the sessions' start and stop land in no step
    assert series[m.GPU_BUSY_S] == [pytest.approx(KERNEL_S)] * 7
    assert series[m.NUM_GPU_KERNELS] == [1.0] * 7
    assert device.sessions == (4 if paired else 3)  # sessions of 3 steps, or of a lockstep side's chunk of 2
    assert gate is None or gate.waits == 4
