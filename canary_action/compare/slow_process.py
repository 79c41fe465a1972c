"""A slow process, told from slow code: the sides' CPU time, page faults, context switches and run-queue wait per
step (train/process_counters.py), side by side.

Slower code spends more CPU time on the same steps. So does a process that runs the same code worse: one whose
memory faults in afresh every step (system time, minor faults), one that a neighbour keeps off its CPU (run-queue
wait, involuntary switches), one that reads from disk (major faults). When the two sides of a pair spend different
CPU time per step while their code is the same, the process is the cause; when the code differs, these figures
say which kind of work grew. docs/lockstep.md, "A slow process".
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Final

from canary_action.compare import paired
from canary_action.compare.runs import RunData
from canary_action.metrics import schema as m
from canary_action.metrics.pair import CodeDiff, ProcessSummary

#: A difference in CPU time per step between the sides (or a side against its own first rounds) worth naming.
CPU_SHARE: Final = 0.05
#: A side whose CPU time per step in its last third of rounds is this far from its first third's.
DRIFT_SHARE: Final = 0.2
#: Mechanism -> the per-step figure below which it is not named (any process faults a page or waits now and then).
MECHANISM_FLOORS: Final = {
    "system_cpu_s": 0.002, "minor_faults": 100.0, "major_faults": 10.0, "involuntary_switches": 5.0,
    "runqueue_wait_s": 0.002,
}  # fmt: skip
#: The share of the sides' difference a mechanism must account for to be named.
EXPLAINS: Final = 0.25
#: A mechanism -> the count behind it, named beside it when it differs too.
BEHIND: Final = {"system_cpu_s": "minor_faults", "runqueue_wait_s": "involuntary_switches"}
#: summary field -> (column, how it reads)
FIGURES: Final[dict[str, tuple[str, str]]] = {
    "step_time_s": (m.STEP_TIME_S, "wall"),
    "cpu_s": (m.CPU_S, "CPU"),
    "system_cpu_s": (m.SYSTEM_CPU_S, "system CPU"),
    "minor_faults": (m.MINOR_FAULTS, "minor page faults"),
    "major_faults": (m.MAJOR_FAULTS, "major page faults"),
    "involuntary_switches": (m.INVOLUNTARY_SWITCHES, "involuntary switches"),
    "runqueue_wait_s": (m.RUNQUEUE_WAIT_S, "run-queue wait"),
}


def process_summary(series: Mapping[str, Sequence[float | None]]) -> ProcessSummary | None:
    """A side's per-step medians over its steps after the first, from its metrics.json series; None when it
    measured none of the process counters (an older release, a side that never stepped twice)."""
    column = series.get(m.USER_CPU_S)
    if column is None or len(column) < 2:
        return None

    def median(name: str) -> float | None:
        values = [v for v in (series.get(name) or [])[1:] if v is not None and math.isfinite(v)]
        return statistics.median(values) if values else None

    # A head side writes its own metrics.json: a CPU number is taken only as one (a small whole number).
    numbers = (series.get(m.CPU_NUMBER) or [])[1:]
    cpus = sorted(
        {int(v) for v in numbers if v is not None and math.isfinite(v) and v.is_integer() and 0 <= v < 1 << 16}
    )
    return ProcessSummary(
        steps=len(column) - 1, step_time_s=median(m.STEP_TIME_S), cpu_s=median(m.CPU_S),
        user_cpu_s=median(m.USER_CPU_S), system_cpu_s=median(m.SYSTEM_CPU_S), minor_faults=median(m.MINOR_FAULTS),
        major_faults=median(m.MAJOR_FAULTS), voluntary_switches=median(m.VOLUNTARY_SWITCHES),
        involuntary_switches=median(m.INVOLUNTARY_SWITCHES), runqueue_wait_s=median(m.RUNQUEUE_WAIT_S), cpus=cpus,
    )  # fmt: skip


def process_note(current: RunData, partner: RunData, code: CodeDiff | None) -> str | None:
    """A note when, over the rounds both sides judged, their CPU time per step differs by more than CPU_SHARE
    while their code is the same (an A/A pair: the process differs, not the work), or their wall or CPU time per
    step differs by that much and one side's process shows a mechanism that accounts for it (system time and
    page faults, run-queue wait and involuntary switches: a neighbour on its CPU in its turns, major faults); or
    when a side's CPU time per step rose over its own first rounds'. With both sides' figures. None otherwise."""
    pairs = paired.common_rounds(current, partner)
    if len(pairs) < paired.MIN_ROUNDS:
        return None
    head_rows = [r for mine, _ in pairs for r in mine]
    base_rows = [r for _, theirs in pairs for r in theirs]
    head, base = per_step(current, head_rows), per_step(partner, base_rows)
    head_cpu, base_cpu = head["cpu_s"], base["cpu_s"]
    if head_cpu is None or not base_cpu:
        return None
    said = []
    cpu = head_cpu / base_cpu - 1
    head_wall, base_wall = head["step_time_s"], base["step_time_s"]
    wall = head_wall / base_wall - 1 if head_wall is not None and base_wall else 0.0
    same_code = code is not None and code.num_files == 0
    differs = mechanisms(head, base)
    if (abs(cpu) > CPU_SHARE and same_code) or differs:
        why = ", ".join(differs) if differs else "the code is the same, so the process differs, not the work"
        said.append(
            f"the head side's steps took {100 * wall:+.1f} % wall time and {100 * cpu:+.1f} % CPU time against the "
            f"base side's: {why} (head {describe(head)}; base {describe(base)})"
        )
    said += [d for run, rows, name in ((current, head_rows, "head"), (partner, base_rows, "base"))
             if (d := _drift(run, rows, name))]  # fmt: skip
    return ("slow process: " + "; ".join(said)) if said else None


