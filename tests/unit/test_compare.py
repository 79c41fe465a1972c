"""The comparison end to end on synthetic runs: checks, comparability, verdicts, the result document."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from canary_action.compare.result import RESULT_SCHEMA_VERSION, Check, CompareResult
from canary_action.compare.runs import RunData, from_metrics
from canary_action.compare.verdict import NO_BASELINE, compare
from canary_action.config.thresholds import TIERS, Thresholds
from canary_action.metrics import schema
from canary_action.metrics.schema import NonFiniteEvent, Stability, Status
from canary_action.metrics.summarize import summarize
from tests.factories import make_metrics, make_series

SAME_DATA = {"dataset_fingerprint": "d" * 64}
NIGHTLY = TIERS["nightly"].model_copy(update={"min_step_count": 20})  # nightly limits on 60-step runs


def run(seed: int = 0, *, num_steps: int = 60, step_time_s: float = 0.1, **overrides: Any) -> RunData:
    """A run of the same workload as every other `run()`; the seed only draws other noise."""
    overrides.setdefault("workload", {})
    overrides["workload"] = {**SAME_DATA, **overrides["workload"]}
    overrides["config"] = {"seed": 0, **overrides.get("config", {})}
    overrides.setdefault("run", {})
    overrides["run"] = {"run_id": f"run-{seed}-{step_time_s}", **overrides["run"]}
    series = {schema.NUM_TOKENS: make_series(num_steps)[schema.NUM_TOKENS], **overrides.pop("series", {})}
    overrides["series"] = series  # one dataset, one seed: every run sees the same batches
    return from_metrics(make_metrics(num_steps=num_steps, step_time_s=step_time_s, seed=seed, **overrides), "x")


def history(n: int, **kwargs: Any) -> list[RunData]:
    return [run(100 + i, **kwargs) for i in range(n)]


def by_name(result: CompareResult) -> dict[str, Check]:
    return {c.name: c for c in result.checks}


def test_a_run_like_its_baselines_passes_every_check() -> None:
    result = compare(run(1), history(3), TIERS["default"])
    assert result.verdict == "pass", result.reason
    assert {c.status for c in result.checks} <= {"pass", "skip"}
    assert result.suspects == []
    step = by_name(result)["step_time"]
    assert step.interval is not None
    assert step.interval.low < 0 < step.interval.high


def test_a_clear_slowdown_fails_step_time_with_an_interval() -> None:
    result = compare(run(1, step_time_s=0.13), history(5), TIERS["default"])
    assert result.verdict == "regression"
    step = by_name(result)["step_time"]
    assert step.status == "fail"
    assert step.delta_pct is not None
    assert 25 < step.delta_pct < 35
    assert step.interval is not None
    assert step.interval.low > 10
    assert result.checks[0].status == "fail"  # failures first
    assert result.noise is not None
    assert result.noise.baseline_runs == 5
    assert result.noise.run_spread_pct is not None


def test_a_slowdown_inside_the_threshold_passes() -> None:
    result = compare(run(1, step_time_s=0.103), history(5), TIERS["default"])
    assert by_name(result)["step_time"].status == "pass"


def test_tokens_per_sec_does_not_fail_twice_for_one_cause() -> None:
    slow = run(100, num_steps=60, step_time_s=0.13)  # the same batches as the first baseline: same tokens
    result = compare(slow, [run(100)], TIERS["default"])
    checks = by_name(result)
    assert checks["step_time"].status == "fail"
    assert checks["tokens_per_sec"].status == "skip"
    assert "mirrors step_time" in checks["tokens_per_sec"].message
    assert checks["tokens_per_sec"].fix is None  # judged through step_time: it cannot make the verdict neutral


def test_noisy_baselines_widen_the_limit_and_say_so() -> None:
    noisy = [run(100 + i, step_time_s=0.1 * (1 + 0.08 * (-1) ** i)) for i in range(5)]  # +-8 % between runs
    result = compare(run(1, step_time_s=0.115), noisy, NIGHTLY)
    step = by_name(result)["step_time"]
    assert step.status != "fail"  # +15 % is inside what these baselines vary by
    assert step.threshold is not None
    assert step.threshold > NIGHTLY.max_step_time_increase_pct
    assert step.threshold_note is not None
    assert "run-to-run spread" in step.threshold_note


def test_one_baseline_says_the_spread_was_assumed() -> None:
    result = compare(run(1, step_time_s=0.2), [run(2)], NIGHTLY)
    step = by_name(result)["step_time"]
    assert step.status == "fail"
    assert result.noise is not None
    assert result.noise.run_spread_pct is None
    assert "assumed" in result.noise.method


def test_too_few_steady_steps_skip_the_perf_checks() -> None:
    result = compare(run(1, num_steps=8), history(2, num_steps=8), TIERS["perf"])
    assert by_name(result)["step_time"].status == "skip"
    assert "min_step_count" in by_name(result)["step_time"].message


def test_a_nan_fails_without_any_baseline() -> None:
    nan_run = run(
        1,
        stability=Stability(
            non_finite=[NonFiniteEvent(step=7, source="loss", key="loss", value="nan")], num_nan_steps=1
        ),
        status=Status(state="stopped_early", reason="non_finite", step=7),
    )
    result = compare(nan_run, [], TIERS["smoke"])
    checks = by_name(result)
    assert result.verdict == "regression"
    assert checks["nan_steps"].status == "fail"
    assert "step 7" in checks["nan_steps"].message
    assert checks["run_status"].status == "skip"  # the NaN check owns this failure


def test_no_baseline_is_neutral_and_says_how_to_make_one() -> None:
    result = compare(run(1), [], TIERS["default"])
    assert result.verdict == "neutral"
    assert result.reason == NO_BASELINE
    assert by_name(result)["step_time"].status == "skip"
    assert by_name(result)["nan_steps"].status == "pass"


def test_another_gpu_makes_perf_not_comparable_unless_allowed() -> None:
    a100 = {"gpus": [{"index": 0, "name": "NVIDIA A100-SXM4-80GB", "memory_total_mib": 81920.0}]}
    result = compare(run(1, step_time_s=0.2), [run(2, env=a100)], TIERS["default"])
    checks = by_name(result)
    assert result.verdict == "neutral"
    assert checks["step_time"].status == "not-comparable"
    assert checks["max_memory"].status == "not-comparable"
    assert "gpu" in checks["step_time"].message
    assert "A100" in checks["step_time"].message
    assert [d.field for d in result.comparability.differences] == ["gpu"]
    allowed = compare(run(1, step_time_s=0.2), [run(2, env=a100)], TIERS["default"], allowed=["gpu"])
    assert by_name(allowed)["step_time"].status == "fail"


def test_a_library_bump_is_not_a_comparability_reason() -> None:
    result = compare(run(1, step_time_s=0.2, env={"torch": "2.14.0+cu128"}), history(2), TIERS["default"])
    assert by_name(result)["step_time"].status == "fail"
    assert any(c.field == "torch" for c in result.env_changes)


def test_baselines_of_another_shape_are_left_out_when_others_match() -> None:
    other = run(9, config={"max_length": 1024})
    same = [run(100 + i, config={"max_length": 512}) for i in range(2)]
    result = compare(run(1, config={"max_length": 512}), [other, *same], TIERS["default"])
    assert by_name(result)["step_time"].status == "pass"
    assert result.comparability.comparable
    assert any("max_length" in why for why in result.comparability.excluded_baselines)


@pytest.mark.parametrize(("extra_mib", "status"), [(1000.0, "fail"), (50.0, "pass")])
def test_peak_memory_growth(extra_mib: float, status: str) -> None:
    series = make_series(60, seed=1)
    series[schema.PEAK_ALLOCATED_MIB] = [v + extra_mib for v in series[schema.PEAK_ALLOCATED_MIB] if v is not None]
    result = compare(run(1, series=series), history(3), TIERS["default"])
    check = by_name(result)["max_memory"]
    assert check.status == status
    assert check.delta == pytest.approx(extra_mib)
    assert check.threshold == pytest.approx(min(500, 0.2 * 1950))


def test_memory_limit_is_the_tighter_of_mib_and_percent() -> None:
    # 390 MiB (20 % of 1950) is tighter than 500 MiB: +400 MiB fails.
    series = make_series(60, seed=1)
    series[schema.PEAK_ALLOCATED_MIB] = [v + 400 for v in series[schema.PEAK_ALLOCATED_MIB] if v is not None]
    assert by_name(compare(run(1, series=series), history(2), TIERS["default"]))["max_memory"].status == "fail"


def test_a_crashed_run_is_crashed_not_regression() -> None:
    crashed = run(1, status=Status(state="failed", stage="train", step=4, exception_type="OutOfMemoryError"))
    result = compare(crashed, history(2), TIERS["default"])
    assert result.verdict == "crashed"
    assert "OutOfMemoryError" in result.reason


def test_a_timeout_fails_run_status() -> None:
    late = run(1, status=Status(state="stopped_early", reason="timeout", step=40))
    result = compare(late, history(2), TIERS["default"])
    assert by_name(result)["run_status"].status == "fail"


def _losses(scale: float, num_steps: int = 60) -> list[float | None]:
    return [scale * (2.5 * math.exp(-s / 15) + 1.2) for s in range(1, num_steps + 1)]


def test_a_loss_curve_off_the_band_warns_and_can_fail() -> None:
    baselines = [run(100 + i, series={schema.LOSS: _losses(1.0)}) for i in range(2)]
    higher = run(1, series={schema.LOSS: _losses(1.4)})
    checks = by_name(compare(higher, baselines, TIERS["default"]))
    assert checks["loss_curve"].status == "warn"
    assert checks["tail_loss"].status == "pass"  # +40 % is inside max_loss_increase_pct (50)
    strict = TIERS["default"].model_copy(update={"fail_on_learning": True})
    assert by_name(compare(higher, baselines, strict))["loss_curve"].status == "fail"
    same = run(1, series={schema.LOSS: _losses(1.01)})
    assert by_name(compare(same, baselines, TIERS["default"]))["loss_curve"].status == "pass"


def test_learning_is_not_comparable_across_seeds() -> None:
    result = compare(run(1, config={"seed": 7}), history(2), TIERS["default"])
    assert by_name(result)["loss_curve"].status == "not-comparable"
    assert by_name(result)["step_time"].status == "pass"  # the seed does not change what a step costs


def test_algorithm_metrics_are_compared_in_their_worse_direction() -> None:
    accuracy = [min(1.0, 0.5 + s / 100) for s in range(1, 61)]
    baselines = [run(100 + i, series={"algo/rewards/accuracies": accuracy}) for i in range(2)]
    worse = run(1, series={"algo/rewards/accuracies": [a - 0.3 for a in accuracy]})
    better = run(1, series={"algo/rewards/accuracies": [min(1.0, a + 0.2) for a in accuracy]})
    assert by_name(compare(worse, baselines, TIERS["default"]))["reward_accuracy"].status == "warn"
    assert by_name(compare(better, baselines, TIERS["default"]))["reward_accuracy"].status == "pass"


def test_a_rise_every_baseline_shares_is_not_divergence() -> None:
    rising = [0.001 * s * s for s in range(1, 61)]
    current = run(1, series={schema.LOSS: rising})
    assert current.divergence_step is not None
    assert by_name(compare(current, [], TIERS["default"]))["loss_divergence"].status == "fail"
    baselines = [run(100 + i, series={schema.LOSS: rising}) for i in range(2)]
    assert by_name(compare(current, baselines, TIERS["default"]))["loss_divergence"].status == "pass"


def test_the_result_round_trips_and_pins_its_version() -> None:
    result = compare(run(1, step_time_s=0.13), history(3), TIERS["default"])
    again = CompareResult.model_validate_json(result.model_dump_json())
    assert again == result
    assert result.result_schema_version == RESULT_SCHEMA_VERSION == 4
    assert list(CompareResult.model_fields) == [
        "result_schema_version", "verdict", "reason", "tier", "thresholds", "threshold_sources", "current",
        "baselines", "checks", "suspects", "comparability", "noise", "warmup", "pairing", "step_split", "env_changes",
        "config_changes", "op_changes", "curves", "numerics", "heldout", "notes",
    ]  # fmt: skip


def test_curves_are_downsampled_for_charts() -> None:
    result = compare(run(1, num_steps=500), history(2, num_steps=500), TIERS["perf"])
    names = {c.name: c for c in result.curves}
    assert set(names) == {schema.STEP_TIME_S, schema.LOSS}
    step = names[schema.STEP_TIME_S]
    assert len(step.steps) <= 120
    assert len(step.current) == len(step.baseline_low) == len(step.steps)
    assert all(
        lo is None or hi is None or lo <= hi for lo, hi in zip(step.baseline_low, step.baseline_high, strict=True)
    )


def test_thresholds_reach_the_result() -> None:
    custom = Thresholds(**{**TIERS["smoke"].model_dump(), "max_step_time_increase_pct": 1.0})
    result = compare(run(1), history(2), custom, tier="smoke", threshold_sources=["tier smoke", "file t.yaml"])
    assert result.thresholds.max_step_time_increase_pct == 1.0
    assert result.threshold_sources == ["tier smoke", "file t.yaml"]


def test_summary_columns_feed_the_view() -> None:
    series = make_series(60, seed=3)
    view = run(3, series=series)
    summary = summarize(series, warmup="auto", profiler_steps=None)
    assert view.step_time_median == pytest.approx(summary.step_time_s.median if summary.step_time_s else 0)
    assert view.steady_step_times is not None
    assert len(view.steady_step_times) == summary.num_steady_steps
    assert view.tokens_per_step is not None


def test_divergence_is_caught_in_a_50_step_smoke_run() -> None:
    learning = [2.0 * math.exp(-s / 8) + 0.6 + 0.01 * (-1) ** s for s in range(1, 31)]
    blow_up = [0.6 * 1.25**k for k in range(1, 21)]  # from step 31 the loss runs away
    current = run(1, num_steps=50, series={schema.LOSS: learning + blow_up})
    check = by_name(compare(current, history(2, num_steps=50), TIERS["smoke"]))["loss_divergence"]
    assert check.status == "fail"
    assert current.divergence_step is not None
    assert 31 <= current.divergence_step <= 36


def test_confidence_level_sets_the_intervals_and_the_test_that_a_change_is_clear() -> None:
    """Issue 15 item 6: rlhf-canary 0.1's `confidence_level`, the level of the intervals and of the test."""
    from canary_action.report.render import render

    tight = TIERS["default"].model_copy(update={"max_step_time_increase_pct": 2.0})
    results = {
        level: compare(run(1, step_time_s=0.106), history(3), tight.model_copy(update={"confidence_level": level}))
        for level in (0.8, 0.95, 0.999)
    }
    steps = {level: by_name(result)["step_time"] for level, result in results.items()}
    intervals = {level: step.interval for level, step in steps.items()}
    assert all(i is not None and i.level == level for level, i in intervals.items())
    low = {level: i.low for level, i in intervals.items() if i is not None}
    high = {level: i.high for level, i in intervals.items() if i is not None}
    assert low[0.999] < low[0.95] < low[0.8]
    assert high[0.8] < high[0.95] < high[0.999]
    assert len({step.delta_pct for step in steps.values()}) == 1
    # +6 %: clear at 95 % (the default) and fails; at 99.9 % its interval reaches below zero and it passes.
    assert steps[0.95].status == "fail"
    assert steps[0.999].status == "pass"
    assert low[0.999] < 0 < low[0.95]
    strict = results[0.999]
    assert strict.thresholds.confidence_level == 0.999  # recorded in the result
    assert strict.noise is not None
    assert "99.9 % t interval" in strict.noise.method
    assert "[low, high]: 99.9 % confidence intervals" in render(strict, "markdown")
    assert "[low, high]: 95 % confidence intervals" in render(results[0.95], "comment")


