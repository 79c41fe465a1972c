"""Merging the ranks of a multi-process run (metrics/merge.py): pure functions over per-rank records."""

from __future__ import annotations

import subprocess
import sys

import pytest

from canary_action.metrics import schema as m
from canary_action.metrics.merge import (
    RankRecord,
    RankRun,
    distributed_summary,
    merge_non_finite,
    merge_series,
    merge_status,
    rank_column,
)
from canary_action.metrics.summarize import steady_rows, summarize
from tests.factories import make_metrics

COMPLETED = m.Status(state="completed")


def rank_run(
    rank: int,
    step_times: list[float],
    comms: list[float | None] | None,
    *,
    status: m.Status = COMPLETED,
    failed_at: float | None = None,
    record: bool = True,
) -> RankRun:
    steps = [float(s) for s in range(1, len(step_times) + 1)]
    series: dict[str, list[float | None]] = {
        m.STEP: list(steps),
        m.STEP_TIME_S: list(step_times),
        m.HOST_RSS_MIB: [500.0 + rank + s for s in steps],
    }
    if comms is not None:
        series[rank_column(rank, "comm_s")] = list(comms)
    record_ = RankRecord(rank=rank, status=status, failed_at=failed_at, backend="gloo") if record else None
    return RankRun(rank=rank, series=series, record=record_)


def straggler_runs(steps: int = 10) -> list[RankRun]:
    """Rank 1 sleeps 0.05 s per step: rank 0 waits for it in the all-reduce; both steps last 0.15 s."""
    first = [1.0] + [0.15] * (steps - 1)
    return [
        rank_run(0, first, [0.5] + [0.06] * (steps - 1)),  # 0.09 s own work, 0.06 s waiting
        rank_run(1, first, [0.5] + [0.01] * (steps - 1)),  # 0.14 s own work (0.09 + 0.05 asleep)
    ]


def test_merged_series_are_rank_0s_plus_compute_and_comm_of_every_rank() -> None:
    series = merge_series(straggler_runs(), world_size=2)

    assert series[m.STEP] == [float(s) for s in range(1, 11)]
    assert series[m.HOST_RSS_MIB][0] == 501.0  # rank 0's own columns
    assert list(series)[-4:] == [
        "dist/rank0/compute_s", "dist/rank0/comm_s", "dist/rank1/compute_s", "dist/rank1/comm_s",
    ]  # fmt: skip
    assert series["dist/rank0/comm_s"][1] == pytest.approx(0.06)
    assert series["dist/rank0/compute_s"][1] == pytest.approx(0.09)
    assert series["dist/rank1/compute_s"][1] == pytest.approx(0.14)
    assert len({len(column) for column in series.values()}) == 1  # aligned with the step column


def test_ranks_are_aligned_by_step_and_a_missing_rank_is_none() -> None:
    runs = [rank_run(0, [0.2, 0.2, 0.2], [0.05, 0.05, 0.05]), rank_run(1, [0.2, 0.2], [0.01, 0.01])]
    series = merge_series(runs, world_size=3)
    assert series["dist/rank1/comm_s"] == [0.01, 0.01, None]  # rank 1 crashed after step 2
    assert series["dist/rank2/compute_s"] == [None, None, None]  # rank 2 left nothing


def test_without_rank_0s_rows_the_lowest_rank_with_rows_is_the_base() -> None:
    runs = [rank_run(0, [], []), rank_run(1, [0.3, 0.3], [0.1, 0.1])]
    series = merge_series(runs, world_size=2)
    assert series[m.STEP] == [1.0, 2.0]
    assert series["dist/rank0/comm_s"] == [None, None]
    assert merge_series([rank_run(0, [], [])], world_size=1) == {}


def test_the_straggler_is_the_slowest_rank_by_compute_and_the_others_wait() -> None:
    runs = straggler_runs()
    series = merge_series(runs, world_size=2)
    summary = summarize(series, warmup=1, profiler_steps=None)
    steady = {series[m.STEP][i] for i in steady_rows(series, warmup_steps=summary.warmup_steps, profiler_steps=None)}
    dist = distributed_summary(runs, world_size=2, strategy="ddp", backend="gloo", steady_steps=steady)

    assert dist.slowest_rank == 1
    # The median rank of two is the lower one: (0.14 - 0.09) / 0.09.
    assert dist.rank_imbalance_pct == pytest.approx(100 * 0.05 / 0.09)
    rank0, rank1 = dist.ranks
    assert rank0.comm_median_s == pytest.approx(0.06)
    assert rank1.comm_median_s == pytest.approx(0.01)
    assert rank0.step_time_median_s == rank1.step_time_median_s == pytest.approx(0.15)  # step time hides it
    assert rank1.host_rss_peak_mib == 511.0
    assert dist.comm_share == pytest.approx((0.06 / 0.15 + 0.01 / 0.15) / 2)
    assert (dist.world_size, dist.strategy, dist.backend) == (2, "ddp", "gloo")


def test_per_rank_medians_use_the_runs_warm_up_cut() -> None:
    runs = straggler_runs()
    with_warmup = distributed_summary(runs, world_size=2, strategy="ddp", backend=None, steady_steps={2.0, 3.0})
    everything = distributed_summary(
        runs, world_size=2, strategy="ddp", backend=None, steady_steps={float(s) for s in range(1, 11)}
    )
    assert with_warmup.ranks[0].comm_median_s == pytest.approx(0.06)
    assert everything.ranks[0].step_time_median_s == pytest.approx(0.15)
    assert with_warmup.ranks[0].host_rss_peak_mib == 510.0  # peaks cover every step