def mechanisms(head: Mapping[str, float | None], base: Mapping[str, float | None]) -> list[str]:
    """What one side's process did per step that the other's did not, in words, where it accounts for at least
    EXPLAINS of a difference between the sides of more than CPU_SHARE, in the same direction: kernel time (with
    the page faults behind it) for their CPU time, run-queue wait (with the involuntary switches behind it) for
    their wall time; major page faults (reads from disk) at twice the other side's. Each figure above its floor."""
    found = []
    for name, gap_of in (("system_cpu_s", "cpu_s"), ("runqueue_wait_s", "step_time_s"), ("major_faults", None)):
        mine, theirs = head.get(name), base.get(name)
        if mine is None or theirs is None or max(mine, theirs) < MECHANISM_FLOORS[name]:
            continue
        if gap_of is None:
            if not _differs(name, mine, theirs):
                continue
        else:
            total_mine, total_theirs = head.get(gap_of), base.get(gap_of)
            if total_mine is None or total_theirs is None:
                continue
            gap = total_mine - total_theirs
            if not total_theirs or abs(gap) <= CPU_SHARE * total_theirs:  # no difference worth explaining
                continue
            if (mine - theirs) * math.copysign(1.0, gap) < EXPLAINS * abs(gap):
                continue
        found.append(_named(name, mine, theirs))
        behind = BEHIND.get(name)
        if behind and (a := head.get(behind)) is not None and (b := base.get(behind)) is not None:
            found += [_named(behind, a, b)] if _differs(behind, a, b) else []
    return found


def _differs(name: str, mine: float, theirs: float) -> bool:
    return max(mine, theirs) >= MECHANISM_FLOORS[name] and (mine > 2 * theirs or theirs > 2 * mine)


def _named(name: str, mine: float, theirs: float) -> str:
    return f"{FIGURES[name][1]} {_amount(name, mine)} per step against {_amount(name, theirs)}"


def per_step(run: RunData, rows: Sequence[int]) -> dict[str, float | None]:
    """Summary field -> its median per step over `rows` (None where the run did not record it)."""
    series = run.metrics.series if run.metrics is not None else {}
    figures: dict[str, float | None] = {}
    for name, (column, _) in FIGURES.items():
        values = series.get(column) or []
        found = [v for r in rows if r < len(values) and (v := values[r]) is not None and math.isfinite(v)]
        figures[name] = statistics.median(found) if found else None
    return figures


def _amount(name: str, value: float) -> str:
    return f"{value:.3f} s" if name.endswith("_s") else f"{value:,.0f}"


def describe(figures: Mapping[str, float | None]) -> str:
    """`0.324 s CPU, 0.012 s system CPU, 4,100 minor page faults, ...` per step, what was recorded."""
    parts = []
    for name, (_, label) in FIGURES.items():
        value = figures.get(name)
        if value is None:
            continue
        parts.append(f"{_amount(name, value)} {label}")
    return ", ".join(parts) + " per step"


def _drift(run: RunData, rows: Sequence[int], name: str) -> str | None:
    """A side whose CPU time per step in its last third of rounds is more than DRIFT_SHARE above its first third's
    (a process that slowed as it went: memory that fragments, a neighbour on its core). Faster is no news: caches
    warm and a first round's one-off work ends."""
    third = len(rows) // 3
    if third < paired.MIN_ROUNDS:
        return None
    first, last = per_step(run, rows[:third])["cpu_s"], per_step(run, rows[-third:])["cpu_s"]
    if not first or last is None or last / first - 1 <= DRIFT_SHARE:
        return None
    return f"the {name} side's CPU time per step rose from {first:.3f} s in its first rounds to {last:.3f} s"
