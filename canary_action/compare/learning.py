"""Learning checks: does the current run still learn like its baselines?

- loss_curve: per step, the smoothed loss must stay inside a band around the baselines' (a relative
  tolerance in the spirit of Megatron-LM's golden-value tests, widened to k x the baselines' spread at that
  step when there are several). Only meaningful for the same model, data, order and seed: learning
  comparability.
- tail_loss: the mean loss over the last 10 % of steps (not the whole-run mean, which the first steps
  dominate), against the baselines'. The tail ends at the last step every run logged: a run that stopped
  early is compared with the baselines' same steps, not with the end of their training.
- algorithm metrics: DPO reward accuracy and margin, GRPO/RLOO/PPO mean reward and KL, tail means.

Learning checks warn by default (a changed loss may be the point of the pull request); `fail_on_learning`
makes them fail. A run the non-finite guard stopped is judged by nan_steps / inf_steps alone: its learning
figures would only restate the stop.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal

from canary_action.compare.context import (
    NEW_BASELINE,
    Context,
    no_baseline,
    noise_margin,
    not_comparable,
    pct,
    skipped,
    spread,
)
from canary_action.compare.result import Check, CheckStatus
from canary_action.compare.runs import RunData

SMOOTH: Final = 5  # centred rolling median: one noisy step never leaves the band alone
OUTSIDE_SHARE: Final = 0.10  # the curve check trips when over 10 % of compared steps leave the band...
OUTSIDE_MIN: Final = 3  # ...and at least 3 of them
MIN_COMMON_STEPS: Final = 10
FLOOR_SHARE: Final = 0.10  # tolerances are relative to at least 10 % of the starting loss: a loss near 0 has no scale

#: (check name, the TRL log keys it reads (first present wins), which direction is worse)
ALGO_METRICS: Final[tuple[tuple[str, tuple[str, ...], Literal["higher", "lower"]], ...]] = (
    ("reward_accuracy", ("rewards/accuracies",), "lower"),
    ("reward_margin", ("rewards/margins",), "lower"),
    ("mean_reward", ("reward", "objective/rlhf_reward"), "lower"),
    ("kl", ("kl", "objective/kl"), "higher"),
)


@dataclass(frozen=True)
class Band:
    steps: list[int]
    low: list[float]
    mid: list[float]
    high: list[float]
    current: list[float]
    """The current run's smoothed loss at the same steps."""

    @property
    def outside(self) -> int:
        return sum(1 for lo, x, hi in zip(self.low, self.current, self.high, strict=True) if not lo <= x <= hi)


def learning_checks(ctx: Context, band: Band | None) -> list[Check]:
    """The learning checks; `band` is `loss_band` over the learning baselines (computed once: charts use it too)."""
    algos = [(name, key, worse) for name, keys, worse in ALGO_METRICS if (key := _logged(ctx.current, keys))]
    status = ctx.current.status
    if status.state == "stopped_early" and status.reason == "non_finite":
        at = f" at step {status.step}" if status.step is not None else ""
        why = f"the run stopped{at} on a non-finite value: nan_steps / inf_steps judge it, not its side effects"
        names = [("loss_curve", "% of steps"), ("tail_loss", "loss"), *((name, "") for name, _, _ in algos)]
        return [skipped(name, "learning", unit, why) for name, unit in names]
    end = _common_end(ctx)
    return [_loss_curve(ctx, band), _tail_loss(ctx, end), *(_algo(ctx, n, k, w, end) for n, k, w in algos)]


def _logged(run: RunData, keys: Sequence[str]) -> str | None:
    return next((k for k in keys if k in run.algo), None)


def _common_end(ctx: Context) -> int | None:
    """The last step every run logged (the current one and the per-step learning baselines); None when they all
    end at the same step."""
    runs = [ctx.current, *(b for b in ctx.learning.usable if b.format == "v1")]
    ends = [max(r.loss_steps) for r in runs if r.loss_steps]
    return min(ends) if ends and min(ends) < max(ends) else None


