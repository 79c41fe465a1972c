"""Summaries derived from the series: warm-up, steady-state figures, divergence and grad-norm spikes."""

from __future__ import annotations

import json
import math
import random
import statistics

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from canary_action.metrics import schema
from canary_action.metrics.summarize import (
    detect_warmup,
    find_divergence,
    find_grad_norm_spikes,
    summarize,
)
from tests.factories import make_series

ANY_FLOAT = st.floats(allow_nan=True, allow_infinity=True)
COLUMNS = [
    schema.STEP, schema.STEP_TIME_S, schema.DATA_WAIT_S, schema.GENERATION_S, schema.NUM_TOKENS,
    schema.NUM_SAMPLES, schema.LOSS, schema.GRAD_NORM, schema.PEAK_ALLOCATED_MIB, schema.PEAK_RESERVED_MIB,
    schema.HOST_RSS_MIB, schema.GPU_UTILIZATION_PCT, schema.IN_PROFILER_WINDOW,
]  # fmt: skip


@st.composite
def series_strategy(draw: st.DrawFn) -> dict[str, list[float | None]]:
    n = draw(st.integers(0, 60))
    names = draw(st.lists(st.sampled_from(COLUMNS), unique=True))
    return {name: draw(st.lists(st.none() | ANY_FLOAT, min_size=n, max_size=n)) for name in names}


def decreasing_loss(rng: random.Random, n: int = 50, noise: float = 0.2) -> list[float | None]:
    return [2.5 * math.exp(-t / 15) + 1.2 + rng.gauss(0, noise) for t in range(n)]


# --- warm-up -------------------------------------------------------------------------------------------


