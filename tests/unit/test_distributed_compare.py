"""Multi-process runs: rank imbalance and communication-time checks, world-size comparability, the
communication suspect, and the per-rank report. Single-process comparisons must not change at all."""

from __future__ import annotations

import json
import random
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import jsonschema
import pytest

from canary_action.compare.command import ALLOWABLE
from canary_action.compare.comparability import LEARNING_FIELDS, PERF_FIELDS
from canary_action.compare.distributed import straggler
from canary_action.compare.result import CompareResult
from canary_action.compare.runs import RunData
from canary_action.compare.verdict import compare
from canary_action.config.thresholds import TIERS
from canary_action.metrics import schema
from canary_action.metrics.schema import Distributed, RankSummary
from canary_action.report.render import render
from tests.unit.test_compare import by_name, history, run

DISTRIBUTED_CHECKS = {"rank_imbalance", "communication_time"}


def rank_columns(
    num_steps: int,
    *,
    world_size: int,
    compute_s: float,
    collective_s: float,
    slow_rank: int | None = None,
    slow_factor: float = 1.0,
    seed: int = 0,
) -> dict[str, list[float | None]]:
    """Per-rank compute and comm columns and the step time they make: every rank leaves the all-reduce together,
    so a step is the slowest rank's compute plus the transfer, and each rank's comm is the rest of its step."""
    rng = random.Random(seed)
    columns: dict[str, list[float | None]] = {schema.STEP_TIME_S: []}
    for rank in range(world_size):
        columns[f"{schema.RANK_PREFIX}{rank}/compute_s"] = []
        columns[f"{schema.RANK_PREFIX}{rank}/comm_s"] = []
    for step in range(num_steps):
        first = 25.0 if step == 0 else 1.0  # a slow first step, as in a real run
        computes = [
            first * compute_s * (slow_factor if rank == slow_rank else 1.0) * (1 + rng.gauss(0, 0.02))
            for rank in range(world_size)
        ]
        transfer = collective_s * (1 + rng.gauss(0, 0.03))
        total = max(computes) + transfer
        columns[schema.STEP_TIME_S].append(total)
        for rank, compute in enumerate(computes):
            columns[f"{schema.RANK_PREFIX}{rank}/compute_s"].append(compute)
            columns[f"{schema.RANK_PREFIX}{rank}/comm_s"].append(total - compute)
    return columns


Strategy = Literal["ddp", "fsdp", "deepspeed"]


def distributed_block(
    columns: dict[str, list[float | None]], world_size: int, strategy: Strategy, backend: str
) -> dict[str, Any]:
    """What the training side summarises: per-rank medians of the steps after the first, the slowest rank."""

    def median(name: str) -> float:
        return statistics.median(v for v in columns[name][1:] if v is not None)

    step = median(schema.STEP_TIME_S)
    ranks = [
        RankSummary(
            rank=r,
            step_time_median_s=step,
            compute_median_s=median(f"{schema.RANK_PREFIX}{r}/compute_s"),
            comm_median_s=median(f"{schema.RANK_PREFIX}{r}/comm_s"),
            peak_allocated_mib=1950.0 + 10 * r,
        )
        for r in range(world_size)
    ]
    computes = [r.compute_median_s or 0.0 for r in ranks]
    slowest = max(range(world_size), key=computes.__getitem__)
    middle = statistics.median_low(computes)  # the median *rank*, as metrics/merge.py records it
    return Distributed(
        world_size=world_size,
        strategy=strategy,
        backend=backend,
        ranks=ranks,
        slowest_rank=slowest,
        rank_imbalance_pct=100 * (computes[slowest] / middle - 1),
        comm_share=statistics.median((r.comm_median_s or 0.0) / step for r in ranks),
    ).model_dump()


