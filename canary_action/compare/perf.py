"""Perf checks: steady-state step time, measured tokens/s (statistical); first step, GPU utilisation and
data-wait share (secondary signals that warn)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from typing import Literal

from canary_action.compare import paired
from canary_action.compare.context import (
    NEW_BASELINE,
    Context,
    no_baseline,
    noise_margin,
    not_comparable,
    pct,
    skipped,
)
from canary_action.compare.result import Check, Interval
from canary_action.compare.runs import RunData
from canary_action.compare.stats import Decision, Effect, Sample, compare_levels, judge, judge_paired, prior_ratio
from canary_action.metrics import schema as m
from canary_action.metrics.io import counted

TOKENS_PER_STEP_SAME = 0.005  # within 0.5 %: the same batches, so tokens/s is step time in other units
MIRROR_SHARE = 0.5  # tokens per step within half the tokens/s limit: a tokens/s failure would be step time's
#: Steps a run needs beyond min_step_count: room for the warm-up cut (the fix a skipped perf check names).
WARMUP_ROOM = 10


def steps_needed(min_step_count: int, profiled_steps: int = 0) -> int:
    """max_steps that leaves min_step_count steady steps after warm-up and the profiler window."""
    return min_step_count + WARMUP_ROOM + profiled_steps


def too_short_fix(ctx: Context) -> str:
    needed = steps_needed(ctx.thresholds.min_step_count, ctx.current.profiler_steps or 0)
    return f"run at least {needed} steps (max_steps) for the {ctx.tier} tier, or lower min_step_count"


def perf_checks(ctx: Context) -> tuple[list[Check], Effect | None]:
    """The perf checks, and the step-time comparison behind the first (its noise goes into the result)."""
    step_time, effect = _step_time(ctx)
    checks = [
        step_time,
        _tokens_per_sec(ctx),
        _first_step(ctx, effect),
        _points(ctx, "gpu_utilization", lambda r: r.gpu_utilization_pct, ctx.thresholds.max_gpu_util_drop_pp, -1),
        _data_wait(ctx),
    ]
    if ctx.partner is not None and ctx.current.generation_share is not None:
        checks.append(_paired_share(ctx, "generation_share", m.GENERATION_S, ctx.thresholds.max_data_wait_increase_pp))
    return checks, effect


def step_time_effect(current: RunData, baselines: Sequence[RunData], *, level: float) -> Effect | None:
    """The statistical comparison the step_time check judges, at confidence `level` (None without steady
    samples)."""
    samples = [level_sample(b.steady_step_times, b.step_time_median) for b in baselines]
    usable = [s for s in samples if s is not None]
    own = level_sample(current.steady_step_times, current.step_time_median)
    if own is None or not usable:
        return None
    return compare_levels(own, usable, ratio=device_ratio(current), level=level)


def held_to_history(paired_check: Check, history_check: Check | None) -> Check:
    """A lockstep pair's check, unless the same figure fails against the separate runs beside it (`ctx.history`):
    a paired pass never overrides a failure against the baselines. Where the pair came from a pull request's job,
    its base side was not the trusted side's to make."""
    if history_check is None or history_check.status != "fail" or paired_check.status == "fail":
        return paired_check
    said = f"{history_check.message}; this failure stands whatever the lockstep pair says ({paired_check.message})"
    return history_check.model_copy(update={"message": said})


def _step_time(ctx: Context) -> tuple[Check, Effect | None]:
    name, unit = "step_time", "s"
    blocked = _blocked(ctx, name, unit, len(ctx.current.steady_step_times or []))
    if blocked:
        return blocked, None
    if ctx.partner is None:
        return _step_time_against(ctx, ctx.perf.usable)
    effect, check = None, stalled_pair(ctx, name, unit)
    if check is None:
        timing = paired.running_time(ctx.current, ctx.partner)
        effect = paired.paired_effect(ctx.current, ctx.partner, timing.step_time, level=ctx.level)
        limit = ctx.thresholds.max_step_time_increase_pct
        if effect is None:
            check = _too_few_rounds(ctx, name, unit)
        else:
            check = judged(name, unit, effect, limit, ctx, worse="higher", current=_own(ctx, timing), timing=timing)
            check = _resolution(ctx, check, effect)
    history = _step_time_against(ctx, ctx.history)[0] if ctx.history else None
    return held_to_history(check, history), effect


