"""scripts/install.sh, the README's set-up: the CPU build of torch first (a wheel at hand, else PyTorch's CPU
index), never PyPI's multi-GB CUDA build; then the project under the constraints. pip is a stub here."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PIP_STUB = """#!/usr/bin/env bash
echo "$*" >> "$(dirname "$0")/calls.log"
if [[ " $* " == *" --no-index "* ]]; then exit "${NO_INDEX_EXIT}"; fi
"""


def install(tmp_path: Path, wheel_at_hand: bool) -> list[str]:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    pip = venv / "bin" / "pip"
    pip.write_text(PIP_STUB, encoding="utf-8")
    pip.chmod(0o755)
    env = {**os.environ, "VENV": str(venv), "CANARY_TORCH_INDEX": "https://example.invalid/whl/cpu",
           "NO_INDEX_EXIT": "0" if wheel_at_hand else "1"}  # fmt: skip
    command = ["bash", str(ROOT / "scripts" / "install.sh"), "train"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return (venv / "bin" / "calls.log").read_text(encoding="utf-8").splitlines()


@pytest.mark.parametrize("wheel_at_hand", [True, False])
def test_torch_comes_first_as_the_cpu_build_then_the_project_under_the_constraints(
    tmp_path: Path, wheel_at_hand: bool
) -> None:
    pin = next(line for line in (ROOT / "requirements" / "ci-constraints.txt").read_text().splitlines()
               if line.startswith("torch=="))  # fmt: skip
    calls = install(tmp_path, wheel_at_hand)
    assert calls[0] == f"install -q --no-index --no-deps {pin}"
    if not wheel_at_hand:
        assert calls[1] == f"install -q --no-deps --index-url https://example.invalid/whl/cpu {pin}"
    assert calls[-1] == "install -q -c requirements/ci-constraints.txt -e .[train]"
    assert len(calls) == (2 if wheel_at_hand else 3)
