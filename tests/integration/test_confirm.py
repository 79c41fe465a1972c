"""Confirm before failing (issue 33): a pair that fails a speed check is run again as fresh processes, and fails
only when the second pair agrees. A process that ran slow once is named and warned of; slower code is a regression.

Both plants are relative to the step's own time (a share of it, measured on the wall clock), so that they change
the step time by the same share on any CPU and under any load; the share is +100 %, as in test_lockstep's plants:
beside two CPU-bound loops a pair's noise raised its limit past a +25 % plant. A real +10 % measured by two pairs
is a regression in tests/unit/test_confirm_files.py (recorded pairs)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.integration.test_lockstep import REPO, canary_pair, pair_dir, tree

pytestmark = pytest.mark.training

CUSTOM = (REPO / "configs" / "tiny" / "custom.yaml").read_text(encoding="utf-8")
SLOWER = """
import time
from pathlib import Path

from transformers import TrainerCallback

from canary_action.train.builtin.example_factory import build_trainer as plain

MARKER = Path({marker!r})
SHARE = {share}


class Slower(TrainerCallback):
    \"\"\"Every step takes SHARE more wall time, spent as `work` says.\"\"\"

    def __init__(self, work):
        self.work = work

    def on_step_begin(self, args, state, control, **kwargs):
        self.began = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        until = time.perf_counter() + SHARE * (time.perf_counter() - self.began)
        while time.perf_counter() < until:
            self.work()


def spin():
    pass


def fresh_memory():
    \"\"\"Touch 8 MiB of memory the process never had: every page a fault, zeroed by the kernel.\"\"\"
    import mmap

    with mmap.mmap(-1, 8 << 20) as block:
        for offset in range(0, 8 << 20, mmap.PAGESIZE):
            block[offset] = 1


def build_trainer(context):
    trainer = plain(context)
    if {every_time}:  # slower code: in every process that runs it
        trainer.add_callback(Slower(spin))
    elif not MARKER.exists():  # a slow process: the first head side only
        MARKER.write_text("slow")
        trainer.add_callback(Slower(fresh_memory))
    return trainer
"""


def head_tree(tmp_path: Path, *, share: float, every_time: bool) -> Path:
    plant = SLOWER.format(marker=str(tmp_path / "slow-once"), share=share, every_time=every_time)
    config = CUSTOM.replace("canary_action.train.builtin.example_factory", "slower")
    return tree(tmp_path, "head", config, **{"slower.py": plant})


def one_user() -> dict[str, str]:
    """Both sides as this user: the planted marker is written by the head side where the test can read it."""
    return {**os.environ, "CANARY_PAIR_HEAD_UID": "off"}


def test_a_process_slow_once_is_named_and_warned_of_not_failed(tmp_path: Path) -> None:
    base = tree(tmp_path, "base", CUSTOM)
    head = head_tree(tmp_path, share=1.0, every_time=False)
    done = canary_pair(base, head, tmp_path / "out", env=one_user())
    result = json.loads(done.stdout)
    assert done.returncode == 0, (result["reason"], done.stderr[-3000:])
    assert result["verdict"] != "regression"
    step = next(c for c in result["checks"] if c["name"] == "step_time")
    assert step["status"] == "warn", step["message"]
    assert step["message"].startswith("not confirmed: the first pair measured +"), step["message"]
    assert "a second pair of fresh processes (confirmation/" in step["message"]
    assert "confirming with a second pair" in done.stderr
    # The first pair's head side faulted in fresh memory every step: the note names it, with both sides' figures.
    [slow] = [n for n in result["notes"] if n.startswith("slow process: ")]
    assert "the head side's steps took +" in slow
    assert "system CPU" in slow
    assert "minor page faults" in slow
    written = pair_dir(tmp_path / "out")
    record = json.loads((written / "pair.json").read_text(encoding="utf-8"))
    assert record["process"]["head"]["minor_faults"] > record["process"]["base"]["minor_faults"] + 1000
    [second] = (written / "confirmation").iterdir()
    assert record["confirmation"] == second.name
    assert {p.name for p in second.iterdir()} >= {"base", "head", "pair.json"}
    # The verdict is the files': `canary compare` of the pair judges both pairs again.
    again = json.loads((written / "result.json").read_text(encoding="utf-8"))
    assert next(c for c in again["checks"] if c["name"] == "step_time")["status"] == "warn"


def test_slower_code_is_still_a_regression_after_confirmation(tmp_path: Path) -> None:
    base = tree(tmp_path, "base", CUSTOM)
    head = head_tree(tmp_path, share=1.0, every_time=True)
    done = canary_pair(base, head, tmp_path / "out", env=one_user())
    result = json.loads(done.stdout)
    assert done.returncode == 1, (result["reason"], done.stderr[-3000:])
    assert result["verdict"] == "regression"
    step = next(c for c in result["checks"] if c["name"] == "step_time")
    assert step["status"] == "fail"
    assert "; confirmed by a second pair: +" in step["message"], step["message"]
    record = json.loads((pair_dir(tmp_path / "out") / "pair.json").read_text(encoding="utf-8"))
    assert record["confirmation"]


def test_a_cap_of_zero_keeps_the_failure_and_says_it_was_not_confirmed(tmp_path: Path) -> None:
    base = tree(tmp_path, "base", CUSTOM)
    head = head_tree(tmp_path, share=1.0, every_time=True)
    done = canary_pair(base, head, tmp_path / "out", "--confirm-minutes", "0", env=one_user())
    result = json.loads(done.stdout)
    assert result["verdict"] == "regression", (result["reason"], done.stderr[-3000:])
    step = next(c for c in result["checks"] if c["name"] == "step_time")
    assert step["message"].endswith("; not confirmed by a second pair (confirmation turned off)"), step["message"]
    assert not (pair_dir(tmp_path / "out") / "confirmation").exists()