def _resolution(ctx: Context, check: Check, effect: Effect) -> Check:
    """A pair whose raised limit would let a +5 % slowdown through more often than 1 time in 5 says, in its limit's
    note, how much longer its canary would have to be (`paired.steps_to_resolve`); a failed check needs no advice."""
    factor = paired.steps_to_resolve(effect, ctx.thresholds.paired_min_effect_pct, ctx.thresholds.run_spread_k)
    if factor is None or check.status == "fail" or check.threshold_note is None:
        return check
    target = f"a +{paired.RESOLVE_PCT:g} % slowdown"
    if math.isinf(factor):
        advice = (
            f"no canary length would fail {target} 4 times in 5 here: the process-level spread "
            f"({effect.prior_spread_pct:.1f} %) alone is more noise than that allows at a "
            f"{ctx.thresholds.paired_min_effect_pct:g} % minimum effect"
        )
    else:
        factor = math.ceil(factor * 10) / 10  # rounded up: never "1.0 times", when more steps are needed
        steps = ctx.current.config.get("max_steps")
        length = f" (max_steps: {math.ceil(factor * steps)})" if isinstance(steps, int) and steps > 0 else ""
        advice = f"to fail {target} 4 times in 5, this canary needs about {factor:.1f}× its steps{length}"
    return check.model_copy(update={"threshold_note": f"{check.threshold_note}; {advice}"})


def _own(ctx: Context, timing: paired.Timing, *, tokens: bool = False) -> float | None:
    """The head side's own figure on the pair's timing: its median step time (or tokens/s) over its steady steps,
    less its wait for a CPU where the pair is judged so; the baseline shown is this over the effect."""
    if timing is paired.WALL:
        return ctx.current.tokens_per_s if tokens else ctx.current.step_time_median
    figure = timing.tokens_per_s if tokens else timing.step_time
    return figure(ctx.current, ctx.current.steady_rows or [])


def _step_time_against(ctx: Context, baselines: Sequence[RunData]) -> tuple[Check, Effect | None]:
    """step_time against separate runs."""
    name, unit, limit = "step_time", "s", ctx.thresholds.max_step_time_increase_pct
    effect = step_time_effect(ctx.current, baselines, level=ctx.level)
    if effect is None:
        why = "no steady-state step times in the baseline"
        return skipped(name, "perf", unit, why, fix=NEW_BASELINE), None
    check = judged(name, unit, effect, limit, ctx, worse="higher", current=ctx.current.step_time_median)
    return check, effect


def _tokens_per_sec(ctx: Context) -> Check:
    """Judged when the tokens per step changed (packing, truncation, an allowed max_length change).

    One cause, one verdict: with (nearly) the same tokens per step on the same steps, tokens/s is step_time in
    other units and is judged there; a tokens/s failure beside a step_time failure warns (verdict.py).
    """
    name, unit, limit = "tokens_per_sec", "tok/s", ctx.thresholds.max_tps_drop_pct
    measured = [b for b in ctx.perf.usable if b.tokens_per_s_measured]
    same = _same_tokens_per_step(ctx.current, measured, limit)
    if same:
        why = f"the same tokens per step ({same:,.0f}) on the same steps, so tokens/s mirrors step_time: judged there"
        return skipped(name, "perf", unit, why, current=ctx.current.tokens_per_s)
    blocked = _blocked(ctx, name, unit, len(ctx.current.steady_tokens or []))
    if blocked:
        return blocked
    if ctx.partner is None:
        return _tokens_against(ctx, measured)
    check = stalled_pair(ctx, name, unit)
    if check is None:
        timing = paired.running_time(ctx.current, ctx.partner)
        effect = paired.paired_effect(ctx.current, ctx.partner, timing.tokens_per_s, level=ctx.level)
        check = (
            judged(name, unit, effect, limit, ctx, worse="lower", current=_own(ctx, timing, tokens=True), timing=timing)
            if effect is not None
            else _too_few_rounds(ctx, name, unit)
        )
    history = [b for b in ctx.history if b.tokens_per_s_measured]
    return held_to_history(check, _tokens_against(ctx, history) if history else None)


def _tokens_against(ctx: Context, measured: Sequence[RunData]) -> Check:
    """tokens_per_sec against separate runs that measured their tokens."""
    name, unit, limit = "tokens_per_sec", "tok/s", ctx.thresholds.max_tps_drop_pct
    own = _rates(ctx.current)
    samples = [s for b in measured if (s := _rates(b)) is not None]
    if own is None or not samples:
        return _tokens_unjudged(ctx, own is None, bool(measured))
    effect = compare_levels(own, samples, ratio=device_ratio(ctx.current), level=ctx.level)
    return judged(name, unit, effect, limit, ctx, worse="lower", current=ctx.current.tokens_per_s)


