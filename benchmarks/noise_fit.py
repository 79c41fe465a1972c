"""The fit of the shared-CPU noise regime from real runs (benchmarks/detection.py's `fit` command).

Moments of the runs' log step times: the between-run spread of their medians (less each median's own
estimation error, by batch means), the per-step batch content shared by same-seed runs, the AR(1) of each
run's own noise, and its tails. The model they parameterise is in benchmarks/detection.py's docstring.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from canary_action.compare import stats


@dataclass(frozen=True)
class RealRun:
    path: Path
    steps: list[int]
    times: list[float]


def read_runs(runs_dir: Path) -> list[RealRun]:
    """Every completed run's steady steps: from summary.warmup_steps on, outside the profiler window."""
    from canary_action.metrics import schema
    from canary_action.metrics.io import read_metrics

    runs = []
    for path in sorted(runs_dir.rglob("metrics.json")):
        m = read_metrics(path)
        if m.summary is None or m.status.state != "completed":
            continue
        times, steps = m.series.get(schema.STEP_TIME_S, []), m.series.get(schema.STEP, [])
        flagged = m.series.get(schema.IN_PROFILER_WINDOW) or [None] * len(times)
        keep = [
            (int(s), t)
            for i, (s, t, f) in enumerate(zip(steps, times, flagged, strict=True))
            if i >= m.summary.warmup_steps and s is not None and t is not None and t > 0 and not f
        ]
        if len(keep) >= 20:
            runs.append(RealRun(path, [s for s, _ in keep], [t for _, t in keep]))
    return runs


def fit_regime(runs: Sequence[RealRun], runs_dir: Path) -> dict[str, Any]:
    """Fit regime (i) by moments: tau, shared content, AR(1) of the runs' own noise, innovation tails."""
    if len(runs) < 3:
        raise SystemExit(f"need at least 3 completed runs to fit, found {len(runs)}")
    medians = np.array([math.log(statistics.median(r.times)) for r in runs])
    # The spread of log medians includes each median's own estimation error: take the batch-means estimate off.
    within = statistics.fmean(v for r in runs if (v := stats.median_log_var(r.times)) is not None)
    tau = math.sqrt(max(float(np.var(medians, ddof=1)) - within, 0.0))
    mad = 1.4826 * float(np.median(np.abs(medians - np.median(medians))))
    # Each run demeaned on its own; keyed by step number, since warm-ups differ and content goes with the step.
    z = [dict(zip(r.steps, np.log(r.times) - np.log(r.times).mean(), strict=True)) for r in runs]
    total = _pooled(z, 0, same_run=True)
    content = max(_pooled(z, 0, same_run=False), 0.0)
    indep = max(total - content, 1e-12)
    lags = range(1, 11)
    acf = [(_pooled(z, lag, same_run=True) - _pooled(z, lag, same_run=False)) / indep for lag in lags]
    content_acf1 = _pooled(z, 1, same_run=False) / content if content > 0 else 0.0
    rho = min(max(acf[0], 0.0), 0.95)
    excess = _indep_excess_kurtosis(z)
    # AR(1) filtering thins the tails: excess(output) = excess(innovation) (1 - rho^2)^2 / (1 - rho^4).
    innov_excess = excess * (1 - rho**4) / (1 - rho**2) ** 2
    # Student t has excess kurtosis 6 / (df - 4); below 0.3 the tails do not matter for medians: normal.
    t_df = None if innov_excess < 0.3 else max(4.5, 4 + 6 / innov_excess)
    lrv_measured = 1 + 2 * sum(acf)
    return {
        "label": "(i) shared 2-core CPU (fitted)",
        "device": "cpu",
        "source": f"fitted on {len(runs)} runs of configs/tiny/dpo.yaml on this machine; no CUDA memory on a CPU",
        "tau": round(tau, 5),
        "content_sd": round(math.sqrt(content), 5),
        "indep_sd": round(math.sqrt(indep), 5),
        "rho": round(rho, 4),
        "t_df": None if t_df is None else round(t_df, 1),
        "mem_jitter": None,  # CPU runs record no CUDA memory: the memory check skips them
        "fit": {
            "runs_dir": str(runs_dir),
            "command": "canary run configs/tiny/dpo.yaml --set max_steps=150",
            "runs": len(runs),
            "steps": sum(len(r.times) for r in runs),
            "steps_per_run": [len(r.times) for r in runs],
            "run_medians_s": [round(math.exp(m), 5) for m in medians],
            "median_spread": round(float(np.std(medians, ddof=1)), 5),
            "median_spread_mad": round(mad, 5),
            "median_within_var": round(within, 7),
            "step_sd": round(math.sqrt(total), 5),
            "content_share": round(content / total, 4),
            "content_acf1": round(content_acf1, 4),
            "acf_indep": [round(a, 4) for a in acf],
            "lrv_measured": round(lrv_measured, 3),
            "lrv_ar1": round((1 + rho) / (1 - rho), 3),
            "excess_kurtosis": round(excess, 3),
            "innovation_excess_kurtosis": round(innov_excess, 3),
            "t_df": None if t_df is None else round(t_df, 1),
        },
    }


def _pooled(z: Sequence[dict[int, float]], lag: int, *, same_run: bool) -> float:
    """Pooled E[z_r(j) z_s(j + lag)] over steps both have: r = s (autocovariance) or r != s (shared content)."""
    total, count = 0.0, 0
    for a, za in enumerate(z):
        for b, zb in enumerate(z):
            if (a == b) != same_run:
                continue
            for step, value in za.items():
                other = zb.get(step + lag)
                if other is not None:
                    total += value * other
                    count += 1
    return total / count if count else 0.0


def _indep_excess_kurtosis(z: Sequence[dict[int, float]]) -> float:
    """Excess kurtosis of the runs' own noise: each step minus the other runs' mean at that step (which removes
    the shared content), corrected for the near-normal average it subtracts."""
    residuals, weights = [], []
    for a, za in enumerate(z):
        for step, value in za.items():
            others = [zb[step] for b, zb in enumerate(z) if b != a and step in zb]
            if len(others) >= 2:
                residuals.append(value - statistics.fmean(others))
                weights.append(len(others))
    w = np.asarray(residuals)
    raw = float(np.mean(w**4) / np.mean(w**2) ** 2) - 3
    m = float(np.mean(weights))
    # w = e - mean of m others: its variance is (1 + 1/m) var(e), and only e carries the excess.
    return raw * (1 + 1 / m) ** 2