def dist_run(
    seed: int = 0,
    *,
    world_size: int = 4,
    compute_s: float = 0.08,
    collective_s: float = 0.02,
    slow_rank: int | None = None,
    slow_factor: float = 1.0,
    strategy: Strategy = "ddp",
    backend: str = "nccl",
    num_steps: int = 60,
    **overrides: Any,
) -> RunData:
    """A multi-process run of the same workload as test_compare's `run()`."""
    columns = rank_columns(
        num_steps, world_size=world_size, compute_s=compute_s, collective_s=collective_s, slow_rank=slow_rank,
        slow_factor=slow_factor, seed=seed,
    )  # fmt: skip
    config = {"num_processes": world_size, "distributed": {"strategy": strategy, "backend": backend}}
    return run(
        seed,
        num_steps=num_steps,
        series={**columns, **overrides.pop("series", {})},
        config={**config, **overrides.pop("config", {})},
        distributed=distributed_block(columns, world_size, strategy, backend),
        **overrides,
    )


def dist_history(n: int, **kwargs: Any) -> list[RunData]:
    return [dist_run(100 + i, **kwargs) for i in range(n)]


def evidence(result: CompareResult) -> Sequence[str]:
    return result.suspects[0].evidence if result.suspects else []


def test_balanced_ranks_pass_both_checks() -> None:
    result = compare(dist_run(1), dist_history(3), TIERS["default"])
    checks = by_name(result)
    assert checks["rank_imbalance"].status == "pass", checks["rank_imbalance"].message
    assert checks["communication_time"].status == "pass", checks["communication_time"].message
    assert checks["rank_imbalance"].group == checks["communication_time"].group == "perf"
    assert result.verdict == "pass", result.reason
    assert checks["communication_time"].interval is not None  # step_time's statistics


def test_a_planted_straggler_fails_rank_imbalance_with_communication_first() -> None:
    slow = dist_run(1, slow_rank=2, slow_factor=1.5)
    result = compare(slow, dist_history(3), TIERS["default"])
    checks = by_name(result)
    assert checks["rank_imbalance"].status == "fail"
    assert checks["rank_imbalance"].current == pytest.approx(50, abs=5)
    assert "rank 2's compute" in checks["rank_imbalance"].message
    # The straggler's cost counts once: the collectives themselves did not slow down.
    assert checks["communication_time"].status == "pass", checks["communication_time"].message
    top = result.suspects[0]
    assert top.category == "communication"
    assert top.evidence[0].startswith("rank 2's compute 120 ms per step vs the median rank's 80")
    assert "(+50 %)" in top.evidence[0]
    assert top.evidence[1].startswith("the other ranks wait in collectives")
    assert top.evidence[2].startswith("rank 2 was the slowest in ")
    assert "rank_imbalance" in top.explains
    assert "straggler" in top.summary


def test_a_straggler_in_two_processes_is_caught_too() -> None:
    # Two ranks (the CPU canary): the median rank is the lower one, so the slow rank reads against the other.
    slow = dist_run(1, world_size=2, slow_rank=1, slow_factor=1.5, backend="gloo")
    result = compare(slow, dist_history(3, world_size=2, backend="gloo"), TIERS["default"])
    assert by_name(result)["rank_imbalance"].status == "fail"
    assert by_name(result)["rank_imbalance"].current == pytest.approx(50, abs=5)
    assert result.suspects[0].category == "communication"
    assert result.suspects[0].evidence[0].startswith("rank 1's compute")


def test_slower_collectives_fail_communication_time() -> None:
    result = compare(dist_run(1, collective_s=0.04), dist_history(3), TIERS["default"])
    checks = by_name(result)
    comm = checks["communication_time"]
    assert comm.status == "fail", comm.message
    assert comm.delta_pct == pytest.approx(100, abs=10)
    assert comm.interval is not None
    assert comm.interval.low > 0
    assert checks["rank_imbalance"].status == "pass"
    top = result.suspects[0]
    assert top.category == "communication"
    assert top.evidence[0].startswith("collective time per step 20 ms → 40 ms")
    assert {"communication_time", "step_time"} <= set(top.explains)


def test_collectives_growing_inside_the_noise_pass() -> None:
    result = compare(dist_run(1, collective_s=0.021), dist_history(3), TIERS["default"])
    assert by_name(result)["communication_time"].status == "pass"


def test_baselines_as_imbalanced_warn_instead_of_failing() -> None:
    baselines = dist_history(3, slow_rank=0, slow_factor=1.2)
    result = compare(dist_run(1, slow_rank=0, slow_factor=1.22), baselines, TIERS["default"])
    check = by_name(result)["rank_imbalance"]
    assert check.status == "warn", check.message
    assert "the baselines were as imbalanced" in check.message