def _tokens_unjudged(ctx: Context, own_missing: bool, any_measured: bool) -> Check:
    name, unit, current = "tokens_per_sec", "tok/s", ctx.current.tokens_per_s
    if own_missing:
        return skipped(name, "perf", unit, "this run did not count tokens per step")
    why = (
        "the baseline did not count tokens per step"
        if any_measured
        else "the baseline's tokens/s was estimated from its config (rlhf-canary 0.1), not measured"
    )
    return skipped(name, "perf", unit, why, current=current, fix=NEW_BASELINE)


def _first_step(ctx: Context, step_time: Effect | None) -> Check:
    """Step 1 against the baselines' (geometric mean), widened to k x their spread and never inside the
    between-run noise the step-time comparison found plus one step's own noise (it is a single sample, not a
    median): one or two baselines cannot show how much a shared machine moves a run, and the first step moves
    with it (measured: 23 % A/A warnings without this)."""
    name, unit, limit = "first_step_time", "s", ctx.thresholds.max_first_step_increase_pct
    current = ctx.current.first_step_time_s
    if current is None:
        return skipped(name, "perf", unit, "the first step was not timed")
    if not ctx.perf.usable:
        return _unusable(ctx, name, unit, current)
    values = [v for b in ctx.perf.usable if (v := b.first_step_time_s) is not None and v > 0]
    if not values or current <= 0:
        why = "the baseline did not time its first step"
        return skipped(name, "perf", unit, why, current=current, fix=NEW_BASELINE)
    logs = [math.log(v) for v in values]
    base = math.exp(statistics.fmean(logs))
    change = 100 * (current / base - 1)
    k = ctx.thresholds.run_spread_k
    run_noise = k * math.hypot(step_time.sd_log, step_time.step_sd_log) if step_time is not None else 0.0
    spread = noise_margin(logs, k)
    allowed = max(limit, 100 * math.expm1(max(spread, run_noise)))
    status = "warn" if change > allowed else "pass"
    note = _widened_note(limit, allowed, len(values), "%")
    if run_noise > spread:
        note = f"widened from {limit:g} % to {allowed:.1f} % = {k:g} × the step-time comparison's noise for one step"
    return Check(
        name=name, group="perf", status=status, unit=unit, baseline=base, current=current,
        delta=current - base, delta_pct=change, threshold=allowed, threshold_unit="%",
        threshold_note=note if allowed > limit else None,
        message=f"first step (compile, allocator and data warm-up) {change:+.1f} %",
    )  # fmt: skip


def _data_wait(ctx: Context) -> Check:
    limit = ctx.thresholds.max_data_wait_increase_pp
    if ctx.partner is not None and ctx.current.data_wait_share is not None:
        return _paired_share(ctx, "data_wait_share", m.DATA_WAIT_S, limit)
    return _points(ctx, "data_wait_share", _wait_pct, limit, +1)


def _paired_share(ctx: Context, name: str, column: str, limit: float) -> Check:
    """A share of step time (data wait, generation), head minus base per round: warns when clearly up by more
    than the limit in percentage points (a share moves with the step, so it names a mechanism, not a verdict)."""
    assert ctx.partner is not None
    stalled = stalled_pair(ctx, name, "%")
    if stalled is not None:
        return stalled
    points = paired.paired_points(ctx.current, ctx.partner, paired.share_of(column), level=ctx.level)
    if points is None:
        return _too_few_rounds(ctx, name, "%")
    clear = points.low_pp > 0 or points.high_pp < 0
    status = "warn" if points.low_pp > 0 and points.delta_pp > limit else "pass"
    label = name.replace("_", " ")
    return Check(
        name=name, group="perf", status=status, unit="%", baseline=points.base, current=points.current,
        delta=points.delta_pp, delta_pct=pct(points.delta_pp, points.base),
        interval=Interval(low=points.low_pp, high=points.high_pp, level=points.level), threshold=limit,
        threshold_unit="pp",
        message=f"{label} {points.base:.1f} % → {points.current:.1f} % ({points.delta_pp:+.1f} points "
        f"[{points.low_pp:+.1f}, {points.high_pp:+.1f}]) paired over {points.rounds} rounds, "
        f"{'clear' if clear else 'not statistically clear'}",
    )  # fmt: skip


