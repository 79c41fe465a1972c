"""The correctness gate on a real lockstep pair: a team's SFT trainer whose pull request loses the label shift.

Its training loss gets better (the model learns to copy the current token); the held-out loss, which the canary
computes itself on examples the training never saw, gets far worse. The team's repository is the one the
correctness benchmark pairs (benchmarks/correctness.py), shortened to stay quick.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import correctness

pytestmark = pytest.mark.training


def test_a_lost_label_shift_fails_on_held_out_data_though_its_own_loss_improves(tmp_path: Path) -> None:
    base = correctness.make_tree(tmp_path, "team-sft")
    head = correctness.make_tree(tmp_path, "team-sft", "no_shift")
    command = [sys.executable, "-m", "canary_action", "pair", "canary.yaml", "--base", str(base), "--head", str(head),
               "-o", str(tmp_path / "out"), "--set", "max_steps=24", "--json"]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 1, done.stderr[-3000:]
    result = json.loads(done.stdout)
    checks = {c["name"]: c for c in result["checks"]}
    assert result["verdict"] == "regression"
    assert checks["heldout_eval"]["status"] == "fail", checks["heldout_eval"]["message"]
    assert checks["heldout_eval"]["delta_pct"] > 30  # of what the base side learned: far beyond the 5 % limit
    # The pull request's own loss is lower: its claim about itself, which the gate does not take.
    assert checks["tail_loss"]["current"] < checks["tail_loss"]["baseline"]
    numerics = result["numerics"]
    assert (numerics["state"], numerics["first_step"]) == ("changed", 1)
    assert checks["numerics"]["message"].startswith("this pull request changes the training numerics from step 1")
    top = result["suspects"][0]
    assert top["category"] == "numerics"
    assert "team_pipeline/trainer.py" in top["summary"]
    assert any("logits = outputs.logits" in line for line in top["evidence"])
    assert result["heldout"]["basis"] == "paired"
    assert result["heldout"]["evaluated_in"] == "fresh_process"
    report = (next((tmp_path / "out").iterdir()) / "report.md").read_text(encoding="utf-8")
    assert "**changed from step 1**" in report
    assert "Loss per step, both sides of the pair" in report
