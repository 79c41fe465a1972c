"""What tells a slow process from slow code, step by step: the kernel's own counters for this process.

Slower code spends more CPU time on the same work. A slow *process* running the same code shows it elsewhere: CPU
time in the kernel (system time: page faults on fresh memory, huge-page compaction), page faults themselves,
involuntary context switches and time waiting on the run queue (a neighbour took the CPU), the CPU it ran on
changing. Each step's row gets the differences of these counters over the step (docs/lockstep.md, "A slow
process"). All of them are cheap: one getrusage call and two small /proc reads.
"""

from __future__ import annotations

import resource
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Final

from canary_action.metrics import schema as m

_THREAD: Final = Path("/proc/thread-self")


@dataclass(frozen=True)
class Counters:
    user_s: float
    system_s: float
    minor_faults: int
    major_faults: int
    voluntary_switches: int
    involuntary_switches: int
    runqueue_wait_s: float | None
    """The calling thread's time waiting for a CPU while runnable (schedstat); None where the kernel has none."""
    cpu: int | None
    """The CPU the calling thread last ran on; None off Linux."""


#: Counter -> its column: the difference over the step (the CPU: the one it ran on at the step's end).
COLUMNS: Final = {
    "user_s": m.USER_CPU_S,
    "system_s": m.SYSTEM_CPU_S,
    "minor_faults": m.MINOR_FAULTS,
    "major_faults": m.MAJOR_FAULTS,
    "voluntary_switches": m.VOLUNTARY_SWITCHES,
    "involuntary_switches": m.INVOLUNTARY_SWITCHES,
    "runqueue_wait_s": m.RUNQUEUE_WAIT_S,
}


def read() -> Counters:
    """This process's counters now (the run-queue wait and CPU: the calling thread's, the one that trains)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return Counters(
        user_s=usage.ru_utime,
        system_s=usage.ru_stime,
        minor_faults=usage.ru_minflt,
        major_faults=usage.ru_majflt,
        voluntary_switches=usage.ru_nvcsw,
        involuntary_switches=usage.ru_nivcsw,
        runqueue_wait_s=_runqueue_wait_s(),
        cpu=_cpu(),
    )


def step_columns(before: Counters, after: Counters) -> dict[str, float | None]:
    """The step's row entries: each counter's change from `before` to `after`, and the CPU `after` ran on."""
    row: dict[str, float | None] = {}
    for f in fields(Counters):
        if f.name == "cpu":
            continue
        start, end = getattr(before, f.name), getattr(after, f.name)
        row[COLUMNS[f.name]] = None if start is None or end is None else float(end - start)
    row[m.CPU_NUMBER] = None if after.cpu is None else float(after.cpu)
    return row


def _runqueue_wait_s() -> float | None:
    try:  # "<ns on a CPU> <ns waiting on a run queue> <timeslices>"
        return int((_THREAD / "schedstat").read_text(encoding="ascii").split()[1]) / 1e9
    except (OSError, ValueError, IndexError):
        return None


def _cpu() -> int | None:
    try:  # field 39 of stat, counted after the command name's closing parenthesis (a name may hold spaces)
        after_name = (_THREAD / "stat").read_text(encoding="ascii").rsplit(")", 1)[1].split()
        return int(after_name[36])
    except (OSError, ValueError, IndexError):
        return None