def stalled_pair(ctx: Context, name: str, unit: str, current: float | None = None) -> Check | None:
    """A paired check skipped, saying why, when the base side was stopped or starved in too many rounds to judge
    the pair (paired.stall_report); None otherwise. A few such rounds are only left out (paired.common_rounds)."""
    assert ctx.partner is not None
    said, too_many = paired.stall_report(ctx.current, ctx.partner)
    if not too_many or said is None:
        return None
    fix = (
        "run the pair again where nothing else computes on its CPUs; code of the head side that stops or starves "
        "the base side is what this catches (docs/lockstep.md, 'Integrity')"
    )
    return skipped(name, "perf", unit, said, current=current, fix=fix)


def _too_few_rounds(ctx: Context, name: str, unit: str) -> Check:
    why = f"fewer than {paired.MIN_ROUNDS} lockstep rounds with steady steps on both sides"
    return skipped(
        name, "perf", unit, why, fix=f"{too_short_fix(ctx)}; or take turns in smaller chunks (--chunk-steps)"
    )


def _points(ctx: Context, name: str, get: Callable[[RunData], float | None], limit: float, worse: int) -> Check:
    """A share in percent compared in percentage points; worse = +1 when growth is bad, -1 when a drop is."""
    current = get(ctx.current)
    if current is None:
        return skipped(name, "perf", "%", "not measured in this run")
    if not ctx.perf.usable:
        return _unusable(ctx, name, "%", current)
    values = [v for b in ctx.perf.usable if (v := get(b)) is not None]
    if not values:
        return skipped(name, "perf", "%", "not measured in the baseline", current=current, fix=NEW_BASELINE)
    base = statistics.fmean(values)
    allowed = max(limit, noise_margin(values, ctx.thresholds.run_spread_k))
    status = "warn" if worse * (current - base) > allowed else "pass"
    return Check(
        name=name, group="perf", status=status, unit="%", baseline=base, current=current, delta=current - base,
        delta_pct=pct(current - base, base), threshold=worse * allowed, threshold_unit="pp",
        threshold_note=_widened_note(limit, allowed, len(values), "pp") if allowed > limit else None,
        message=f"{name.replace('_', ' ')} {base:.1f} % → {current:.1f} % ({current - base:+.1f} points)",
    )  # fmt: skip


def judged(
    name: str,
    unit: str,
    effect: Effect,
    limit: float,
    ctx: Context,
    *,
    worse: str,
    current: float | None,
    timing: paired.Timing = paired.WALL,
) -> Check:
    """A statistical check's row: `effect` judged with its interval. Separate runs: against `limit` (the tier's),
    widened to the noise. A lockstep pair: by its own precision (`judge_paired`: the minimum effect, raised to
    the pair's noise), whatever `limit` is; `timing` says what its rounds timed, where not wall time."""
    k = ctx.thresholds.run_spread_k
    direction: Literal["higher", "lower"] = "higher" if worse == "higher" else "lower"
    if effect.paired_rounds is not None:
        limit = ctx.thresholds.paired_min_effect_pct
        decision = judge_paired(effect, limit, k, worse=direction)
        message = _paired_message(effect, decision, limit, direction, timing)
    else:
        decision = judge(effect, limit, k, worse=direction)
        sign = "+" if worse == "higher" else "−"
        clear = "clear" if (effect.low_pct > 0 or effect.high_pct < 0) else "not statistically clear"
        message = (
            f"{effect.delta_pct:+.1f} % [{effect.low_pct:+.1f} %, {effect.high_pct:+.1f} %] against "
            f"{_baselines(effect.num_baselines)}, {clear}; limit {sign}{decision.limit_pct:.1f} %"
        )
    base = current / (1 + effect.delta_pct / 100) if current is not None else None
    return Check(
        name=name,
        group="perf",
        status=decision.status,
        unit=unit,
        baseline=base,
        current=current,
        delta=current - base if current is not None and base is not None else None,
        delta_pct=effect.delta_pct,
        interval=Interval(low=effect.low_pct, high=effect.high_pct, level=effect.level),
        threshold=decision.limit_pct if worse == "higher" else -decision.limit_pct,
        threshold_unit="%",
        threshold_note=_noise_note(effect, limit, decision.limit_pct, k) if decision.widened else None,
        message=message,
    )


