"""Noise-aware comparison of a run-level figure (step time, tokens/s) between a run and its baselines.

The model. A run's figure is its median over steady-state steps, on a log scale (so effects are ratios).
Two noises move it: the within-run estimation error (per-step samples are autocorrelated, so it is measured
with non-overlapping batch medians — the method of batch means — not with the per-step spread), and a
between-run offset (the machine, the clocks, the neighbours), which one run's samples cannot show at all.

The between-run spread tau is measured from the baselines when there are several: the sample variance of
their log medians, pooled with a prior of PRIOR_DOF pseudo-runs at tau0 = PRIOR_RATIO[device] x the per-step
spread (a noisy machine shows it in its steps too). With one baseline tau is the prior alone, and the result says
so. The difference d = log(current) - mean(log(baselines)) then has SD tau * sqrt(1 + 1/n), with a Student
t interval on PRIOR_DOF + n - 1 degrees of freedom.

A regression is called when d exceeds the threshold, widened to k x SD(d) when that is larger (so that a
noisy machine cannot fail a pull request on noise), and the interval's lower end is above zero.
The constants were chosen with benchmarks/detection.py; docs/benchmarks.md has the figures.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Final, Literal

from canary_action.config.thresholds import DEFAULT_CONFIDENCE_LEVEL

#: tau0 / per-step spread, by device kind. cpu: from 16 real plain runs of the tiny DPO canary (one thread,
#: collected interleaved under 0-2 busy loops on a shared 2-core machine: `detection.py collect-real`), whose
#: medians spread 1.39x as much as their steps. Load levels make that spread a mixture, heavier-tailed than the
#: normal the interval assumes: replayed through the real compare, 1.39 raised 0.6-2.5 % A/A false alarms with 3
#: or 5 baselines, 1.7 at most 0.6 % in every tier (docs/benchmarks.md, "Detection on real runs"). cuda: 0.6,
#: conservative against a dedicated GPU's ~0.25 (1 % between runs, 4 % per step; an assumption until GPU runs
#: are fitted). One ratio cannot serve both.
PRIOR_RATIO: Final[dict[str, float]] = {"cpu": 1.7, "cuda": 0.6}
PRIOR_DOF: Final = 3  # the prior counts as 3 runs: one lucky-quiet baseline pair cannot shrink the spread to 0
MIN_BATCHES: Final = 5
MAX_BATCHES: Final = 30
MIN_BATCH_LEN: Final = 5  # batches shorter than the correlation length (a few steps here) understate the error
LEVEL: Final = DEFAULT_CONFIDENCE_LEVEL  # the thresholds' confidence_level, unless a comparison passes its own
_MAD_TO_SIGMA: Final = 1.4826


@dataclass(frozen=True)
class Sample:
    """One run's steady-state samples of a positive figure; `median` alone when the format kept no samples."""

    values: Sequence[float] | None
    median: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Sample:
        return cls(values=values, median=statistics.median(values))


@dataclass(frozen=True)
class Effect:
    """current vs baselines, as a relative change: +7.9 means 7.9 % higher."""

    delta_pct: float
    low_pct: float
    high_pct: float
    sd_log: float
    """SD of the log difference: the noise one comparison has to beat."""
    run_spread_pct: float | None
    """The measured between-run spread of the baselines (SD of log medians, in %); None with one baseline."""
    prior_spread_pct: float
    dof: int
    num_baselines: int
    step_sd_log: float = 0.0
    """The per-step spread (robust SD of log step times, median over the runs): one step's own noise."""
    paired_rounds: int | None = None
    """A lockstep pair's comparison: the rounds judged (run_spread_pct is then the rounds' spread, and
    prior_spread_pct the process-level spread added to the interval); None for separate runs."""
    level: float = LEVEL
    """The confidence level of [low_pct, high_pct], and so of the test that the change is clear."""

    def noise_floor_pct(self, k: float) -> float:
        """The smallest change k noise SDs away from zero, in percent."""
        return 100 * math.expm1(k * self.sd_log)


def prior_ratio(device: str | None) -> float:
    """The prior's ratio for a device ("cpu", "cuda:0"...); an unknown device gets the CPU's, the cautious one."""
    kind = (device or "cpu").split(":")[0]
    return PRIOR_RATIO.get(kind, PRIOR_RATIO["cpu"])


def compare_levels(current: Sample, baselines: Sequence[Sample], *, ratio: float, level: float = LEVEL) -> Effect:
    """The change of `current` against the baselines' mean log median, with its interval at `level`.

    `ratio` scales the run-spread prior from the per-step spread: `prior_ratio(device)`.
    """
    if not baselines:
        raise ValueError("compare_levels needs at least one baseline")
    n = len(baselines)
    logs = [math.log(b.median) for b in baselines]
    centre = statistics.fmean(logs)
    d = math.log(current.median) - centre
    runs = [current, *baselines]
    step_sd = statistics.median([s for r in runs if (s := per_step_log_sd(r.values)) is not None] or [0.0])
    tau0_sq = (ratio * step_sd) ** 2
    spread_sq = statistics.variance(logs) if n >= 2 else None
    tau_sq = (PRIOR_DOF * tau0_sq + (n - 1) * (spread_sq or 0.0)) / (PRIOR_DOF + n - 1)
    # Never below what the runs' own samples say about their medians (batch means).
    within = [v for r in runs if (v := median_log_var(r.values)) is not None]
    within_floor = statistics.fmean(within) if within else 0.0
    sd_log = math.sqrt(max(tau_sq, within_floor) * (1 + 1 / n))
    dof = PRIOR_DOF + n - 1
    half = t_quantile((1 + level) / 2, dof) * sd_log
    return Effect(
        delta_pct=100 * math.expm1(d),
        low_pct=100 * math.expm1(d - half),
        high_pct=100 * math.expm1(d + half),
        sd_log=sd_log,
        run_spread_pct=100 * math.sqrt(spread_sq) if spread_sq is not None else None,
        prior_spread_pct=100 * math.sqrt(tau0_sq),
        dof=dof,
        num_baselines=n,
        step_sd_log=step_sd,
        level=level,
    )


