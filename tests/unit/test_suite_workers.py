"""The README's test command runs the suite two at a time (`pytest -n 2`): tests/conftest.py gives each xdist
worker CPUs of its own, so that two workers' lockstep pairs (each pinned to the first CPU it may use) never share
one CPU while the other idles."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import SUITE_CPUS, worker_cpus

ROOT = Path(__file__).resolve().parents[2]


def test_each_worker_gets_a_slice_of_its_own_and_none_is_shared() -> None:
    assert [worker_cpus(i, 2, {0, 1}) for i in range(2)] == [[0], [1]]
    assert [worker_cpus(i, 2, {0, 1, 2, 3, 4}) for i in range(2)] == [[0, 1], [2, 3]]
    assert [worker_cpus(i, 3, {2, 5}) for i in range(3)] == [[], [], []]  # fewer CPUs than workers: shared


@pytest.mark.skipif(len(SUITE_CPUS) < 2, reason="one CPU")
def test_two_workers_and_the_processes_they_start_run_on_different_cpus(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text("from tests.conftest import pytest_configure  # noqa: F401\n")
    (tmp_path / "test_probe.py").write_text(
        "import json, os, subprocess, sys, pytest\n"
        "@pytest.mark.parametrize('n', range(8))\n"
        "def test_probe(n):\n"
        "    child = subprocess.run([sys.executable, '-c', 'import os; print(sorted(os.sched_getaffinity(0)))'],\n"
        "                           capture_output=True, text=True, check=True).stdout\n"
        "    record = {'worker': os.environ['PYTEST_XDIST_WORKER'], 'cpus': json.loads(child)}\n"
        f"    with open({str(tmp_path / 'seen.jsonl')!r}, 'a') as seen:\n"
        "        seen.write(json.dumps(record) + '\\n')\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "2", "-p", "no:cacheprovider", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        preexec_fn=lambda: os.sched_setaffinity(0, SUITE_CPUS),  # this test's own worker is pinned: not the inner run
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    seen: dict[str, set[int]] = {}
    for line in (tmp_path / "seen.jsonl").read_text().splitlines():
        record = json.loads(line)
        seen.setdefault(record["worker"], set()).update(record["cpus"])
    assert set(seen) == {"gw0", "gw1"}, seen
    assert seen["gw0"], seen
    assert seen["gw1"], seen
    assert not seen["gw0"] & seen["gw1"], seen
