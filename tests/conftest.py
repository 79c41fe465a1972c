"""Shared pytest setup.

Its presence (with tests/__init__.py) makes pytest put the repository root on sys.path, so that any test
can `from tests.factories import make_metrics` however pytest is started.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

# Property tests run on shared, loaded machines: hypothesis's default 200 ms deadline per example failed them
# there (DeadlineExceeded, then "Flaky") for no fault of the code. The examples are drawn from a fixed seed, so
# that a failure in CI is the same failure on a laptop; `--hypothesis-profile=default` explores anew by hand.
settings.register_profile("canary", deadline=None, derandomize=True, database=None, print_blob=True)
settings.load_profile("canary")

#: The CPUs the suite may use, read before a worker pins itself to its share (`pytest_configure`).
SUITE_CPUS = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []


def pytest_configure(config: pytest.Config) -> None:
    """Under pytest-xdist (the README's `pytest -n 2`), each worker and every process it starts runs on CPUs of its
    own. Most of the suite is real training on one CPU (a config's cpu_threads: 1; a lockstep pair pins both sides
    to the first CPU it may use): unpinned, two workers' pairs would share CPU 0 and leave the other idle."""
    worker = getattr(config, "workerinput", None)
    if worker is None:
        return
    cpus = worker_cpus(int(worker["workerid"].removeprefix("gw")), int(worker["workercount"]))
    if cpus:  # none where the platform has no CPU affinity (SUITE_CPUS empty)
        for thread in Path("/proc/self/task").iterdir():  # every thread (execnet's too): new ones inherit theirs
            os.sched_setaffinity(int(thread.name), cpus)


def worker_cpus(index: int, count: int, allowed: set[int] | None = None) -> list[int]:
    """Worker `index` of `count`'s share of the CPUs this process may use (`allowed`): a slice of its own, the
    remainder to none; empty (leave them shared) when there are fewer CPUs than workers."""
    ordered = SUITE_CPUS if allowed is None else sorted(allowed)
    share = len(ordered) // count
    return ordered[index * share : (index + 1) * share]
