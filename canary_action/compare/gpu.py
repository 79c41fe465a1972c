"""The GPU's own time: the gpu_time check, the step's split into host and GPU time, and the suspects' reading of
which side moved.

A CUDA run that timed the GPU (train/gpu_time.py: the union of each step's kernel and copy records) has two
figures per step: its wall time and the GPU's busy time inside it; the rest is the host (Python, data, kernel
launches, synchronisation, waiting). On a host-bound canary the GPU is a tenth of the step, so a kernel 50 %
slower moves step time by 5 %: judged apart, it is a clear +50 %.

- `gpu_time` is judged like step time: separate runs against `max_gpu_time_increase_pct` (the tier's step-time
  limit), widened to the noise; a lockstep pair round by round, by its own precision (`paired_min_effect_pct`).
  Not on the CPU (no row). A CUDA run without GPU times (gpu_time: false, an older baseline) says so.
- One cause, one failure: when step time and GPU time both fail and the GPU's growth accounts for at least
  half of the step's, the step is slower because the kernels are: step_time warns, restating gpu_time. When the
  host grew by more than the GPU, they are two causes and both fail.
- The split (`StepSplit`, in the result and every report) and the suspects say which side moved: "GPU kernels
  +48 % while step time +5 %: a kernel regression diluted by host overhead" or "host overhead grew, kernels
  unchanged".
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Final

from canary_action.compare import paired
from canary_action.compare.clues import PERF, Case, Clue
from canary_action.compare.context import NEW_BASELINE, Context, no_baseline, not_comparable, skipped
from canary_action.compare.perf import (
    device_ratio,
    held_to_history,
    judged,
    level_sample,
    stalled_pair,
    too_short_fix,
)
from canary_action.compare.result import Check, StepSplit
from canary_action.compare.runs import RunData
from canary_action.compare.stats import Effect, compare_levels

NAME: Final = "gpu_time"
RESTATE_SHARE: Final = 0.5  # the GPU's growth behind at least half the step's: one cause (the kernels)
MIN_GPU_CHANGE: Final = 0.10  # a GPU busy time that moved less is unchanged (kernel times wobble a few percent)
MIN_HOST_CHANGE: Final = 0.02  # host time that moved less than 2 % of the step is unchanged (step-time noise)
GPU_ALONE_WEIGHT: Final = 0.85
HOST_ALONE_WEIGHT: Final = 0.7
SCOPE: Final = PERF | frozenset({NAME})


def gpu_time_check(ctx: Context) -> Check | None:
    """The check, or None on a run that did not train on CUDA (it does not apply: no row)."""
    current = ctx.current
    if current.device_kind != "cuda":
        return None
    own = current.steady_gpu_busy
    unjudged = _unjudged(ctx, own)
    if unjudged is not None:
        return unjudged
    median = statistics.median(own)
    if ctx.partner is None:
        return _against_history(ctx, ctx.perf.usable, own, median)
    check = stalled_pair(ctx, NAME, "s", median)
    if check is None:
        effect = paired.paired_effect(current, ctx.partner, paired.gpu_busy, level=ctx.level)
        if effect is None:
            why = f"fewer than {paired.MIN_ROUNDS} lockstep rounds timed on the GPU on both sides"
            check = skipped(NAME, "perf", "s", why, current=median, fix=too_short_fix(ctx))
        else:
            check = _judged(ctx, effect, median)
    return held_to_history(check, _against_history(ctx, ctx.history, own, median) if ctx.history else None)


def _against_history(ctx: Context, baselines: Sequence[RunData], own: Sequence[float], median: float) -> Check:
    """Separate runs: the steady GPU times against the baselines' that timed the GPU, as step time is judged."""
    if not baselines:
        return (
            not_comparable(NAME, "perf", "s", ctx.perf)
            if ctx.perf.differences
            else no_baseline(NAME, "perf", "s", median)
        )
    samples = [s for b in baselines if (s := level_sample(b.steady_gpu_busy, None)) is not None]
    if not samples:
        why = "no baseline timed the GPU (recorded before gpu_time, with gpu_time: false, or on another device)"
        return skipped(NAME, "perf", "s", why, current=median, fix=NEW_BASELINE)
    own_sample = level_sample(list(own), median)
    assert own_sample is not None  # own is not empty and every value is positive
    effect = compare_levels(own_sample, samples, ratio=device_ratio(ctx.current), level=ctx.level)
    return _judged(ctx, effect, median)


def _unjudged(ctx: Context, own: Sequence[float]) -> Check | None:
    """Why the current run's GPU time cannot be judged at all: not recorded, or too few steady steps."""
    if not own:
        why = "the GPU's busy time was not recorded (config gpu_time: false, or no session kept its records)"
        return skipped(NAME, "perf", "s", why)
    least = ctx.thresholds.min_step_count
    if len(own) < least:
        why = f"{len(own)} steady steps timed on the GPU, fewer than min_step_count ({least})"
        return skipped(NAME, "perf", "s", why, fix=too_short_fix(ctx))
    return None


def _judged(ctx: Context, effect: Effect, median: float) -> Check:
    check = judged(NAME, "s", effect, ctx.thresholds.max_gpu_time_increase_pct, ctx, worse="higher", current=median)
    return check.model_copy(update={"message": f"GPU busy time per step {check.message}"})