def test_without_a_baseline_imbalance_is_judged_alone() -> None:
    result = compare(dist_run(1, slow_rank=3, slow_factor=1.5), [], TIERS["default"])
    checks = by_name(result)
    assert checks["rank_imbalance"].status == "fail"
    assert "judged alone" in checks["rank_imbalance"].message
    assert checks["communication_time"].status == "skip"
    assert result.suspects[0].category == "communication"
    balanced = compare(dist_run(1), [], TIERS["default"])
    assert balanced.verdict == "neutral"
    assert by_name(balanced)["rank_imbalance"].status == "pass"


def test_another_world_size_is_not_comparable_unless_allowed() -> None:
    result = compare(dist_run(1, world_size=8), dist_history(3), TIERS["default"])
    checks = by_name(result)
    assert result.verdict == "neutral"
    assert not result.comparability.comparable
    assert any(c.field == "world_size" and c.baseline == "4" and c.current == "8"
               for c in result.comparability.differences)  # fmt: skip
    for name in ("step_time", "rank_imbalance", "communication_time"):
        assert checks[name].status == "not-comparable", name
    assert "world_size 4 → 8" in checks["rank_imbalance"].message
    assert checks["loss_curve"].status == "not-comparable"  # the effective batch changed: learning too

    allowed = compare(dist_run(1, world_size=8), dist_history(3), TIERS["default"], allowed=["world_size"])
    assert allowed.comparability.comparable
    assert {by_name(allowed)[n].status for n in ("step_time", "rank_imbalance", "communication_time")} <= {
        "pass",
        "fail",
        "warn",
    }
    assert "world_size" in ALLOWABLE


def test_a_single_process_baseline_is_another_world_size() -> None:
    result = compare(dist_run(1, world_size=2), history(3), TIERS["default"])
    assert [c.field for c in result.comparability.differences] == ["world_size"]
    allowed = compare(dist_run(1, world_size=2), history(3), TIERS["default"], allowed=["world_size"])
    comm = by_name(allowed)["communication_time"]
    assert comm.status == "skip"
    assert "one process" in comm.message


def test_another_strategy_is_not_comparable() -> None:
    result = compare(dist_run(1, strategy="fsdp"), dist_history(2), TIERS["default"])
    assert [c.field for c in result.comparability.differences] == ["strategy"]
    assert by_name(result)["step_time"].status == "not-comparable"
    assert "strategy" in PERF_FIELDS
    assert "strategy" not in LEARNING_FIELDS  # the same data and updates: the loss curves stay comparable
    assert "world_size" in LEARNING_FIELDS


def test_unmeasured_collectives_skip_communication_time() -> None:
    unmeasured = {f"{schema.RANK_PREFIX}{r}/comm_s": None for r in range(4)}
    result = compare(dist_run(1, series=unmeasured), dist_history(2), TIERS["default"])
    comm = by_name(result)["communication_time"]
    assert comm.status == "skip"
    assert "recorded no per-rank time in collectives" in comm.message


def test_single_process_comparisons_are_unchanged() -> None:
    result = compare(run(1), history(3), TIERS["default"])
    assert not DISTRIBUTED_CHECKS & {c.name for c in result.checks}
    assert result.current.distributed is None
    assert result.comparability.differences == []
    assert result.verdict == "pass"
    slow = compare(run(1, step_time_s=0.13), history(3), TIERS["default"])
    assert all(s.category != "communication" for s in slow.suspects)
    assert PERF_FIELDS["world_size"](run(1)) == 1


def test_the_world_size_reaches_the_result_and_round_trips() -> None:
    result = compare(dist_run(1, slow_rank=2, slow_factor=1.5), dist_history(2), TIERS["default"])
    assert result.current.distributed is not None
    assert result.current.distributed.world_size == 4
    assert result.baselines[0].distributed is not None
    assert CompareResult.model_validate_json(result.model_dump_json()) == result


def test_straggler_uses_the_recorded_imbalance() -> None:
    found = straggler(dist_run(1, slow_rank=2, slow_factor=1.5).distributed)
    assert found is not None
    assert found.rank == 2
    assert found.compute_s / found.median_s == pytest.approx(1 + found.imbalance_pct / 100)
    assert straggler(None) is None