def _paired_message(
    effect: Effect, decision: Decision, min_effect: float, worse: Literal["higher", "lower"], timing: paired.Timing
) -> str:
    """The rule a pair was judged by, in one line: "+11.0 % [+7.4, +14.7] over 32 rounds — above the 3 % minimum
    effect"."""
    interval = f"[{effect.low_pct:+.1f}, {effect.high_pct:+.1f}]"
    figure = f"{effect.delta_pct:+.1f} % {interval} paired over {effect.paired_rounds} rounds"
    if timing is not paired.WALL:
        figure += f" ({timing.basis})"
    change = effect.delta_pct if worse == "higher" else -effect.delta_pct
    beyond = "above" if worse == "higher" else "a drop beyond"
    minimum = f"the {min_effect:g} % minimum effect"
    if decision.widened:
        raised = _raised(decision.limit_pct, min_effect)
        minimum = f"the {raised} % minimum effect ({min_effect:g} %, raised to this pair's noise)"
    clear = effect.low_pct > 0 if worse == "higher" else effect.high_pct < 0
    if change > decision.limit_pct:
        return f"{figure} — {beyond} {minimum}" + ("" if clear else ", but not statistically clear")
    if clear and change > min_effect:
        return f"{figure} — clear and over {min_effect:g} %, but within {minimum}"
    return f"{figure} — within {minimum}"


def _noise_note(effect: Effect, limit: float, applied: float, k: float) -> str:
    if effect.paired_rounds is not None:
        spread = (
            f"rounds spread {effect.run_spread_pct or 0:.1f} % over {effect.paired_rounds} rounds, plus "
            f"{effect.prior_spread_pct:.1f} % between processes"
        )
    elif effect.run_spread_pct is None:
        assumed = f"{effect.prior_spread_pct:.1f} %"
        spread = f"run-to-run spread unmeasured with one baseline, assumed {assumed} from the per-step spread"
    else:
        spread = f"run-to-run spread {effect.run_spread_pct:.1f} % over {effect.num_baselines} baselines"
    return f"widened from {limit:g} % to {_raised(applied, limit)} % = {k:g} × the comparison's noise ({spread})"


def _raised(applied: float, limit: float) -> str:
    """A raised limit, with one decimal, or two where one would read as the limit it was raised from."""
    return f"{applied:.1f}" if round(applied, 1) != round(limit, 1) else f"{applied:.2f}"


def _widened_note(limit: float, applied: float, n: int, unit: str) -> str:
    return f"widened from {limit:g} {unit} to {applied:.1f} {unit}: the {counted(n, 'baseline')} spread that much"


def _blocked(ctx: Context, name: str, unit: str, num_steady: int) -> Check | None:
    least = ctx.thresholds.min_step_count
    if num_steady < least:
        why = f"{num_steady} steady-state steps, fewer than min_step_count ({least})"
        return skipped(name, "perf", unit, why, fix=too_short_fix(ctx))
    return None if ctx.perf.usable or ctx.partner is not None else _unusable(ctx, name, unit, None)


def _unusable(ctx: Context, name: str, unit: str, current: float | None) -> Check:
    if ctx.perf.differences:
        return not_comparable(name, "perf", unit, ctx.perf)
    return no_baseline(name, "perf", unit, current)


def level_sample(values: list[float] | None, median: float | None) -> Sample | None:
    """A run's steady samples of a positive figure, else its median alone, else None."""
    if values and all(v > 0 for v in values):
        return Sample.of(values)
    return Sample(values=None, median=median) if median is not None and median > 0 else None


def _rates(run: RunData) -> Sample | None:
    times, tokens = run.steady_step_times, run.steady_tokens
    if not times or not tokens or len(times) != len(tokens):
        return None
    rates = [k / t for k, t in zip(tokens, times, strict=True) if t > 0 and k > 0]
    return Sample.of(rates) if rates else None


def _same_tokens_per_step(current: RunData, baselines: Sequence[RunData], limit_pct: float) -> float | None:
    """The current tokens per step when every baseline's is within the larger of 0.5 % and half the tokens/s
    limit: then a tokens/s change is mostly the step time's (sampled completions vary a little run to run)."""
    own = current.tokens_per_step
    others = [t for b in baselines if (t := b.tokens_per_step) is not None]
    if own is None or not others:
        return None
    close = max(TOKENS_PER_STEP_SAME, MIRROR_SHARE * limit_pct / 100)
    return own if all(abs(t / own - 1) <= close for t in others) else None


def device_ratio(run: RunData) -> float:
    """The run-spread prior's ratio for the device the run trained on."""
    return prior_ratio(run.workload.device if run.workload else None)


def _wait_pct(run: RunData) -> float | None:
    return 100 * run.data_wait_share if run.data_wait_share is not None else None


def _baselines(n: int) -> str:
    return "1 baseline" if n == 1 else f"{n} baselines"