def loss_band(current: RunData, baselines: Sequence[RunData], tolerance_pct: float, k: float) -> Band | None:
    """The band around the baselines' smoothed loss at the steps every run logged; None below 10 steps."""
    own = _smoothed(current)
    others = [_smoothed(b) for b in baselines]
    steps = sorted(set(own).intersection(*others)) if others else []
    if len(steps) < MIN_COMMON_STEPS:
        return None
    starts = [statistics.median([o[s] for o in others]) for s in steps[:SMOOTH]]
    floor = FLOOR_SHARE * abs(statistics.median(starts))
    band = Band(steps=steps, low=[], mid=[], high=[], current=[own[s] for s in steps])
    for s in steps:
        values = [o[s] for o in others]
        mid = statistics.median(values)
        step_spread = spread(values) if len(values) >= 3 else 0.0
        half = max(tolerance_pct / 100 * max(abs(mid), floor), k * step_spread)
        band.low.append(mid - half)
        band.mid.append(mid)
        band.high.append(mid + half)
    return band


def curve_baselines(ctx: Context) -> list[RunData]:
    """The baselines the loss band is drawn from: 0.1 files do not say which steps their losses belong to."""
    return [b for b in ctx.learning.usable if b.format == "v1"]


def _loss_curve(ctx: Context, band: Band | None) -> Check:
    name, unit = "loss_curve", "% of steps"
    if ctx.learning.usable and not curve_baselines(ctx):
        why = "rlhf-canary 0.1 baselines keep no per-step losses"
        return skipped(name, "learning", unit, why, fix=NEW_BASELINE)
    blocked = _blocked(ctx, name, unit, curve_baselines(ctx))
    if blocked:
        return blocked
    t = ctx.thresholds
    if band is None:
        why = f"fewer than {MIN_COMMON_STEPS} steps logged a loss in every run"
        return skipped(name, "learning", unit, why, fix=f"run at least {MIN_COMMON_STEPS} steps (max_steps)")
    outside = band.outside
    share = 100 * outside / len(band.steps)
    tripped = outside >= OUTSIDE_MIN and share > 100 * OUTSIDE_SHARE
    first = next(
        (s for s, lo, x, hi in zip(band.steps, band.low, band.current, band.high, strict=True) if not lo <= x <= hi),
        None,
    )
    where = f", first at step {first}" if first is not None else ""
    return Check(
        name=name,
        group="learning",
        status=ctx.learning_severity if tripped else "pass",
        unit=unit,
        current=share,
        threshold=100 * OUTSIDE_SHARE,
        threshold_unit="% of steps",
        threshold_note=f"band ±{t.loss_curve_tolerance_pct:g} % of the baseline loss, at least "
        f"{FLOOR_SHARE * t.loss_curve_tolerance_pct:g} % of its starting level, widened to {t.run_spread_k:g} × the "
        "baselines' spread per step",
        message=f"{outside} of {len(band.steps)} steps outside the baseline band{where}",
    )


def _tail_loss(ctx: Context, end: int | None) -> Check:
    name, unit = "tail_loss", "loss"
    current = _tail_mean(ctx.current, ctx.current.losses, end)
    if current is None:
        return skipped(name, "learning", unit, "no finite loss in this run")
    blocked = _blocked(ctx, name, unit, ctx.learning.usable, current)
    if blocked:
        return blocked
    values = [v for b in ctx.learning.usable if (v := _tail_mean(b, b.losses, end)) is not None]
    if not values:
        legacy = all(b.format == "rlhf-canary-0.1" for b in ctx.learning.usable)
        why = "rlhf-canary 0.1 baselines keep no per-step losses" if legacy else "no finite loss in the baseline"
        return skipped(name, "learning", unit, why, current=current, fix=NEW_BASELINE)
    floor = statistics.median([_start(b) for b in ctx.learning.usable])
    limit = ctx.thresholds.max_loss_increase_pct
    return _judge_level(ctx, name, unit, current, values, scale=floor, worse="higher", limit_pct=limit, end=end)