def test_a_result_without_intervals_says_no_level() -> None:
    from canary_action.report.render import render

    alone = compare(run(1), [], TIERS["default"])  # no baseline: nothing statistical was judged
    assert all(c.interval is None for c in alone.checks)
    assert "confidence intervals" not in render(alone, "comment")


def test_a_result_written_before_confidence_level_still_loads_at_95(tmp_path: Path) -> None:
    """A result.json of an older release (version 1, no confidence_level, intervals without a level): 0.95."""
    from canary_action.report.load import read_result
    from canary_action.report.render import render

    old = compare(run(1, step_time_s=0.13), history(3), TIERS["default"]).model_dump(mode="json")
    old["result_schema_version"] = 1
    del old["pairing"], old["thresholds"]["confidence_level"]
    for check in old["checks"]:
        if check["interval"] is not None:
            del check["interval"]["level"]
    path = tmp_path / "result.json"
    path.write_text(json.dumps(old), encoding="utf-8")
    loaded = read_result(path)
    assert loaded.thresholds.confidence_level == 0.95
    assert "[low, high]: 95 % confidence intervals" in render(loaded, "comment")


@pytest.mark.parametrize("unit", ["%", "pp"])
def test_a_widened_limit_names_its_unit_and_counts_in_words(unit: str) -> None:
    from canary_action.compare.perf import _widened_note

    assert _widened_note(50, 1993.7, 1, unit) == (
        f"widened from 50 {unit} to 1993.7 {unit}: the 1 baseline spread that much"
    )
    assert "the 3 baselines" in _widened_note(50, 70, 3, unit)
