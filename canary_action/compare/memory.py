"""Memory checks: peak CUDA memory allocated (`max_memory`, rlhf-canary 0.1's name) and reserved, and on a CPU
run the process's peak resident memory (`host_memory`), which holds what a GPU run keeps on the device.

A peak is one number per run, nearly deterministic on a GPU (the peak host RSS of identical tiny CPU runs spanned
589-613 MiB here, docs/benchmarks.md#host-memory-on-cpu-runs). It fails when it grows by more
than max_mem_increase_mb or more than max_mem_increase_pct (either limit), and, with several baselines, by more
than k x their spread, so allocator jitter never fails a pull request. GPU runs get no host_memory check: their
host RSS is the Python process and its libraries, not the workload, and a longer sequence would otherwise fail
it beside max_memory.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import replace
from typing import Final

from canary_action.compare.context import NEW_BASELINE, Context, no_baseline, noise_margin, not_comparable, pct, skipped
from canary_action.compare.result import Check
from canary_action.compare.runs import RunData

Peak = Callable[[RunData], float | None]
#: Why a profiled CPU run's host memory is not judged.
PROFILED: Final = "the profiler ran in this run: its recorded events hold host memory until the trace is written"


def memory_checks(ctx: Context) -> list[Check]:
    checks = [
        _peak(ctx, "max_memory", "allocated", lambda r: r.peak_allocated_mib),
        _peak(ctx, "max_memory_reserved", "reserved", lambda r: r.peak_reserved_mib),
    ]
    if ctx.current.device_kind == "cpu":
        checks.append(_host_memory(ctx))
    return checks


def host_peak(run: RunData) -> float | None:
    """A run's peak host RSS where it can be compared: None for a run that profiled, whose recorded events hold
    host memory until the trace is written (shared by host_memory and its suspect, clues.py)."""
    return run.host_peak_rss_mib if run.profiler is None else None


def _host_memory(ctx: Context) -> Check:
    """Peak host RSS of a run without a profiler window, against the baselines without one: the profiler holds
    every recorded event in host memory until its export (+120-160 MiB on the tiny model, more the more ops the
    window records), a cost of measuring that would otherwise read as the pull request's."""
    current = ctx.current.host_peak_rss_mib
    if ctx.current.profiler is not None:
        return skipped("host_memory", "memory", "MiB", PROFILED, current=current)
    unprofiled = [b for b in ctx.perf.usable if b.profiler is None]
    if ctx.perf.usable and not unprofiled:
        why = "every baseline ran the profiler, whose recorded events hold host memory: their peaks are not alike"
        return skipped("host_memory", "memory", "MiB", why, current=current)
    return _peak(replace(ctx, perf=replace(ctx.perf, usable=unprofiled)), "host_memory", "host RSS", host_peak,
                 cuda=False)  # fmt: skip


def memory_limit_mib(base: float, max_mb: float, max_pct: float, margin: float) -> float:
    """The growth (MiB) above which a peak fails: the tighter of the two limits, never inside the noise."""
    return max(min(max_mb, base * max_pct / 100), margin)


def _peak(ctx: Context, name: str, kind: str, get: Peak, *, cuda: bool = True) -> Check:
    current = get(ctx.current)
    if current is None:
        return skipped(name, "memory", "MiB", "no CUDA memory in this run (CPU): host_memory judges its RSS" if cuda
                       else "the run recorded no peak host RSS (read on Linux)")  # fmt: skip
    if not ctx.perf.usable:
        if ctx.perf.differences:
            return not_comparable(name, "memory", "MiB", ctx.perf)
        return no_baseline(name, "memory", "MiB", current)
    values = [v for b in ctx.perf.usable if (v := get(b)) is not None]
    if not values:
        why = f"the baseline recorded no {'CUDA memory' if cuda else 'peak host RSS (an older release, or not Linux)'}"
        fix = f"on a GPU runner, {NEW_BASELINE}" if cuda else NEW_BASELINE
        return skipped(name, "memory", "MiB", why, current=current, fix=fix)
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