def _algo(ctx: Context, name: str, key: str, worse: Literal["higher", "lower"], end: int | None) -> Check:
    current = _tail_mean(ctx.current, ctx.current.algo[key], end)
    if current is None:
        return skipped(name, "learning", "", f"{key} was never finite")
    blocked = _blocked(ctx, name, "", ctx.learning.usable, current)
    if blocked:
        return blocked
    logged = [(b, b.algo[key]) for b in ctx.learning.usable if key in b.algo]
    values = [v for b, series in logged if (v := _tail_mean(b, series, end)) is not None]
    if not values:
        return skipped(name, "learning", "", f"the baseline did not log {key}", current=current, fix=NEW_BASELINE)
    scale = max((abs(v) for _, series in logged for v in series if v is not None and math.isfinite(v)), default=0.0)
    limit = ctx.thresholds.max_algo_metric_change_pct
    return _judge_level(ctx, name, "", current, values, scale=scale, worse=worse, limit_pct=limit, end=end)


def _judge_level(
    ctx: Context,
    name: str,
    unit: str,
    current: float,
    values: list[float],
    *,
    scale: float,
    worse: str,
    limit_pct: float,
    end: int | None,
) -> Check:
    """Worse by more than limit_pct of max(|baseline|, 10 % of the figure's scale), and beyond the noise."""
    base = statistics.fmean(values)
    allowed = max(
        limit_pct / 100 * max(abs(base), FLOOR_SHARE * abs(scale)), noise_margin(values, ctx.thresholds.run_spread_k)
    )
    change = current - base if worse == "higher" else base - current
    status: CheckStatus = ctx.learning_severity if change > allowed else "pass"
    return Check(
        name=name,
        group="learning",
        status=status,
        unit=unit,
        baseline=base,
        current=current,
        delta=current - base,
        delta_pct=pct(current - base, base),
        threshold=allowed,
        threshold_unit=unit or "abs",
        threshold_note=f"{limit_pct:g} % of the baseline (tail mean over the last 10 % of steps), "
        f"{'lower' if worse == 'lower' else 'higher'} is worse",
        message=f"{name.replace('_', ' ')} {base:.4g} → {current:.4g} (tail mean"
        + (f", steps up to {end}, the last every run logged)" if end is not None else ")"),
    )


def _blocked(
    ctx: Context, name: str, unit: str, usable: Sequence[RunData], current: float | None = None
) -> Check | None:
    if usable:
        return None
    if ctx.learning.differences:
        return not_comparable(name, "learning", unit, ctx.learning)
    return no_baseline(name, "learning", unit, current)


def _smoothed(run: RunData) -> dict[int, float]:
    points = [(s, v) for s, v in zip(run.loss_steps, run.losses, strict=False) if v is not None and math.isfinite(v)]
    half = SMOOTH // 2
    return {
        step: statistics.median(v for _, v in points[max(0, i - half) : i + half + 1])
        for i, (step, _) in enumerate(points)
    }


def _start(run: RunData) -> float:
    finite = [v for v in run.losses if v is not None and math.isfinite(v)][:SMOOTH]
    return abs(statistics.median(finite)) if finite else 0.0


def _tail_mean(run: RunData, values: Sequence[float | None], end: int | None) -> float | None:
    """The mean of the last 10 % (at least 5) of the values logged up to step `end` (None: every step)."""
    rows = [i for i, s in enumerate(run.loss_steps) if end is None or s <= end]
    tail = rows[-max(5, math.ceil(0.1 * len(rows))) :]
    finite = [v for i in tail if i < len(values) and (v := values[i]) is not None and math.isfinite(v)]
    return statistics.fmean(finite) if finite else None