def test_a_world_size_change_is_communication_evidence() -> None:
    current = dist_run(1, world_size=8, collective_s=0.03)
    result = compare(current, dist_history(3), TIERS["default"], allowed=["world_size"])
    comm = next(s for s in result.suspects if s.category == "communication")
    assert "world size 4 → 8" in comm.evidence


def test_a_torch_bump_on_a_distributed_run_points_at_communication() -> None:
    bumped = dist_run(1, collective_s=0.04, env={"torch": "2.14.0+cu128", "nccl": "2.28.1"})
    result = compare(bumped, dist_history(3), TIERS["default"])
    comm = next(s for s in result.suspects if s.category == "communication")
    assert comm is result.suspects[0]
    assert "torch 2.13.0+cu128 → 2.14.0+cu128" in comm.evidence
    assert "nccl 2.27.3 → 2.28.1" in comm.evidence


def test_a_distributed_config_change_is_communication_evidence() -> None:
    changed = dist_run(1, collective_s=0.04, config={"distributed": {"strategy": "ddp", "backend": "nccl",
                                                                      "bucket_cap_mb": 100}})  # fmt: skip
    result = compare(changed, dist_history(3), TIERS["default"])
    comm = next(s for s in result.suspects if s.category == "communication")
    assert "distributed.bucket_cap_mb none → 100" in comm.evidence


def test_the_reports_show_the_world_size_and_the_ranks() -> None:
    result = compare(dist_run(1, slow_rank=2, slow_factor=1.5), dist_history(2), TIERS["default"])
    comment = render(result, "comment")
    assert "4 processes, ddp, nccl" in comment
    assert "<details><summary>Per-rank</summary>" in comment
    assert "| 2 (slowest) |" in comment
    single = render(compare(run(1), history(2), TIERS["default"]), "comment")
    assert "Per-rank" not in single
    assert "processes" not in single


def test_the_per_rank_table_is_capped() -> None:
    result = compare(dist_run(1, world_size=80, num_steps=30), [], TIERS["default"])
    comment = render(result, "comment")
    assert "… and 16 more" in comment
    assert comment.count("\n| 7") <= 11  # ranks 7, 70-79 would be 11 rows; only 64 rows are shown


def test_the_published_result_schema_accepts_a_distributed_result() -> None:
    """What `canary schema --result` prints: check names are plain strings, the distributed block is optional."""
    document = CompareResult.model_json_schema()
    validator = jsonschema.Draft202012Validator(document)
    for result in (
        compare(dist_run(1, slow_rank=2, slow_factor=1.5), dist_history(2), TIERS["default"]),
        compare(run(1), history(2), TIERS["default"]),
    ):
        assert list(validator.iter_errors(result.model_dump(mode="json"))) == []


def test_a_straggler_planted_by_fault_injection_still_ranks_communication_first() -> None:
    """As `--set fault_injection.slow_rank=1` writes it: the block's other keys at their defaults (no sleep)."""
    planted = {"fault_injection": {"sleep_s_per_step": 0.0, "slow_rank": 1, "slow_rank_sleep_s": 0.05}}
    current = dist_run(1, slow_rank=1, slow_factor=1.5, config=planted)
    result = compare(current, dist_history(3), TIERS["smoke"])
    top = result.suspects[0]
    assert top.category == "communication"
    assert top.evidence[0].startswith("rank 1's compute")
    assert "fault_injection.slow_rank none → 1" in top.evidence[1:]
    # A 0.0 s sleep plants nothing: it explains nothing.
    assert not [line for s in result.suspects for line in s.evidence if "sleep_s_per_step" in line]


def test_a_result_written_before_multi_process_runs_still_loads(tmp_path: Path) -> None:
    """Report mode reads results an older action wrote: the new keys must not be required."""
    from canary_action.report.load import read_result
    from tests.report_cases import CASES

    old = CASES["passing"]().model_dump(mode="json")
    for key in ("max_rank_imbalance_pct", "max_comm_time_increase_pct"):
        del old["thresholds"][key]
    for ref in (old["current"], *old["baselines"]):
        ref.pop("distributed", None)
    path = tmp_path / "result.json"
    path.write_text(json.dumps(old))
    assert read_result(path).verdict == "pass"
