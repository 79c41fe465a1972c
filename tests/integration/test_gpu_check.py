"""scripts/gpu_check.py on its CPU path (--cpu): what CI can prove of the GPU check script — every check runs and
is a row of the table, the figures are written — before a GPU session spends its minutes on it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.training
REPO = Path(__file__).parents[2]


def test_the_gpu_check_runs_every_check_on_the_cpu_path(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "scripts/gpu_check.py", "--cpu", "-o", str(tmp_path)],
        cwd=REPO, capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    table = (tmp_path / "gpu-check.md").read_text(encoding="utf-8")
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert done.stdout.strip() == table.strip()
    rows = {line.split("|")[1].strip(): line for line in table.splitlines()[2:]}
    host = [name for name in rows if name.startswith("pair host +5 % (")]  # the sleep sized from the A/A step
    assert len(host) == 1
    assert set(rows) == {"env", "run dpo", "pair A/A", *host, "pair GPU-only +20 %", "overhead vs bare TRL"}
    assert "skipped" in rows["pair GPU-only +20 %"]
    assert "MB gz" in rows["run dpo"], "the profiled run's trace size"
    figures = json.loads((tmp_path / "gpu-check.json").read_text(encoding="utf-8"))
    assert figures["pair A/A"]["step_time"]["status"] in ("pass", "warn", "fail")  # judged, whatever the load
    assert figures["pair A/A"]["step_time"]["interval"]
    assert figures["run dpo"]["trace_json_mb"] > figures["run dpo"]["trace_mb"] > 0


def test_a_part_that_does_not_exist_is_refused_before_anything_runs(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "scripts/gpu_check.py", "--cpu", "--only", "runs,pear", "-o", str(tmp_path)],
        cwd=REPO, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert "pear is not one of runs, pairs, tests, overhead" in done.stderr
    assert not (tmp_path / "gpu-check.md").exists()
