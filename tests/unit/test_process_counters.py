"""The per-step process counters (train/process_counters.py) and a side's summary of them (pair.json `process`)."""

from __future__ import annotations

import mmap
import sys

import pytest

from canary_action.compare.slow_process import process_summary
from canary_action.metrics import schema as m
from canary_action.train import process_counters


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="schedstat and the CPU number are Linux's")
def test_touching_fresh_memory_shows_as_page_faults_and_the_columns_are_the_changes() -> None:
    before = process_counters.read()
    with mmap.mmap(-1, 8 << 20) as block:  # 2,048 pages the process never had: each one a minor fault
        for offset in range(0, 8 << 20, mmap.PAGESIZE):
            block[offset] = 1
    row = process_counters.step_columns(before, process_counters.read())
    assert set(row) == {*process_counters.COLUMNS.values(), m.CPU_NUMBER}
    faults = row[m.MINOR_FAULTS]
    assert faults is not None
    assert faults >= (8 << 20) // mmap.PAGESIZE
    assert all(v is not None and v >= 0 for v in row.values())


def test_a_sides_summary_is_its_medians_after_the_first_step() -> None:
    series: dict[str, list[float | None]] = {
        m.STEP_TIME_S: [9.0, 1.0, 1.2, 1.1], m.CPU_S: [9.0, 0.9, 1.0, 1.1], m.USER_CPU_S: [8.0, 0.8, 0.9, 1.0],
        m.SYSTEM_CPU_S: [1.0, 0.1, 0.1, 0.1], m.MINOR_FAULTS: [5000, 10, 30, 20], m.MAJOR_FAULTS: [3, 0, 0, 0],
        m.VOLUNTARY_SWITCHES: [1.0, 2.0, 2.0, 2.0], m.INVOLUNTARY_SWITCHES: [0.0, 1.0, 3.0, 2.0],
        m.RUNQUEUE_WAIT_S: [0.0, 0.01, 0.03, 0.02], m.CPU_NUMBER: [0.0, 1.0, 1.0, 0.0],
    }  # fmt: skip
    summary = process_summary(series)
    assert summary is not None
    assert summary.steps == 3
    assert summary.step_time_s == pytest.approx(1.1)
    assert summary.minor_faults == 20.0
    assert summary.runqueue_wait_s == pytest.approx(0.02)
    assert summary.cpus == [0, 1]
    assert process_summary({m.STEP_TIME_S: [1.0, 1.0]}) is None  # an older release: no counters, no summary


def test_a_summary_takes_only_what_a_counter_can_be() -> None:
    """A head side writes its own metrics.json: non-finite figures and CPU numbers that are not CPUs are left out."""
    series: dict[str, list[float | None]] = {
        m.USER_CPU_S: [0.0, 1.0, 1.0], m.CPU_S: [0.0, float("inf"), 2.0], m.CPU_NUMBER: [0.0, float("nan"), 1e300],
    }  # fmt: skip
    summary = process_summary(series)
    assert summary is not None
    assert summary.cpu_s == 2.0
    assert summary.cpus == []