Judgement = Literal["pass", "warn", "fail"]


@dataclass(frozen=True)
class Decision:
    status: Judgement
    limit_pct: float
    """The limit applied: the threshold, or k x the noise SD when that is larger."""
    widened: bool


def judge(effect: Effect, threshold_pct: float, k: float, *, worse: Literal["higher", "lower"]) -> Decision:
    """Fail when the change is worse than the limit and statistically clear (the interval excludes 0).

    The limit is the threshold, widened to k noise SDs when those are larger. Warn when the change is clear
    and beyond the threshold but within the widening: real enough to say, too close to the noise to fail.
    """
    sign = 1.0 if worse == "higher" else -1.0
    floor = effect.noise_floor_pct(k) if worse == "higher" else -100 * math.expm1(-k * effect.sd_log)
    limit = max(threshold_pct, floor)
    change = sign * effect.delta_pct
    clear = effect.low_pct > 0 if worse == "higher" else effect.high_pct < 0
    if clear and change > limit:
        return Decision("fail", limit, floor > threshold_pct)
    if clear and change > threshold_pct:
        return Decision("warn", limit, True)
    return Decision("pass", limit, floor > threshold_pct)


def judge_paired(effect: Effect, min_effect_pct: float, k: float, *, worse: Literal["higher", "lower"]) -> Decision:
    """A lockstep pair's rule: judged by the precision the pair has, not by the separate-run limits.

    The limit is the minimum effect (paired_min_effect_pct), raised to k x the pair's own noise SD when that is
    larger, so that a noisy pair cannot fail on noise. Fail when the change is worse than the limit and clear
    (the interval excludes 0); warn when it is worse than the limit but not clear, or clear and worse than the
    minimum effect but inside the raise.
    """
    decision = judge(effect, min_effect_pct, k, worse=worse)
    over = (effect.delta_pct if worse == "higher" else -effect.delta_pct) > decision.limit_pct
    return replace(decision, status="warn") if decision.status == "pass" and over else decision


def per_step_log_sd(values: Sequence[float] | None) -> float | None:
    """Robust SD of the log per-step values (1.4826 x MAD): the machine's step-to-step noise."""
    if not values or len(values) < MIN_BATCH_LEN:
        return None
    logs = [math.log(v) for v in values]
    centre = statistics.median(logs)
    return _MAD_TO_SIGMA * statistics.median([abs(x - centre) for x in logs])


def median_log_var(values: Sequence[float] | None) -> float | None:
    """Variance of the log median of an autocorrelated series, by non-overlapping batch medians.

    The series is cut into b consecutive batches (5 to 30, each at least 5 steps); their log medians are
    nearly independent when a batch outlasts the correlation, so var(median) ~ var(batch medians) / b.
    """
    if not values:
        return None
    b = min(MAX_BATCHES, len(values) // MIN_BATCH_LEN)
    if b < MIN_BATCHES:
        return None
    size = len(values) // b
    medians = [math.log(statistics.median(values[i * size : (i + 1) * size])) for i in range(b)]
    return statistics.variance(medians) / b


def t_quantile(p: float, dof: int) -> float:
    """The p-quantile (p > 0.5) of Student's t with an integer number of degrees of freedom."""
    return _t_quantile(round(p, 12), dof)


@lru_cache(maxsize=256)
def _t_quantile(p: float, dof: int) -> float:
    if not 0.5 < p < 1 or dof < 1:
        raise ValueError(f"t_quantile needs 0.5 < p < 1 and dof >= 1, got p={p}, dof={dof}")
    target = 2 * p - 1  # P(|T| < t)
    lo, hi = 0.0, 1.0
    while _t_central(hi, dof) < target:
        hi *= 2
    for _ in range(100):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if _t_central(mid, dof) < target else (lo, mid)
    return (lo + hi) / 2


def _t_central(t: float, dof: int) -> float:
    """P(|T| < t) for integer dof: the finite series of Abramowitz & Stegun 26.7.3-26.7.4."""
    theta = math.atan(t / math.sqrt(dof))
    s, c2 = math.sin(theta), math.cos(theta) ** 2
    if dof % 2 == 0:
        term, total = 1.0, 1.0
        for j in range(1, dof // 2):
            term *= c2 * (2 * j - 1) / (2 * j)
            total += term
        return s * total
    if dof == 1:
        return 2 * theta / math.pi
    term, total = math.cos(theta), math.cos(theta)
    for j in range(1, (dof - 1) // 2):
        term *= c2 * (2 * j) / (2 * j + 1)
        total += term
    return 2 / math.pi * (theta + s * total)
