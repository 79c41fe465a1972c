"""History lines for the history tests (unit, browser) and benchmarks/history_build.py: a synthetic but complete
history (every chart, pull requests with effects, a regression with its bisect, a change of torch), and a hostile
entry."""

from __future__ import annotations

import random
from pathlib import Path

from canary_action.compare.command import run_compare
from canary_action.history.record import (
    Bisect,
    Effect,
    Entry,
    Environment,
    Figures,
    PullRequest,
)
from canary_action.history.store import write_history
from canary_action.metrics.io import write_metrics
from tests.factories import make_metrics

REPOSITORY = "acme/trainer"
#: In every free-text field of the hostile entry: markup, a script, an event handler, a javascript: link.
HOSTILE = '<script>alert("x")</script><img src=x onerror="alert(1)"><a href="javascript:alert(2)">x</a>'


def sha(*parts: int) -> str:
    return "".join(f"{p:08x}" for p in parts).rjust(40, "0")[-40:]


def make_entries(runs: int, configs: int = 1, *, seed: int = 0, regression_every: int = 97) -> list[Entry]:
    """`runs` entries per config, one a day from 2026-01-01 (hourly once days run out); every 7th run merged a pull
    request with a step-time effect; every `regression_every`-th run regressed (5 % slower, bisected); torch
    changes halfway."""
    rng = random.Random(seed)
    entries = []
    for c in range(configs):
        step = 1.0 + 0.25 * c
        for i in range(runs):
            regressed = i % regression_every == regression_every // 2
            step *= 1.05 if regressed else 1.0
            effect = round(rng.gauss(0, 2), 2)
            merged = (
                PullRequest(number=i + 1, head_commit=sha(c, i, 1), effects=[
                    Effect(check="step_time", status="fail" if effect > 4 else "pass", delta_pct=effect,
                           low=round(effect - 1.5, 2), high=round(effect + 1.5, 2)),
                    Effect(check="max_memory", status="pass", delta_pct=0.0),
                ])
                if i % 7 == 3 else None
            )  # fmt: skip
            day, hour = divmod(i, 24) if runs > 300 else (i, 3)
            entries.append(Entry(
                repository=REPOSITORY, config=f"canary-{c}", commit=sha(c, i), event="push", run_id=10_000 + i,
                date=f"{_day(day)}T{hour:02d}:00:00Z",
                verdict="regression" if regressed else "pass", failed=["step_time"] if regressed else [],
                figures=Figures(step_time_s=round(step * rng.uniform(0.98, 1.02), 4), step_time_noise_s=0.01,
                                tokens_per_s=round(4000 / step, 1), memory_mib=2048.0 + i % 3,
                                gpu_time_s=round(0.4 * step, 4), heldout=round(2.5 - i / (runs + 1), 4),
                                tail_loss=round(2.0 - i / (runs + 1), 4)),
                memory_device="gpu", heldout_label="held-out loss",
                env=Environment(gpu="NVIDIA H200", gpu_driver="580.159.04", cuda="13.0",
                                torch="2.13.0" if i < runs // 2 else "2.14.0", trl="1.16.0"),
                pull_request=merged,
                bisect=Bisect(bad_commit=sha(c, i, 9), summary="made the step 5 % slower") if regressed else None,
            ))  # fmt: skip
    return entries


def _day(index: int) -> str:
    from datetime import date, timedelta

    return (date(2026, 1, 1) + timedelta(days=index)).isoformat()


def hostile_entry(**changes: object) -> Entry:
    """An entry whose every free-text field holds HOSTILE (the fields with a pattern cannot hold it)."""
    entry = Entry(
        repository=REPOSITORY, config="canary-0", commit=sha(7, 7, 7), date="2027-06-01T00:00:00Z", event="push",
        run_id=99_999, verdict="regression", failed=["step_time"], figures=Figures(step_time_s=2.0),
        env=Environment(gpu=HOSTILE, gpu_driver=HOSTILE, cuda=HOSTILE, torch=HOSTILE, trl=HOSTILE, runner=HOSTILE),
        bisect=Bisect(bad_commit=sha(7, 7, 8), summary=HOSTILE),
    )  # fmt: skip
    return entry.model_copy(update=changes)


def write_entries(path: Path, entries: list[Entry]) -> Path:
    write_history(path, entries)
    return path


def compared_run(tmp_path: Path) -> Path:
    """An output folder as the action's run mode leaves it: the current run's folder and result.json."""
    out = tmp_path / "canary-output"
    current = make_metrics(seed=9, series=None)
    write_metrics(current, out / current.run.run_id / "metrics.json")
    baselines = []
    for seed in range(3):
        baseline = make_metrics(seed=seed)
        write_metrics(baseline, tmp_path / "baselines" / f"{seed}" / "metrics.json")
        baselines.append(tmp_path / "baselines" / f"{seed}" / "metrics.json")
    result = run_compare(out / current.run.run_id / "metrics.json", baselines)
    (out / "result.json").write_text(result.model_dump_json(indent=2), encoding="utf-8")
    return out
