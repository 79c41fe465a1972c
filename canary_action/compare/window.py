"""The steady window a comparison judges: one warm-up cut for the current run and its baselines.

Each run's summary detects its own warm-up (MSER-5), and identical runs get different cuts by chance: 1 step in
one, 11 in the next. Judged on their own windows, two runs would compare different steps (and different
batches: tokens per step would then differ, and tokens/s be judged as if the workload had changed). So the
comparison takes the longest of the runs' cuts for all of them, then caps it so that `min_step_count` steady
steps remain in every run (the profiler window counted): automatic detection may trim warm-up, never make a
run unjudgeable. The cap never goes below step 1 (compile, allocator) nor below a cut a user fixed
(metrics_warmup_steps: N, kept as it is); a run too short to keep `min_step_count` steady steps even then is
said to be so, in the same count the perf checks use.
"""

from __future__ import annotations

from collections.abc import Sequence

from canary_action.compare.result import Warmup
from canary_action.compare.runs import RunData, recut, timed_rows


def common_warmup(runs: Sequence[RunData], min_steps: int) -> Warmup | None:
    """The cut for these runs (the current one first); None when none of them kept per-step times."""
    timed = [r for r in runs if r.metrics is not None and r.warmup_method is not None]
    if not timed:
        return None
    longest = max(r.warmup_steps for r in timed)
    if all(r.warmup_method == "fixed" for r in timed):
        return Warmup(
            steps=longest, method="fixed", note=f"{_steps(longest)} of every run left out (metrics_warmup_steps)"
        )
    # A cut a user fixed stands; the cap only trims what detection added.
    fixed = max((r.warmup_steps for r in timed if r.warmup_method == "fixed"), default=0)
    room = max(1, fixed, min(_room(r, min_steps) for r in timed))  # step 1 (compile, allocator) always goes
    cut = min(longest, room)
    cuts = sorted({r.warmup_steps for r in timed})
    detected = f"{cuts[0]}" if len(cuts) == 1 else f"{cuts[0]}-{cuts[-1]}"
    of_runs = "the run" if len(timed) == 1 else f"the {len(timed)} runs"
    note = f"{_steps(cut)} of every run left out: the longest warm-up detected in {of_runs} ({detected})"
    if longest > cut:
        note += _capped(timed, cut, longest, min_steps, fixed)
    return Warmup(steps=cut, method="auto", note=note)


def _capped(timed: Sequence[RunData], cut: int, longest: int, min_steps: int, fixed: int) -> str:
    """Why the cut stops short of the longest detected warm-up, with steady steps counted as the checks count
    them (timed, outside the profiler window)."""
    kept = min(sum(1 for i in timed_rows(r) if i >= cut) for r in timed)
    shortest = "the run" if len(timed) == 1 else "the shortest run"
    span = (
        f"step {longest}, detected as warm-up, is"
        if longest == cut + 1
        else f"steps {cut + 1}-{longest}, detected as warm-up, are"
    )
    if kept >= min_steps:
        return f", capped so that min_step_count ({min_steps}) steady steps remain in every run ({span} judged)"
    # Too short even at the least cut: the cap keeps what it can, and says it fell short.
    floor = f"the fixed metrics_warmup_steps ({fixed})" if fixed == cut and fixed > 1 else "the 1-step minimum"
    return (
        f", cut back to {floor}; even so {shortest} keeps only {kept} steady steps, fewer than "
        f"min_step_count ({min_steps}) ({span} kept)"
    )


def _room(run: RunData, min_steps: int) -> int:
    """The longest cut that leaves `min_steps` timed steps outside the profiler window in this run."""
    rows = timed_rows(run)
    return rows[-min_steps] if len(rows) >= min_steps else 0


def apply(runs: Sequence[RunData], warmup: Warmup | None) -> list[RunData]:
    return [recut(r, warmup.steps) for r in runs] if warmup is not None else list(runs)


def _steps(cut: int) -> str:
    return "no step" if cut == 0 else "step 1" if cut == 1 else f"steps 1-{cut}"
