"""Figures derived from the raw per-step series: steady-state timing, throughput, memory, loss, instability.

Pure Python (math, statistics) so that the light reporter path can recompute them without numpy or torch.
Everything here is a function of `Metrics.series`; the summary is a convenience beside the record.
"""

from __future__ import annotations

import bisect
import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Final, Literal

from canary_action.metrics import schema
from canary_action.metrics.schema import GradNormSpike, StepTimeSummary, Summary

Column = Sequence[float | None]

MSER_BATCH: Final = 5  # MSER-5: batch means of 5 steps smooth per-step jitter before the truncation search
#: A flat slow start counts as a warm-up past the first quarter of a run only this many times slower than the
#: rest (a compile or cache warm-up: 3x in the tiny SFT canary; a load change on a shared CPU: 1.4x, seen).
WARMUP_SLOWER: Final = 2.0
MSER_TIE: Final = 1.5  # the shortest cut scoring within 1.5x of the minimum wins (see detect_warmup)
DIVERGENCE_WINDOW: Final = 5  # rolling median of 5: one or two wild steps never move it, three do
DIVERGENCE_NOISE_K: Final = 8.0  # the rise must exceed 8 noise sigmas: a median of 5 never drifts that far by chance
DIVERGENCE_REL: Final = 0.5  # ...and half the loss's own magnitude (early level or best so far)
DIVERGENCE_MIN_LOSSES: Final = 15  # judge from the 15th finite loss: fewer differences give a shaky sigma
DIVERGENCE_PERSIST: Final = 2  # two consecutive verdicts: cuts false alarms on heavy-tailed noise several-fold
SPIKE_WINDOW: Final = 10  # grad-norm reference: median of the 10 preceding finite values
SPIKE_MIN_HISTORY: Final = 5  # no verdict before 5 values: the first steps of a run have no "normal" yet
SPIKE_RATIO: Final = 3.0  # a spike is > 3x the reference: healthy runs wobble by tens of percent, not 3x
SPIKE_MAD_K: Final = 6.0  # ...and > 6 robust sigmas above it, so a noisy history raises the bar
_MAD_TO_SIGMA: Final = 1.4826  # 1 / Phi^-1(3/4): MAD of a normal sample times this estimates its sigma
_DIFF_TO_SIGMA: Final = 1 / 0.9539  # the median |x[t] - x[t-1]| of white noise is 0.9539 sigma
_TINY: Final = 1e-12  # a loss that is exactly constant must not "diverge" by a rounding error


