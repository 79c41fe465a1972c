"""The evaluator's scheduling: idle while training runs beside it, normal once training has ended.

SCHED_IDLE runs a thread only on a CPU nothing else wants, so the evaluator's preparation (imports, loading)
takes nothing from a training beside it. Leaving SCHED_IDLE again needs privilege (root, CAP_SYS_NICE, or an
RLIMIT_NICE that allows nice 0): an evaluator that could not leave it would, on a runner whose CPUs a neighbour
keeps busy, never finish preparing. So it goes idle only where it can come back, and whoever tells it to go
(client.py) brings it back at once, whether or not it has finished preparing.
"""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path


def threads(pid: int | None = None) -> list[int]:
    """The threads of process `pid` (None: this one); none when it has ended. Policy and affinity are per thread
    on Linux."""
    try:
        return [int(task.name) for task in Path(f"/proc/{pid if pid is not None else 'self'}/task").iterdir()]
    except OSError:
        return []


def set_policy(pid: int | None, *, idle: bool) -> None:
    """Every thread of process `pid` (None: this one) to SCHED_IDLE, or back to the normal policy; a thread that
    refuses (no privilege) or has ended is left as it is."""
    policy = os.SCHED_IDLE if idle else os.SCHED_OTHER
    for task in threads(pid):
        with contextlib.suppress(OSError):
            os.sched_setscheduler(task, policy, os.sched_param(0))


def can_leave_idle() -> bool:
    """Whether this process may go back from SCHED_IDLE to the normal policy: tried on a thread of its own."""
    allowed: list[bool] = []

    def probe() -> None:
        me = threading.get_native_id()
        try:
            os.sched_setscheduler(me, os.SCHED_IDLE, os.sched_param(0))
            os.sched_setscheduler(me, os.SCHED_OTHER, os.sched_param(0))
        except OSError:
            return
        allowed.append(True)

    thread = threading.Thread(target=probe, name="rlhf-canary-priority-probe")
    thread.start()
    thread.join()
    return bool(allowed)
