"""Memory checks: peak CUDA memory allocated (`max_memory`, rlhf-canary 0.1's name) and reserved.

A peak is one number per run, nearly deterministic on a GPU. It fails when it grows by more than
max_mem_increase_mb or more than max_mem_increase_pct (either limit), and, with several baselines, by more
than k x their spread, so allocator jitter never fails a pull request.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable

from canary_action.compare.context import NEW_BASELINE, Context, no_baseline, noise_margin, not_comparable, pct, skipped
from canary_action.compare.result import Check
from canary_action.compare.runs import RunData

Peak = Callable[[RunData], float | None]


def memory_checks(ctx: Context) -> list[Check]:
    return [
        _peak(ctx, "max_memory", "allocated", lambda r: r.peak_allocated_mib),
        _peak(ctx, "max_memory_reserved", "reserved", lambda r: r.peak_reserved_mib),
    ]


def memory_limit_mib(base: float, max_mb: float, max_pct: float, margin: float) -> float:
    """The growth (MiB) above which a peak fails: the tighter of the two limits, never inside the noise."""
    return max(min(max_mb, base * max_pct / 100), margin)


def _peak(ctx: Context, name: str, kind: str, get: Peak) -> Check:
    current = get(ctx.current)
    if current is None:
        return skipped(name, "memory", "MiB", "no CUDA memory in this run (CPU)")
    if not ctx.perf.usable:
        if ctx.perf.differences:
            return not_comparable(name, "memory", "MiB", ctx.perf)
        return no_baseline(name, "memory", "MiB", current)
    values = [v for b in ctx.perf.usable if (v := get(b)) is not None]
    if not values:
        why = "the baseline recorded no CUDA memory"
        return skipped(name, "memory", "MiB", why, current=current, fix=f"on a GPU runner, {NEW_BASELINE}")
    t = ctx.thresholds
    base = statistics.fmean(values)
    margin = noise_margin(values, t.run_spread_k)
    limit = memory_limit_mib(base, t.max_mem_increase_mb, t.max_mem_increase_pct, margin)
    delta = current - base
    note = f"the tighter of {t.max_mem_increase_mb:g} MiB and {t.max_mem_increase_pct:g} % of the baseline"
    if margin > min(t.max_mem_increase_mb, base * t.max_mem_increase_pct / 100):
        note = f"widened to {t.run_spread_k:g} × the spread of the {len(values)} baselines"
    return Check(
        name=name,
        group="memory",
        status="fail" if delta > limit else "pass",
        unit="MiB",
        baseline=base,
        current=current,
        delta=delta,
        delta_pct=pct(delta, base),
        threshold=limit,
        threshold_unit="MiB",
        threshold_note=note,
        message=f"peak {kind} {base:,.0f} → {current:,.0f} MiB ({delta:+,.0f} MiB)",
    )