def detect_warmup(step_times: Sequence[float]) -> int:
    """The number of leading steps to leave out of timing summaries, by MSER-5 (0 only for no steps).

    Marginal Standard Error Rule (White, "An effective truncation heuristic for bias reduction in
    simulation output", Simulation 69(6), 1997) on batch means of 5 (Franklin & White, "Stationarity tests
    and MSER-5: exploring the intuition behind mean-squared-error-reduction in warm-up period
    determination", Winter Simulation Conference 2008). Step 1 (compile, allocator and cuDNN warm-up, first
    batch) is always excluded and kept out of the search, so one huge step cannot swallow a batch of good
    ones. Steps 2..n form batch means b_1..b_m; the cut d minimises MSER(d) = sum_{j>d} (b_j - mean_d)^2 /
    (m - d)^2, searched only while the cut stays in the first half of the run (the statistic is unstable
    near the end). Result: 1 + 5d, within [1, max(1, n // 2)].
    """
    n = len(step_times)
    if n == 0:
        return 0
    rest = step_times[1:]
    batches = [sum(rest[i : i + MSER_BATCH]) / MSER_BATCH for i in range(0, len(rest) - MSER_BATCH + 1, MSER_BATCH)]
    max_cut = min(max(0, (n // 2 - 1) // MSER_BATCH), len(batches) - 1)
    scores = []
    for cut in range(max_cut + 1):
        kept = batches[cut:]
        mean = sum(kept) / len(kept)
        scores.append(sum((b - mean) * (b - mean) for b in kept) / (len(kept) * len(kept)))
    level = sum(batches) / len(batches) if batches else 0.0
    cut = _shortest_good_cut(scores, level)
    if 1 + MSER_BATCH * cut > n // 4 and not _warmup_like(batches[:cut], batches[cut:]):
        # Past the first quarter, a cut must look like a warm-up: a slow start coming down to the steady level, or
        # one at least twice as slow. A run 1.4x slower for its first 40 steps and then fast, flat both, saw its
        # load drop: that is the run's noise, and cutting it (41 of 100 steps, seen) would hide it. Only cuts
        # inside the first quarter stay.
        cut = _shortest_good_cut(scores[: max(0, (n // 4 - 1) // MSER_BATCH) + 1], level)
    return 1 + MSER_BATCH * cut


def _shortest_good_cut(scores: Sequence[float], level: float) -> int:
    # Plain argmin over-truncates stationary runs: the score's own noise decides (in simulation, 40 % of flat
    # 100-step runs lost 5-45 steps). Within 1.5x of the minimum the shortest cut wins (5 % then), and a
    # real warm-up still scores orders of magnitude apart. The 1e-9 term makes rounding-level scores ties
    # (a perfectly flat run scores ~1e-34 everywhere); NaN scores (inf inputs) never win.
    best = min((x for x in scores if not math.isnan(x)), default=math.inf)
    bound = MSER_TIE * best + 1e-9 * level * level
    return next((cut for cut, x in enumerate(scores) if x <= bound), 0)


def _warmup_like(removed: Sequence[float], kept: Sequence[float]) -> bool:
    """Whether the removed batch means look like a warm-up: their first third is at least WARMUP_SLOWER times the
    kept mean, or above it and coming down (the removed stretch itself closes at least half of the gap)."""
    if len(removed) < 2 or not kept:
        return False
    third = max(1, len(removed) // 3)
    head, tail = sum(removed[:third]) / third, sum(removed[-third:]) / third
    steady = sum(kept) / len(kept)
    return head >= WARMUP_SLOWER * steady or (head > steady and head - tail >= 0.5 * (head - steady))


def summarize(series: Mapping[str, Column], *, warmup: int | Literal["auto"], profiler_steps: range | None) -> Summary:
    """Summarise a run. Steady steps: after the warm-up, outside the profiler window (by step number).

    Rows flagged in the `perf/in_profiler_window` column count as inside the window too. Timing, rates,
    shares and GPU utilisation cover the steady steps; memory peaks cover every step (the first allocates
    too). A step time or count that is missing, non-finite or negative is no measurement and is left out.
    """
    n = _num_rows(series)
    durations = [_nonneg(v) for v in _column(series, schema.STEP_TIME_S, n)]
    if warmup == "auto":
        timed = [(i, t) for i, t in enumerate(durations) if t is not None]
        k = detect_warmup([t for _, t in timed])
        # Rows without a duration cannot be judged; the cut lands on a row, capped at half the run.
        warm = min(timed[k][0] if k < len(timed) else n, max(1, n // 2)) if n else 0
    elif warmup < 0:
        raise ValueError(f"warmup must be >= 0 or 'auto', got {warmup}")
    else:
        warm = min(warmup, n)
    steady = steady_rows(series, warmup_steps=warm, profiler_steps=profiler_steps)
    loss = _column(series, schema.LOSS, n)
    losses = [v for v in loss if v is not None and math.isfinite(v)]
    tail = [v for v in loss[-max(5, math.ceil(0.1 * n)) :] if v is not None and math.isfinite(v)]
    util = _column(series, schema.GPU_UTILIZATION_PCT, n)
    gpu_util = [v for i in steady if (v := util[i]) is not None and math.isfinite(v)]
    busy = _column(series, schema.GPU_BUSY_S, n)
    on_gpu = [(b, t) for i in steady if (b := _nonneg(busy[i])) is not None and (t := durations[i]) is not None]
    return Summary(
        num_steps=n,
        warmup_steps=warm,
        warmup_method="auto" if warmup == "auto" else "fixed",
        num_steady_steps=len(steady),
        first_step_time_s=durations[0] if n else None,
        step_time_s=_timing([t for i in steady if (t := durations[i]) is not None]),
        tokens_per_s=_rate(series, schema.NUM_TOKENS, durations, steady),
        samples_per_s=_rate(series, schema.NUM_SAMPLES, durations, steady),
        peak_allocated_mib=_peak(series, schema.PEAK_ALLOCATED_MIB),
        peak_reserved_mib=_peak(series, schema.PEAK_RESERVED_MIB),
        host_rss_peak_mib=_peak(series, schema.HOST_RSS_MIB),
        host_peak_rss_mib=_peak_outside(series, schema.HOST_PEAK_RSS_MIB, profiler_steps),
        gpu_utilization_mean_pct=float(statistics.mean(gpu_util)) if gpu_util else None,
        gpu_busy_median_s=float(statistics.median(b for b, _ in on_gpu)) if on_gpu else None,
        gpu_busy_share=_share(on_gpu),
        data_wait_share=_rate(series, schema.DATA_WAIT_S, durations, steady),
        generation_share=_rate(series, schema.GENERATION_S, durations, steady),
        final_loss=losses[-1] if losses else None,
        tail_mean_loss=float(statistics.mean(tail)) if tail else None,  # exact sum: no overflow
    )


def steady_rows(series: Mapping[str, Column], *, warmup_steps: int, profiler_steps: range | None) -> list[int]:
    """Indices of the steady rows: after the first `warmup_steps` rows (a Summary's `warmup_steps`), outside
    the profiler window (by step number, or flagged in `perf/in_profiler_window`)."""
    n = _num_rows(series)
    steps = [_step_at(i, series.get(schema.STEP)) for i in range(n)]
    flagged = _column(series, schema.IN_PROFILER_WINDOW, n)
    profiled = [(profiler_steps is not None and steps[i] in profiler_steps) or _nonzero(flagged[i]) for i in range(n)]
    return [i for i in range(warmup_steps, n) if not profiled[i]]


def find_divergence(losses: Column, steps: Column | None = None) -> int | None:
    """The step where the loss started to diverge, or None.

    Over the finite losses: R = rolling median of the last 5, E = median of the first 5 (the early level),
    B = the lowest R so far, sigma = the median |successive difference| (a MAD about zero of the
    differences: a steady downward trend does not inflate it the way the spread of raw values would).
    Diverged when R - B > max(8 sigma, 0.5 max(|E|, |B|)): far outside the noise *and* large against the
    loss's own size, so noisy-but-learning or flat curves never trip it. Judged from the 15th finite loss
    on, and only when it holds at 2 consecutive steps (in simulation, 40,000 50-step runs each: no false
    alarm on Gaussian noise, 1 on Laplace, 3 on t(2); a blow-up is caught 2-4 steps after it starts). At
    the onset is reported: the first step of the first tripping window above B + threshold. NaN/inf losses
    are skipped here: the non-finite events record them.
    """
    w = DIVERGENCE_WINDOW
    at = [i for i, v in enumerate(losses) if v is not None and math.isfinite(v)]
    xs = [v for v in losses if v is not None and math.isfinite(v)]
    if len(xs) < DIVERGENCE_MIN_LOSSES:
        return None
    early = statistics.median(xs[:w])
    best = early
    diffs: list[float] = []  # kept sorted: the median costs O(log n) per step
    hits, onset = 0, 0
    for t in range(1, len(xs)):
        bisect.insort(diffs, abs(xs[t] - xs[t - 1]))
        if t < w - 1:
            continue
        rolling = statistics.median(xs[t - w + 1 : t + 1])
        if t >= DIVERGENCE_MIN_LOSSES - 1:
            sigma = _DIFF_TO_SIGMA * _sorted_median(diffs)
            threshold = max(DIVERGENCE_NOISE_K * sigma, DIVERGENCE_REL * max(abs(early), abs(best)), _TINY)
            if rolling - best <= threshold:
                hits = 0
            else:
                if hits == 0:
                    onset = next((j for j in range(t - w + 1, t + 1) if xs[j] > best + threshold), t)
                hits += 1
                if hits == DIVERGENCE_PERSIST:
                    return _step_at(at[onset], steps)
        best = min(best, rolling)
    return None


def find_grad_norm_spikes(grad_norms: Column, steps: Column | None = None) -> list[GradNormSpike]:
    """Steps whose grad norm exceeds 3x the median of the 10 preceding finite values and exceeds that
    median by more than 6 robust sigmas (1.4826 x MAD of the same window).

    The ratio alone would flag a noisy early phase; the MAD term alone would flag a perfectly flat history
    (MAD 0) at the first wobble. A zero reference (frozen parameters) has no meaningful ratio: never a spike.
    """
    history: list[float] = []
    spikes: list[GradNormSpike] = []
    for i, g in enumerate(grad_norms):
        if g is None or not math.isfinite(g):
            continue
        window = history[-SPIKE_WINDOW:]
        if len(window) >= SPIKE_MIN_HISTORY:
            ref = _median(window)
            mad = _median([abs(x - ref) for x in window])
            if ref > 0 and g > SPIKE_RATIO * ref and g - ref > SPIKE_MAD_K * _MAD_TO_SIGMA * mad:
                spikes.append(GradNormSpike(step=_step_at(i, steps), value=g, reference=ref))
        history.append(g)
    return spikes


def _nonzero(v: float | None) -> bool:
    return v is not None and math.isfinite(v) and v != 0


def _nonneg(v: float | None) -> float | None:
    """Durations and counts: finite and >= 0, else not a measurement."""
    return v if v is not None and math.isfinite(v) and v >= 0 else None


def _num_rows(series: Mapping[str, Column]) -> int:
    lengths = {len(values) for values in series.values()}
    if len(lengths) > 1:
        raise ValueError(f"series columns differ in length: {sorted(lengths)}")
    return lengths.pop() if lengths else 0


def _column(series: Mapping[str, Column], name: str, n: int) -> Column:
    return series.get(name) or [None] * n


def _step_at(i: int, steps: Column | None) -> int:
    """The logged step number of row i; 1-based row number when the step column lacks it."""
    value = steps[i] if steps is not None and i < len(steps) else None
    return int(value) if value is not None and math.isfinite(value) else i + 1


def _median(values: list[float]) -> float:
    return _sorted_median(sorted(values))


def _sorted_median(xs: list[float]) -> float:
    mid = len(xs) // 2
    return xs[mid] if len(xs) % 2 else xs[mid - 1] / 2 + xs[mid] / 2  # halves first: no overflow


def _quantile(xs: list[float], q: float) -> float:
    """Linear interpolation between order statistics (Hyndman & Fan type 7, numpy's default); xs sorted."""
    h = (len(xs) - 1) * q
    lo = math.floor(h)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (h - lo) * (xs[hi] - xs[lo])


def _timing(times: list[float]) -> StepTimeSummary | None:
    if not times:
        return None
    xs = sorted(times)
    median = _sorted_median(xs)
    scale = xs[-1]
    # Scaled to [0, 1] first: the sample std of non-negative values then cannot overflow.
    std = scale * statistics.stdev([x / scale for x in xs]) if len(xs) > 1 and scale > 0 else 0.0
    return StepTimeSummary(
        median=median,
        mean=float(statistics.mean(xs)),  # exact rational sum: no overflow, no rounding drift
        p10=_quantile(xs, 0.1),
        p90=_quantile(xs, 0.9),
        mad=_median([abs(x - median) for x in xs]),  # raw MAD, not scaled to a sigma
        std=std,
        min=xs[0],
        max=xs[-1],
    )


def _rate(series: Mapping[str, Column], name: str, durations: list[float | None], rows: list[int]) -> float | None:
    """sum(column) / sum(step time) over the steady rows where both were measured; None when unmeasured."""
    column = series.get(name)
    if column is None:
        return None
    pairs = [(a, t) for i in rows if (a := _nonneg(column[i])) is not None and (t := durations[i]) is not None]
    total_time = sum(t for _, t in pairs)
    if not pairs or not 0 < total_time < math.inf:
        return None
    value = sum(a for a, _ in pairs) / total_time
    return value if math.isfinite(value) else None


def _peak_outside(series: Mapping[str, Column], name: str, profiler_steps: range | None) -> float | None:
    """The largest finite value of a column on the steps outside the profiler window (whose events hold memory)."""
    if name not in series:
        return None
    rows = steady_rows(series, warmup_steps=0, profiler_steps=profiler_steps)
    column = _column(series, name, len(series.get(schema.STEP) or []))
    values = [v for i in rows if (v := column[i]) is not None and math.isfinite(v)]
    return max(values) if values else None


def _peak(series: Mapping[str, Column], name: str) -> float | None:
    values = [v for v in series.get(name) or [] if v is not None and math.isfinite(v)]
    return max(values) if values else None


def stability_of(series: Mapping[str, Column], non_finite: list[schema.NonFiniteEvent]) -> schema.Stability:
    """The stability findings of a run's series and its non-finite events."""
    divergence = find_divergence(series.get(schema.LOSS, []))
    return schema.Stability(
        non_finite=non_finite,
        num_nan_steps=len({e.step for e in non_finite if e.value == "nan"}),
        num_inf_steps=len({e.step for e in non_finite if e.value != "nan"}),
        loss_diverged=divergence is not None,
        divergence_step=divergence,
        grad_norm_spikes=find_grad_norm_spikes(series.get(schema.GRAD_NORM, []), series.get(schema.STEP, [])),
    )


def _share(pairs: list[tuple[float, float]]) -> float | None:
    """sum(part) / sum(whole) of (part, whole) pairs; None without any time."""
    whole = sum(t for _, t in pairs)
    return sum(b for b, _ in pairs) / whole if whole > 0 else None