def one_cause(checks: Sequence[Check]) -> list[Check]:
    """step_time warns instead of failing when gpu_time failed too and the GPU's growth is behind at least half of
    the step's: the kernels slowed the step."""
    by_name = {c.name: c for c in checks}
    step, gpu = by_name.get("step_time"), by_name.get(NAME)
    if step is None or gpu is None or step.status != "fail" or gpu.status != "fail":
        return list(checks)
    if not step.delta or gpu.delta is None or gpu.delta < RESTATE_SHARE * step.delta:
        return list(checks)
    share = f"{gpu.delta / step.delta:.0%}" if step.delta > 0 else "all"
    message = (
        f"{step.message}; the same cause as the gpu_time failure (the GPU's growth is {share} of it), so a warning here"
    )
    return [c.model_copy(update={"status": "warn", "message": message}) if c is step else c for c in checks]


def step_split(current: RunData, baselines: Sequence[RunData], partner: RunData | None) -> StepSplit | None:
    """The current run's steady step split into GPU and host time, beside its baseline's (the pair's base side,
    else the mean of the baselines that timed the GPU); None when the current run did not time the GPU."""
    own = _split(current)
    if own is None:
        return None
    step, gpu, kernels = own
    others = [s for b in ([partner] if partner is not None else baselines) if (s := _split(b)) is not None]
    split = StepSplit(step_s=step, gpu_s=gpu, host_s=max(step - gpu, 0.0), kernels=kernels)
    if not others:
        return split
    base_step, base_gpu = statistics.fmean(o[0] for o in others), statistics.fmean(o[1] for o in others)
    counts = [k for o in others if (k := o[2]) is not None]
    return split.model_copy(update={
        "base_step_s": base_step, "base_gpu_s": base_gpu, "base_host_s": max(base_step - base_gpu, 0.0),
        "base_kernels": statistics.fmean(counts) if counts else None,
    })  # fmt: skip


def _split(run: RunData) -> tuple[float, float, float | None] | None:
    """(median step time, median GPU busy time, median kernels per step) over the steady steps timed on the GPU."""
    rows = [i for i in run.steady_rows or [] if i < len(run.gpu_busy) and (run.gpu_busy[i] or 0) > 0]
    times = [t for i in rows if (t := run.step_times[i]) is not None]
    if not rows or not times:
        return None
    busy = [b for i in rows if (b := run.gpu_busy[i]) is not None]
    kernels = [k for i in rows if i < len(run.gpu_kernels) and (k := run.gpu_kernels[i]) is not None]
    step = statistics.median(times)
    if step <= 0:  # no time to split (a file of zero step times)
        return None
    return step, statistics.median(busy), statistics.median(kernels) if kernels else None


def gpu_clues(case: Case) -> list[Clue]:
    """Which side of the step moved: the GPU's kernels, or the host around them."""
    split = case.split
    if split is None or split.base_gpu_s is None or split.base_host_s is None or not split.base_step_s:
        return []
    gpu_change = split.gpu_s / split.base_gpu_s - 1 if split.base_gpu_s > 0 else 0.0
    host_change = (split.host_s - split.base_host_s) / split.base_step_s
    step_change = split.step_s / split.base_step_s - 1
    gpu_moved, host_moved = gpu_change >= MIN_GPU_CHANGE, host_change >= MIN_HOST_CHANGE
    evidence = (
        f"GPU busy per step {_ms(split.base_gpu_s)} → {_ms(split.gpu_s)} ({gpu_change:+.0%}); host time per step "
        f"{_ms(split.base_host_s)} → {_ms(split.host_s)} ({host_change:+.0%} of the step)",
    )
    kernels = _kernels(split)
    clues = []
    if gpu_moved:
        diluted = (
            f"GPU kernels {gpu_change:+.0%} while step time {step_change:+.0%}: a kernel regression diluted by host "
            "overhead"
            if not host_moved
            else f"GPU kernels {gpu_change:+.0%} and host time grew too (step time {step_change:+.0%})"
        )
        steps = (
            "rerun with profiler.enabled: true and compare the op table's device times: which kernels grew",
            "look for a dtype, shape or attention-implementation change that swaps kernels",
        )
        weight = GPU_ALONE_WEIGHT if not host_moved else 0.5
        clues.append(Clue("kernel", weight, evidence + kernels, SCOPE, diluted, steps))
    if host_moved:
        summary = (
            f"host overhead grew ({_ms(split.base_host_s)} → {_ms(split.host_s)} per step), GPU kernels unchanged "
            f"({_ms(split.base_gpu_s)} → {_ms(split.gpu_s)}): Python, data, launches or syncs, not the kernels"
            if not gpu_moved
            else f"host overhead grew ({_ms(split.base_host_s)} → {_ms(split.host_s)} per step) besides the kernels"
        )
        weight = HOST_ALONE_WEIGHT if not gpu_moved else 0.5
        clues.append(Clue("host", weight, evidence + kernels, PERF, summary))  # next steps: the category's
    return clues


def _kernels(split: StepSplit) -> tuple[str, ...]:
    if split.kernels is None or not split.base_kernels or abs(split.kernels / split.base_kernels - 1) < 0.05:
        return ()
    return (f"kernels per step {split.base_kernels:,.0f} → {split.kernels:,.0f}: more launches for the host",)


def _ms(seconds: float) -> str:
    return f"{1000 * seconds:,.1f} ms"
