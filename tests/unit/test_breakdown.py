"""The timing breakdown of steady steps, and how it moved against the baselines."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from canary_action.compare.breakdown import Breakdown, breakdown, compare_breakdowns
from canary_action.compare.runs import RunData, from_metrics
from canary_action.metrics import schema
from canary_action.metrics.schema import ProfilerSummary
from tests.factories import make_metrics, make_series


def run(seed: int = 0, *, num_steps: int = 40, **columns: list[float | None]) -> RunData:
    series = make_series(num_steps, seed=seed)
    series.update({getattr(schema, name): values for name, values in columns.items()})
    return from_metrics(make_metrics(num_steps=num_steps, seed=seed, series=series), f"run-{seed}.json")


def shifted(values: list[float | None], by: float) -> list[float | None]:
    """Every step after the first, `by` seconds longer (the first step is warm-up either way)."""
    return [v if i == 0 or v is None else v + by for i, v in enumerate(values)]


def test_components_add_up_to_the_step() -> None:
    base = make_series(40)
    times = base[schema.STEP_TIME_S]
    result = breakdown(run(GENERATION_S=[0.3 * (t or 0) for t in times]))
    assert result is not None
    assert result.data_wait_s is not None
    assert result.generation_s is not None
    assert result.compute_s + result.data_wait_s + result.generation_s == pytest.approx(result.step_s)
    assert result.generation_s == pytest.approx(0.3 * result.step_s)


def test_the_breakdown_covers_the_steady_steps_only() -> None:
    current = run()
    result = breakdown(current)
    assert result is not None
    assert current.steady_step_times is not None
    assert result.num_steps == len(current.steady_step_times)
    assert result.step_s == pytest.approx(sum(current.steady_step_times) / len(current.steady_step_times))
    assert result.tokens_per_step == current.tokens_per_step
    assert result.generation_s is None  # SFT generates nothing


def test_profiler_window_steps_are_left_out() -> None:
    series = make_series(40)
    series[schema.STEP_TIME_S] = [v * 10 if 20 <= i + 1 <= 24 else v for i, v in enumerate(series[schema.STEP_TIME_S])]
    window = ProfilerSummary(
        trace_path=None, start_step=20, end_step=24, cpu_time_total_ms=1.0, device_time_total_ms=1.0, top_ops=[]
    )
    current = from_metrics(make_metrics(num_steps=40, series=series, profiler=window), "run.json")
    result = breakdown(current)
    assert result is not None
    assert result.outlier_share == 0
    assert result.step_s == pytest.approx(0.1, rel=0.05)
    rows = current.steady_rows
    assert rows is not None
    assert not {current.loss_steps[i] for i in rows} & set(range(20, 25))


def test_rows_flagged_in_the_profiler_column_are_left_out() -> None:
    times = make_series(40)[schema.STEP_TIME_S]
    flagged = [1.0 if 30 <= i + 1 <= 32 else 0.0 for i in range(40)]
    slow = [v * 10 if flag else v for v, flag in zip(times, flagged, strict=True)]
    result = breakdown(run(STEP_TIME_S=slow, IN_PROFILER_WINDOW=flagged))
    assert result is not None
    assert result.outlier_share == 0


def test_periodic_stalls_show_as_outlier_steps() -> None:
    times = make_series(40)[schema.STEP_TIME_S]
    stalled = [v + 0.4 if (i + 1) % 10 == 0 else v for i, v in enumerate(times)]
    result = breakdown(run(STEP_TIME_S=stalled))
    assert result is not None
    assert result.outlier_share == pytest.approx(4 / result.num_steps)
    assert result.stall_s == pytest.approx(4 * 0.4 / result.num_steps, rel=0.1)


@settings(max_examples=60, deadline=None)
@given(
    times=st.lists(st.none() | st.floats(-1, 5), min_size=1, max_size=40),  # negative: no measurement
    window=st.none() | st.tuples(st.integers(1, 40), st.integers(0, 10)),
)
def test_any_run_breaks_down_over_its_steady_rows(times: list[float | None], window: tuple[int, int] | None) -> None:
    n = len(times)
    series = {**make_series(n), schema.STEP_TIME_S: times}
    summary = None
    if window is not None:
        summary = ProfilerSummary(trace_path=None, start_step=window[0], end_step=window[0] + window[1],
                                  cpu_time_total_ms=0.0, device_time_total_ms=0.0, top_ops=[])  # fmt: skip
    current = from_metrics(make_metrics(num_steps=n, series=series, profiler=summary), "run.json")
    result = breakdown(current)
    if current.steady_step_times is None:
        assert result is None
    else:
        assert result is not None
        assert result.num_steps == len(current.steady_step_times)


def test_no_breakdown_without_per_step_times() -> None:
    assert breakdown(dataclasses.replace(run(), steady_step_times=None, steady_rows=None)) is None  # rlhf-canary 0.1


def test_growth_is_shared_out_between_the_components() -> None:
    baselines = [b for s in (1, 2, 3) if (b := breakdown(run(s))) is not None]
    series = make_series(40, seed=4)
    current = breakdown(
        run(
            4,
            STEP_TIME_S=shifted(series[schema.STEP_TIME_S], 0.04),
            DATA_WAIT_S=shifted(series[schema.DATA_WAIT_S], 0.03),
        )
    )
    assert current is not None
    delta = compare_breakdowns(current, baselines)
    assert delta.step.baseline_s == pytest.approx(sum(b.step_s for b in baselines) / 3)
    assert delta.step.delta_s == pytest.approx(0.04, rel=0.1)
    assert delta.data_wait is not None
    assert delta.data_wait.delta_s == pytest.approx(0.03, rel=0.05)
    assert delta.data_wait.share == pytest.approx(0.75, abs=0.1)
    assert delta.compute.share is not None
    assert delta.data_wait.share + delta.compute.share == pytest.approx(1.0)
    assert delta.generation is None


def test_shares_are_none_when_the_step_did_not_get_slower() -> None:
    base = Breakdown(30, 0.1, 0.01, None, 0.09, 0.0, 0.0, 4000.0)
    faster = Breakdown(30, 0.09, 0.01, None, 0.08, 0.0, 0.0, 4000.0)
    delta = compare_breakdowns(faster, [base])
    assert delta.step.delta_s < 0
    assert delta.compute.share is None


def test_a_component_missing_in_every_baseline_is_not_compared() -> None:
    base = Breakdown(30, 0.1, None, None, 0.1, 0.0, 0.0, None)
    current = Breakdown(30, 0.2, 0.1, None, 0.1, 0.0, 0.0, 4000.0)
    delta = compare_breakdowns(current, [base])
    assert delta.data_wait is None
    assert delta.baseline_tokens_per_step is None


def test_comparing_needs_a_baseline() -> None:
    with pytest.raises(ValueError, match="baseline"):
        compare_breakdowns(Breakdown(30, 0.1, None, None, 0.1, 0.0, 0.0, None), [])