def test_unmeasured_communication_leaves_compute_and_the_slowest_rank_unknown() -> None:
    runs = [rank_run(0, [0.2] * 4, None), rank_run(1, [0.2] * 4, None)]
    series = merge_series(runs, world_size=2)
    assert series["dist/rank0/comm_s"] == [None] * 4
    assert series["dist/rank0/compute_s"] == [None] * 4
    dist = distributed_summary(runs, world_size=2, strategy="fsdp", backend="nccl", steady_steps={2.0, 3.0, 4.0})
    assert dist.ranks[0].step_time_median_s == pytest.approx(0.2)
    assert dist.ranks[0].comm_median_s is None
    assert dist.slowest_rank is None
    assert dist.rank_imbalance_pct is None
    assert dist.comm_share is None


def test_one_measured_rank_names_no_slowest_rank() -> None:
    runs = [rank_run(0, [0.2] * 3, [0.05] * 3)]
    dist = distributed_summary(runs, world_size=2, strategy="ddp", backend="gloo", steady_steps={2.0, 3.0})
    assert dist.ranks[1] == m.RankSummary(rank=1)
    assert dist.slowest_rank is None


def failed(message: str, step: int = 3, kind: str = "PlantedCrashError") -> m.Status:
    return m.Status(state="failed", reason="error", step=step, stage="train", exception_type=kind, message=message)


def test_all_ranks_completed_is_completed() -> None:
    status, warnings = merge_status(straggler_runs(), world_size=2, launcher_exit=0)
    assert status == COMPLETED
    assert warnings == []


def test_the_first_failure_in_time_is_the_status_and_names_its_rank() -> None:
    runs = [
        rank_run(0, [0.2], [0.1], status=failed("Connection reset by peer", kind="RuntimeError"), failed_at=20.0),
        rank_run(1, [0.2], [0.1], status=failed("planted crash at step 3"), failed_at=10.0),
    ]
    status, warnings = merge_status(runs, world_size=2, launcher_exit=1)
    assert status.exception_type == "PlantedCrashError"
    assert status.message == "rank 1: planted crash at step 3"
    assert (status.stage, status.step) == ("train", 3)
    assert warnings == ["rank 0 failed too, after rank 1"]


def test_a_rank_without_a_record_is_a_failure_even_when_the_others_completed() -> None:
    runs = [rank_run(0, [0.2] * 3, [0.1] * 3), rank_run(1, [0.2] * 2, [0.1] * 2, record=False)]
    status, _ = merge_status(runs, world_size=2, launcher_exit=1)
    assert (status.state, status.exception_type) == ("failed", "RankExited")
    assert "rank 1 ended without a record" in (status.message or "")
    assert "code 1" in (status.message or "")


def test_a_vanished_rank_is_named_before_the_errors_it_may_have_caused() -> None:
    runs = [
        rank_run(0, [0.2], [0.1], status=failed("Connection reset by peer", kind="RuntimeError"), failed_at=5.0),
        rank_run(1, [0.2], [0.1], record=False),
    ]
    status, _ = merge_status(runs, world_size=2, launcher_exit=1)
    assert status.message == (
        "rank 1 ended without a record (killed, or out of memory?); then rank 0: Connection reset by peer"
    )


def test_an_early_stop_reports_the_rank_that_decided_it_not_the_peers_that_followed() -> None:
    stopped = m.Status(state="stopped_early", reason="timeout", step=4)
    followed = m.Status(state="stopped_early", reason="peer", step=4)
    runs = [rank_run(0, [0.2] * 4, [0.1] * 4, status=followed), rank_run(1, [0.2] * 4, [0.1] * 4, status=stopped)]
    status, _ = merge_status(runs, world_size=2, launcher_exit=0)
    assert status == stopped


def test_a_launcher_failing_after_every_rank_finished_is_a_warning() -> None:
    status, warnings = merge_status(straggler_runs(), world_size=2, launcher_exit=1)
    assert status == COMPLETED
    assert warnings == ["the launcher exited with code 1 after every rank finished"]


def test_non_finite_events_of_all_ranks_once_each() -> None:
    event = m.NonFiniteEvent(step=3, source="grad", key="gradients", value="nan", parameters=["w"])
    late = m.NonFiniteEvent(step=2, source="log", key="loss", value="inf")
    runs = [
        RankRun(0, {}, RankRecord(rank=0, status=COMPLETED, non_finite=[event])),
        RankRun(1, {}, RankRecord(rank=1, status=COMPLETED, non_finite=[event, late])),
        RankRun(2, {}, None),
    ]
    assert merge_non_finite(runs) == [late, event]


def test_a_merged_run_is_a_valid_metrics_document() -> None:
    runs = straggler_runs(30)
    series = merge_series(runs, world_size=2)
    dist = distributed_summary(runs, world_size=2, strategy="ddp", backend="gloo", steady_steps={5.0, 6.0})
    metrics = make_metrics(series=series).model_copy(update={"distributed": dist})
    assert m.Metrics.model_validate(metrics.model_dump(mode="json")).distributed == dist


def test_merging_imports_no_torch() -> None:
    code = "import sys, canary_action.metrics.merge; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)
