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
    assert "Loss per step, both sides (red: this PR, dark blue: base)" in report


OWN_MODEL_FACTORY = """
from transformers import AutoModelForCausalLM, LlamaConfig

from canary_action.train.builtin.example_factory import build_trainer as plain


class Own:
    def __init__(self, context):
        self.context = context

    def __getattr__(self, name):
        return getattr(self.context, name)

    @property
    def model(self):  # the team's own loading code: a model the canary did not load
        config = LlamaConfig(vocab_size=4096, hidden_size=64, intermediate_size=128, num_hidden_layers=1,
                             num_attention_heads=4, max_position_embeddings=256, pad_token_id=1, eos_token_id=0)
        return AutoModelForCausalLM.from_config(config)


def build_trainer(context):
    return plain(Own(context))
"""


def test_a_factory_s_own_model_is_scored_in_its_training_process_and_says_so(tmp_path: Path) -> None:
    (tmp_path / "team_models.py").write_text(OWN_MODEL_FACTORY, encoding="utf-8")
    config = (Path(__file__).parents[2] / "configs" / "tiny" / "custom.yaml").read_text(encoding="utf-8")
    (tmp_path / "canary.yaml").write_text(
        config.replace("canary_action.train.builtin.example_factory", "team_models"), encoding="utf-8"
    )
    done = subprocess.run(
        [sys.executable, "-m", "canary_action", "run", "canary.yaml", "-o", "runs", "--set", "max_steps=8"],
        cwd=tmp_path, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    (metrics_path,) = (tmp_path / "runs").glob("*/metrics.json")
    heldout = json.loads(metrics_path.read_text(encoding="utf-8"))["heldout"]
    assert (heldout["status"], heldout["evaluated_in"], heldout["metric"]) == (
        "evaluated",
        "side_process",
        "next_token",
    )
    assert [p["step"] for p in heldout["points"]] == [0, 8]
    assert "the team's and the pull request's code were loaded there" in heldout["message"]
    assert heldout["points"][-1]["value"] < heldout["points"][0]["value"]  # it learned
    assert "held-out" in done.stdout
