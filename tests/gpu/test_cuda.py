"""On a CUDA GPU: the GPU's busy time is what its kernels took, the start-of-session loss never turns into a wrong
figure, and a real run records it. Skipped without a GPU (tests/gpu/conftest.py); scripts/gpu-check.sh runs them."""

from __future__ import annotations

import statistics
import time
from pathlib import Path

import pytest
import torch

from canary_action.metrics import schema as m
from canary_action.train.gpu_time import KernelClock
from canary_action.train.instrument import PlantedWork

pytestmark = pytest.mark.gpu
SIZE = 4096  # 0.17 ms a bf16 product on an H200: far longer than a launch, so the GPU is never starved


def products_s(count: int) -> float:
    """GPU time of `count` SIZE x SIZE bf16 products at the GPU's working clock (timed warm: a cold GPU's first
    products take several times as long, and a busy time checked against them fails)."""
    work = PlantedWork(50, SIZE, torch.bfloat16)
    return count * statistics.median(work.device_timings_s(torch.device("cuda")))


def run_steps(clock: KernelClock, products: list[int], idle_s: float = 0.0) -> list[dict[str, float | None]]:
    """Steps as the training callback drives the clock, each doing its products; `idle_s` of host time between
    steps (the GPU idle, as between a lockstep side's turns). Each row also holds "events_s": the same products
    timed by CUDA events in that step, the figure its busy time must match whatever the GPU's clock was doing
    (an idle GPU slows down: products timed once, apart from the steps, are no yardstick)."""
    a = torch.randn(SIZE, SIZE, device="cuda", dtype=torch.bfloat16)
    rows: list[dict[str, float | None]] = []
    for step, count in enumerate(products, 1):
        time.sleep(idle_s)
        clock.before_step(step)
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        begin.record()
        for _ in range(count):
            torch.mm(a, a)
        end.record()
        torch.cuda.synchronize()
        rows.append({m.STEP: float(step), "events_s": begin.elapsed_time(end) / 1000})
        clock.after_step(step, rows, going_on=step < len(products))
    return rows


def within(busy: float | None, events_s: float | None) -> bool:
    """The kernels' busy time against the events around them: SIZE's products keep the GPU ahead of the host, so
    the two agree but for the launch gaps and the events' own resolution."""
    return busy is not None and events_s is not None and 0.8 * events_s < busy < 1.1 * events_s


def test_the_busy_time_is_what_the_kernels_took() -> None:
    products_s(10)  # the GPU at its working clock before the steps
    clock = KernelClock(session_steps=4)
    rows = run_steps(clock, [10, 40, 10, 40, 10, 40, 10, 40])
    assert clock.untimed == 0, clock.warnings(8)
    for row, count in zip(rows, [10, 40] * 4, strict=True):
        assert within(row[m.GPU_BUSY_S], row["events_s"]), (count, row)
        kernels = row[m.NUM_GPU_KERNELS]
        assert kernels is not None
        assert count <= kernels <= 3 * count  # a product is one GEMM kernel, or a few (split-K)


def test_sessions_after_idle_gaps_never_report_a_wrong_figure() -> None:
    """pytorch/pytorch#192021: records dropped or misdated at a session's start, more after idle time. Every step
    either has its true figure or is counted as untimed; the count is reported."""
    clock = KernelClock(session_steps=2)
    rows = run_steps(clock, [20] * 20, idle_s=0.5)
    timed = [row for row in rows if m.GPU_BUSY_S in row]
    assert len(timed) + clock.untimed == 20
    assert all(within(row[m.GPU_BUSY_S], row["events_s"]) for row in timed), timed
    print(f"untimed after idle gaps: {clock.untimed} of 20 steps")


def test_a_run_on_cuda_records_the_gpu_time_of_every_step(tmp_path: Path) -> None:
    from canary_action import api

    outcome = api.run("configs/tiny/sft.yaml", output_dir=tmp_path, overrides=["device=cuda", "max_steps=24"])
    series = outcome.metrics.series
    busy = [b for b in series[m.GPU_BUSY_S] if b is not None]
    assert len(busy) >= 20
    summary = outcome.metrics.summary
    assert summary is not None
    assert summary.gpu_busy_share is not None
    assert 0 < summary.gpu_busy_share < 1
    assert not [w for w in outcome.metrics.measurement_warnings if w.startswith("GPU time")]


def test_planted_gpu_only_work_shows_in_gpu_time(tmp_path: Path) -> None:
    from canary_action import api

    plain = api.run("configs/tiny/sft.yaml", output_dir=tmp_path, overrides=["device=cuda", "max_steps=24"])
    planted = api.run(
        "configs/tiny/sft.yaml", output_dir=tmp_path,
        overrides=["device=cuda", "max_steps=24", "fault_injection.gpu_matmuls_per_step=20"],
    )  # fmt: skip
    plain_s, planted_s = (o.metrics.summary.gpu_busy_median_s for o in (plain, planted))  # type: ignore[union-attr]
    assert plain_s is not None
    assert planted_s is not None
    assert planted_s > plain_s + 10 * products_s(1)  # at least half of the 20 planted products
