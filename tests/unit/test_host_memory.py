"""host_memory: a CPU run's peak resident memory against its baselines' (memory.py), and its suspect (clues.py).

A GPU run has no such check (max_memory judges its device memory); a run that profiled is not judged and
profiled baselines are left out, since the profiler's events sit in host memory until the trace is written.
"""

from __future__ import annotations

from typing import Any

import pytest

from canary_action.compare.result import Check, CompareResult
from canary_action.compare.runs import RunData, from_metrics
from canary_action.compare.verdict import compare
from canary_action.config.thresholds import TIERS
from canary_action.metrics import schema
from canary_action.metrics.schema import ProfilerSummary
from tests.factories import make_metrics, make_series

STEPS = 60
RSS_MIB = 600.0
WINDOW = ProfilerSummary(trace_path=None, start_step=40, end_step=44, cpu_time_total_ms=1.0,
                         device_time_total_ms=0.0, top_ops=[])  # fmt: skip


def cpu_run(seed: int, *, extra_mib: float = 0.0, profiled: bool = False, rss: bool = True, **kw: Any) -> RunData:
    """A CPU run of one workload: no CUDA memory, the host RSS rising slightly over the run."""
    series: dict[str, list[float | None] | None] = {
        schema.NUM_TOKENS: make_series(STEPS)[schema.NUM_TOKENS],
        schema.PEAK_ALLOCATED_MIB: None,
        schema.PEAK_RESERVED_MIB: None,
        schema.GPU_UTILIZATION_PCT: None,
        schema.HOST_PEAK_RSS_MIB: [RSS_MIB + extra_mib + seed % 5 + 0.1 * s for s in range(STEPS)] if rss else None,
    }
    metrics = make_metrics(
        num_steps=STEPS,
        seed=seed,
        series=series,
        workload={"device": "cpu", "dataset_fingerprint": "d" * 64},
        env={"gpus": [], "gpu_count": 0},
        config={"seed": 0},
        run={"run_id": f"cpu-{seed}-{extra_mib}"},
        profiler=WINDOW if profiled else None,
        **kw,
    )
    return from_metrics(metrics, "x")


def host(result: CompareResult) -> Check:
    return next(c for c in result.checks if c.name == "host_memory")


@pytest.mark.parametrize(("extra_mib", "status"), [(200.0, "fail"), (20.0, "pass")])
def test_a_cpu_runs_peak_rss_is_judged_like_device_memory(extra_mib: float, status: str) -> None:
    baselines = [cpu_run(100 + i) for i in range(3)]
    result = compare(cpu_run(1, extra_mib=extra_mib), baselines, TIERS["default"])
    check = host(result)
    assert check.status == status, check.message
    assert check.group == "memory"
    assert check.delta == pytest.approx(extra_mib, abs=5)
    assert check.threshold == pytest.approx(0.2 * RSS_MIB, rel=0.02)  # 20 % of ~606 MiB is tighter than 500 MiB
    assert "host RSS" in check.message
    by_name = {c.name: c for c in result.checks}
    assert by_name["max_memory"].status == "skip"
    assert "host_memory" in by_name["max_memory"].message


def test_the_rss_growth_is_memory_evidence() -> None:
    result = compare(cpu_run(1, extra_mib=200.0), [cpu_run(100 + i) for i in range(3)], TIERS["default"])
    memory = next(s for s in result.suspects if s.category == "memory")
    assert "host_memory" in memory.explains
    assert any("peak host RSS" in line and "+200 MiB" in line for line in memory.evidence), memory.evidence


def test_a_gpu_run_has_no_host_memory_check() -> None:
    def gpu_run(seed: int) -> RunData:
        return from_metrics(make_metrics(num_steps=STEPS, seed=seed, workload={"dataset_fingerprint": "d" * 64}), "x")

    result = compare(gpu_run(1), [gpu_run(100), gpu_run(101)], TIERS["default"])
    assert "host_memory" not in {c.name for c in result.checks}


def test_a_profiled_runs_host_memory_is_not_judged() -> None:
    profiled = cpu_run(1, extra_mib=150.0, profiled=True)
    for baselines in ([cpu_run(100 + i) for i in range(3)], [cpu_run(100 + i, profiled=True) for i in range(3)]):
        result = compare(profiled, baselines, TIERS["default"])
        check = host(result)
        assert check.status == "skip"
        assert "the profiler ran in this run" in check.message
        assert check.fix is None  # a cost of measuring, not a check that was asked for and missed
        assert not any(s.category == "memory" for s in result.suspects)


def test_profiled_baselines_are_left_out() -> None:
    baselines = [cpu_run(100, extra_mib=150.0, profiled=True), cpu_run(101), cpu_run(102)]
    check = host(compare(cpu_run(1, extra_mib=100.0), baselines, TIERS["default"]))
    assert check.status == "pass", check.message  # +100 MiB against the two unprofiled baselines: inside 20 %
    assert check.baseline == pytest.approx(RSS_MIB + 5.9 + 1.5, abs=2)
    only_profiled = compare(cpu_run(1), [cpu_run(100, extra_mib=150.0, profiled=True)], TIERS["default"])
    assert host(only_profiled).status == "skip"
    assert "every baseline ran the profiler" in host(only_profiled).message


def test_a_baseline_without_rss_leaves_it_unjudged_with_the_fix() -> None:
    result = compare(cpu_run(1, extra_mib=500.0), [cpu_run(100, rss=False)], TIERS["default"])
    check = host(result)
    assert check.status == "skip"
    assert check.fix is not None
    assert result.verdict != "pass"