@given(st.lists(ANY_FLOAT, max_size=200))
def test_warmup_is_within_one_and_half_the_run(times: list[float]) -> None:
    warmup = detect_warmup(times)
    assert warmup == 0 if not times else 1 <= warmup <= max(1, len(times) // 2)


def test_warmup_always_excludes_step_one() -> None:
    assert detect_warmup([]) == 0
    assert detect_warmup([0.5]) == 1
    assert detect_warmup([0.1] * 50) == 1  # flat: rounding-level differences are ties
    assert detect_warmup([30.0] + [0.1] * 49) == 1  # a compile step alone costs no good steps


def test_warmup_finds_a_slow_start_after_the_compile_step() -> None:
    rng = random.Random(0)
    times = [30.0] + [0.3 * (1 + rng.gauss(0, 0.02)) for _ in range(10)]
    times += [0.1 * (1 + rng.gauss(0, 0.02)) for _ in range(89)]
    assert detect_warmup(times) == 11


def test_a_load_change_in_the_middle_is_not_a_warmup() -> None:
    """Issue 26 item 3: 40 slow steps, then 59 fast ones (the machine's load dropped; both flat) lost 41 of 100
    steps to the warm-up, and the summary's mean became the fast part's. A warm-up is a slow start coming down."""
    for seed in range(20):
        rng = random.Random(seed)
        times = [3.0] + [1.2 * (1 + rng.gauss(0, 0.02)) for _ in range(40)]
        times += [0.85 * (1 + rng.gauss(0, 0.02)) for _ in range(59)]
        assert detect_warmup(times) <= 100 // 4, seed


def test_a_long_warmup_that_comes_down_is_still_cut() -> None:
    rng = random.Random(1)
    times = [3.0] + [0.1 * (1 + 4 * math.exp(-t / 10)) * (1 + rng.gauss(0, 0.01)) for t in range(99)]
    assert detect_warmup(times) > 100 // 4


def test_warmup_keeps_stationary_runs_whole() -> None:
    kept = [detect_warmup([2.5] + [0.1 * (1 + random.Random(s).gauss(0, 0.02)) for _ in range(99)]) for s in range(200)]
    assert sum(w == 1 for w in kept) >= 180  # MSER's own noise must not cut good steps in most runs


# --- summarize -----------------------------------------------------------------------------------------


@settings(max_examples=300)
@given(series_strategy(), st.sampled_from(["auto", 0, 3]), st.sampled_from([None, range(5, 10)]))
def test_summarize_never_raises_and_is_json_writable(
    series: dict[str, list[float | None]], warmup: int | str, profiler: range | None
) -> None:
    summary = summarize(series, warmup=warmup, profiler_steps=profiler)  # type: ignore[arg-type]
    json.dumps(summary.model_dump(), allow_nan=False)  # raises on any NaN/inf that slipped through
    n = len(next(iter(series.values()), []))
    assert summary.num_steps == n
    assert 0 <= summary.num_steady_steps <= n - summary.warmup_steps
    if warmup == "auto" and n:
        assert 1 <= summary.warmup_steps <= max(1, n // 2)


def test_summarize_a_healthy_run() -> None:
    series = make_series(30, step_time_s=0.1, seed=1)
    summary = summarize(series, warmup=5, profiler_steps=None)
    steady = range(5, 30)
    times = [series[schema.STEP_TIME_S][i] or 0.0 for i in steady]
    tokens = [series[schema.NUM_TOKENS][i] or 0.0 for i in steady]
    assert summary.warmup_method == "fixed"
    assert summary.num_steady_steps == 25
    assert summary.first_step_time_s == 2.5
    assert summary.step_time_s is not None
    assert summary.step_time_s.median == pytest.approx(statistics.median(times))
    assert summary.step_time_s.mean == pytest.approx(statistics.mean(times))
    assert summary.step_time_s.std == pytest.approx(statistics.stdev(times))
    assert summary.step_time_s.p10 <= summary.step_time_s.median <= summary.step_time_s.p90
    assert summary.step_time_s.min == min(times)
    assert summary.step_time_s.max == max(times)
    assert summary.tokens_per_s == pytest.approx(sum(tokens) / sum(times))  # measured, not configured
    assert summary.samples_per_s == pytest.approx(8 * 25 / sum(times))
    assert summary.data_wait_share == pytest.approx(0.02)
    assert summary.generation_share is None  # no such column: not zero
    assert summary.peak_allocated_mib == 1950.0
    assert summary.peak_reserved_mib == 2304.0
    assert summary.final_loss == series[schema.LOSS][-1]
    assert summary.tail_mean_loss == pytest.approx(statistics.mean(v or 0.0 for v in series[schema.LOSS][-5:]))


def test_step_time_quantiles_and_mad() -> None:
    times: list[float | None] = [9.0, *map(float, range(1, 11))]
    summary = summarize({schema.STEP_TIME_S: times}, warmup=1, profiler_steps=None)
    assert summary.step_time_s is not None
    assert (summary.step_time_s.p10, summary.step_time_s.median, summary.step_time_s.p90) == (1.9, 5.5, 9.1)
    assert summary.step_time_s.mad == 2.5


def test_profiler_window_leaves_the_timing() -> None:
    series = make_series(40, seed=2)
    times = series[schema.STEP_TIME_S]
    series[schema.STEP_TIME_S] = [3 * (t or 0.0) if 20 <= s <= 29 else t for s, t in enumerate(times, start=1)]
    by_range = summarize(series, warmup=5, profiler_steps=range(20, 30))
    flags: list[float | None] = [1.0 if 20 <= s <= 29 else 0.0 for s in range(1, 41)]
    by_column = summarize({**series, schema.IN_PROFILER_WINDOW: flags}, warmup=5, profiler_steps=None)
    unprofiled = summarize(series, warmup=5, profiler_steps=None)
    assert by_range.num_steady_steps == by_column.num_steady_steps == 25
    assert by_range.step_time_s == by_column.step_time_s
    assert by_range.step_time_s is not None
    assert unprofiled.step_time_s is not None
    assert by_range.step_time_s.max < 0.2 < unprofiled.step_time_s.max


def test_zero_and_one_step() -> None:
    empty = summarize({}, warmup="auto", profiler_steps=None)
    assert (empty.num_steps, empty.warmup_steps, empty.step_time_s, empty.final_loss) == (0, 0, None, None)
    one = summarize(make_series(1), warmup="auto", profiler_steps=None)
    assert (one.num_steps, one.warmup_steps, one.num_steady_steps) == (1, 1, 0)
    assert one.first_step_time_s == 2.5
    assert one.step_time_s is None  # a compile step is no steady state
    assert one.tokens_per_s is None
    assert one.final_loss is not None
    assert one.peak_allocated_mib == 1800.0


def test_all_none_columns_give_none_not_zero() -> None:
    series = {name: [None] * 20 for name in COLUMNS}
    summary = summarize(series, warmup="auto", profiler_steps=None)
    figures = summary.model_dump(exclude={"num_steps", "warmup_steps", "warmup_method", "num_steady_steps"})
    assert set(figures.values()) == {None}


def test_a_run_that_stopped_early_with_a_nan_loss() -> None:
    series = make_series(12, seed=3)
    series[schema.LOSS][-1] = None  # the writer stores NaN as null
    summary = summarize(series, warmup="auto", profiler_steps=None)
    assert summary.num_steps == 12
    assert summary.final_loss == series[schema.LOSS][-2]
    assert summary.tail_mean_loss == pytest.approx(statistics.mean(v or 0.0 for v in series[schema.LOSS][-5:-1]))


def test_tail_is_ten_percent_of_a_long_run() -> None:
    losses: list[float | None] = [float(i) for i in range(100)]
    summary = summarize({schema.LOSS: losses}, warmup=0, profiler_steps=None)
    assert summary.tail_mean_loss == pytest.approx(94.5)  # mean of the last 10


def test_impossible_step_times_are_not_durations() -> None:
    times: list[float | None] = [1.0, 0.1, -0.1, math.nan, math.inf, None, 0.1, 0.1]
    summary = summarize({schema.STEP_TIME_S: times}, warmup=1, profiler_steps=None)
    assert summary.step_time_s is not None
    assert summary.step_time_s.min == summary.step_time_s.max == 0.1


def test_columns_must_align() -> None:
    with pytest.raises(ValueError, match="differ in length"):
        summarize({schema.STEP: [1.0, 2.0], schema.LOSS: [1.0]}, warmup=0, profiler_steps=None)


# --- divergence ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("noise", [0.05, 0.2, 0.5])
def test_noisy_decreasing_loss_never_diverges(noise: float) -> None:
    for seed in range(300):
        assert find_divergence(decreasing_loss(random.Random(seed), noise=noise)) is None, seed


def test_flat_and_heavy_tailed_losses_never_diverge() -> None:
    for seed in range(300):
        rng = random.Random(seed)
        assert find_divergence([2.0 + rng.gauss(0, 0.5) for _ in range(50)]) is None, seed
        assert find_divergence([rng.gauss(0, 0.02) for _ in range(50)]) is None, seed  # GRPO-like, around 0
        assert find_divergence([1.0 + 0.3 * rng.choice([-1, 1]) * rng.expovariate(1) for _ in range(50)]) is None
    assert find_divergence([1.0] * 50) is None
    assert find_divergence([0.0] * 50) is None


def test_loss_exploding_at_step_30_is_found_within_a_few_steps() -> None:
    steps: list[float | None] = [float(s) for s in range(1, 51)]
    for seed in range(100):
        rng = random.Random(seed)
        losses = decreasing_loss(rng, n=29, noise=0.1)
        losses += [2.0 * 1.5 ** (s - 29) + rng.gauss(0, 0.1) for s in range(30, 51)]
        assert find_divergence(losses, steps) in {30, 31, 32}
        assert find_divergence(losses[:34], steps) is not None  # decided by step 34


def test_divergence_back_above_the_early_level() -> None:
    rng = random.Random(0)
    losses = [10.8 * math.exp(-t / 10) + 3 + rng.gauss(0, 0.05) for t in range(29)]  # random-init LM
    losses += [14 + rng.gauss(0, 0.5) for _ in range(21)]
    assert find_divergence(losses) == 30


def test_divergence_ignores_non_finite_losses_and_reports_step_numbers() -> None:
    losses: list[float | None] = [2.0] * 20 + [None, math.nan] + [12.0] * 10
    steps: list[float | None] = [float(s) for s in range(101, 133)]
    assert find_divergence(losses, steps) == 123
    assert find_divergence(losses) == 23  # no steps column: 1-based row number
    assert find_divergence([1.0] * 10 + [50.0] * 4) is None  # too short to judge


@given(st.lists(st.none() | ANY_FLOAT, max_size=80))
def test_divergence_never_raises(losses: list[float | None]) -> None:
    step = find_divergence(losses)
    assert step is None or 1 <= step <= len(losses)


# --- grad-norm spikes ----------------------------------------------------------------------------------


def test_a_single_grad_norm_spike_is_found() -> None:
    rng = random.Random(0)
    norms: list[float | None] = [1.0 + rng.gauss(0, 0.05) for _ in range(50)]
    norms[24] = 12.0
    steps: list[float | None] = [float(s) for s in range(1, 51)]
    spikes = find_grad_norm_spikes(norms, steps)
    assert [(s.step, s.value) for s in spikes] == [(25, 12.0)]
    assert spikes[0].reference == pytest.approx(1.0, abs=0.1)


def test_constant_grad_norms_have_no_spike() -> None:
    assert find_grad_norm_spikes([0.7] * 50) == []
    assert find_grad_norm_spikes([0.0] * 20 + [1.0] * 5) == []  # a zero reference has no ratio


def test_noisy_or_decaying_grad_norms_have_no_spike() -> None:
    for seed in range(300):
        rng = random.Random(seed)
        noisy: list[float | None] = [math.exp(rng.gauss(0, 0.15)) for _ in range(50)]
        decaying: list[float | None] = [20 * math.exp(-t / 5) + 1 + rng.gauss(0, 0.05) for t in range(50)]
        assert find_grad_norm_spikes(noisy) == [], seed
        assert find_grad_norm_spikes(decaying) == [], seed


def test_spike_needs_history_and_skips_non_finite() -> None:
    assert find_grad_norm_spikes([1.0, 1.0, 1.0, 1.0, 50.0]) == []  # 4 values are no history
    norms: list[float | None] = [1.0, 1.0, 1.0, 1.0, 1.0, None, math.inf, 9.0]
    assert [s.step for s in find_grad_norm_spikes(norms)] == [8]


@given(st.lists(st.none() | ANY_FLOAT, max_size=80))
def test_spikes_never_raise(norms: list[float | None]) -> None:
    for spike in find_grad_norm_spikes(norms):
        assert math.isfinite(spike.value)
        assert math.isfinite(spike.reference)
