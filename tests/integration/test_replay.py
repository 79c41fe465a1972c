"""`canary replay` on real captures of the builtin tiny models: the recorded loss comes back bitwise on the CPU in
fp32 (SFT, DPO, GRPO), a planted NaN is captured without any capture config and replayed, and fp32 against the
run's bf16 says which one makes it; a variant that fails is a row with its message (docs/replay.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from canary_action.train.launch import run_canary
from canary_action.train.replay import Variant, replay
from tests.integration.test_training import tiny

pytestmark = pytest.mark.training
REPO = Path(__file__).parents[2]


def captured_run(name: str, root: Path, *overrides: str) -> Path:
    outcome = run_canary(tiny(name, "max_steps=3", *overrides), root)
    return outcome.metrics_path.parent


@pytest.mark.parametrize("name", ["sft", "dpo", "grpo"])
def test_a_replayed_step_gives_the_recorded_loss_bitwise(name: str, tmp_path: Path) -> None:
    run_dir = captured_run(name, tmp_path, "capture.steps=[2]")
    meta = json.loads((run_dir / "captures" / "step-000002-rank0" / "capture.json").read_text(encoding="utf-8"))
    assert meta["reason"] == "planned"
    assert meta["weights"] == "step_start"
    result = replay(run_dir, [Variant.parse("")], repeats=1)
    (row,) = result.rows
    assert row.status == "ok", row.error
    assert row.bitwise_equal, row
    assert row.largest_difference == 0.0
    assert row.forward_ms is not None
    assert row.forward_ms > 0
    assert row.backward_ms is not None
    assert row.backward_ms > 0
    print(f"{name}: largest difference {row.largest_difference} (loss {row.loss})")


def test_a_planted_nan_is_captured_unasked_and_fp32_tells_its_precision_cause(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # bf16 on the CPU (autocast), a precision fault at step 2: NaN in bf16, exactly nothing in fp32. No capture block.
    run_dir = captured_run("sft", tmp_path, "dtype=bf16", "fault_injection.precision_loss_at_step=2")
    metrics = json.loads((run_dir / "metrics.json").read_text(encoding="utf-8"))
    assert metrics["status"]["reason"] == "non_finite"
    assert any(n.startswith("capture: step 2 (non_finite)") for n in metrics["notices"]), metrics["notices"]

    def planted_compile(*_: object, **__: object) -> None:
        raise RuntimeError("planted: torch.compile refused this model")

    monkeypatch.setattr(torch, "compile", planted_compile)
    variants = [
        Variant.parse(v) for v in ("", "dtype=fp32", "attn_implementation=flash_attention_2", "torch_compile=true")
    ]
    rows = {row.variant: row for row in replay(run_dir, variants, repeats=1).rows}
    assert rows["as run"].non_finite  # the same NaN, reproduced
    assert rows["as run"].bitwise_equal
    assert rows["dtype=fp32"].status == "ok"
    assert not rows["dtype=fp32"].non_finite  # gone in fp32: the precision made it
    assert rows["attn_implementation=flash_attention_2"].status == "fails"
    assert "flash" in (rows["attn_implementation=flash_attention_2"].error or "").lower()
    assert rows["torch_compile=true"].status == "fails"
    assert "planted: torch.compile refused this model" in (rows["torch_compile=true"].error or "")

    # The command, as a user runs it: the table, replay.json and replay.md, exit 0.
    out = tmp_path / "replayed"
    done = subprocess.run(
        [sys.executable, "-m", "canary_action", "replay", str(run_dir), "--step", "2", "--variant", "dtype=fp32",
         "--repeats", "1", "-o", str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    for said in ("as run", "dtype=fp32", "NaN/Inf", "recorded NaN/Inf"):
        assert said in done.stdout
    written = json.loads((out / "replay.json").read_text(encoding="utf-8"))
    assert [r["variant"] for r in written["rows"]] == ["as run", "dtype=fp32"]
    assert "| as run | 2 |" in (out / "replay.md").read_text(encoding="utf-8")
    assert not (run_dir / "replay").exists()  # nothing written into the run folder (an artifact's, maybe)

    # Run from inside the run folder, the captured config's code would be imported from an artifact: refused.
    inside = subprocess.run([sys.executable, "-m", "canary_action", "replay", "."], cwd=run_dir,
                            capture_output=True, text=True, timeout=600, check=False)  # fmt: skip
    assert inside.returncode == 2, inside.stderr[-2000:]
    assert "run it from your checkout" in inside.stderr


SLOW_LOSS = """
import time

from canary_action.train.builtin.example_factory import build_trainer as plain


def build_trainer(context):
    trainer = plain(context)
    compute_loss = trainer.compute_loss

    def slower(model, inputs, *args, **kwargs):
        time.sleep(0.5)  # the pull request's model code: half a second more a forward, the same loss
        return compute_loss(model, inputs, *args, **kwargs)

    trainer.compute_loss = slower
    return trainer
"""


def test_a_replay_across_two_trees_shows_whose_forward_moved(tmp_path: Path) -> None:
    config = (REPO / "configs" / "tiny" / "custom.yaml").read_text(encoding="utf-8")
    config = config.replace("canary_action.train.builtin.example_factory", "team_model")
    trees = {}
    for side, module in (("base", "from canary_action.train.builtin.example_factory import build_trainer\n"),
                         ("head", SLOW_LOSS)):  # fmt: skip
        tree = trees[side] = tmp_path / side
        tree.mkdir()
        (tree / "canary.yaml").write_text(config, encoding="utf-8")
        (tree / "team_model.py").write_text(module, encoding="utf-8")
    canary = [sys.executable, "-m", "canary_action"]
    trained = subprocess.run(
        [*canary, "run", "canary.yaml", "-o", str(tmp_path / "runs"), "--set", "max_steps=3", "--set",
         "capture.steps=[2]", "--set", "heldout.enabled=false"],
        cwd=trees["base"], capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert trained.returncode == 0, trained.stderr[-2000:]
    (run_dir,) = (tmp_path / "runs").iterdir()
    done = subprocess.run(
        [*canary, "replay", str(run_dir), "--tree", str(trees["base"]), "--tree", str(trees["head"]), "--json",
         "--repeats", "1"],
        cwd=trees["base"], capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    rows = {row["variant"]: row for row in json.loads(done.stdout)["rows"]}
    base, head = rows[f"tree {trees['base']}"], rows[f"tree {trees['head']}"]
    assert rows["as run"]["bitwise_equal"], rows["as run"]
    assert base["bitwise_equal"], base
    assert head["bitwise_equal"], head  # the same loss: only its time moved
    assert head["forward_ms"] >= 500
    assert head["forward_ms"] > base["forward_ms"]


def test_a_hostile_capture_is_refused_whole_with_exit_2(tmp_path: Path) -> None:
    """A pickle named .safetensors in an artifact's capture: refused before any model is built, naming the file."""
    step = tmp_path / "captures" / "step-000002-rank0"
    step.mkdir(parents=True)
    config = (REPO / "configs" / "tiny" / "sft.yaml").read_text(encoding="utf-8")
    import yaml

    (tmp_path / "captures" / "config.json").write_text(json.dumps(yaml.safe_load(config)), encoding="utf-8")
    torch.save({"inputs/input_ids": torch.ones(2, 3)}, step / "batch-0.safetensors")
    meta = {"schema": 1, "step": 2, "rank": 0, "reason": "planned", "weights": "omitted", "torch_threads": 1,
            "batches": [{"file": "batch-0.safetensors", "values": {}, "unsupported": []}], "seen": {}}  # fmt: skip
    (step / "capture.json").write_text(json.dumps(meta), encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "canary_action", "replay", str(tmp_path)],
                          cwd=REPO, capture_output=True, text=True, timeout=600, check=False)  # fmt: skip
    assert done.returncode == 2, done.stderr[-2000:]
    assert "capture refused:" in done.stderr
    assert f"{step / 'batch-0.safetensors'}: its header claims" in done.stderr
    assert "replay:" not in done.stderr  # nothing was built


def test_a_gradient_spike_is_captured_before_its_update(tmp_path: Path) -> None:
    """capture.on_grad_spike judges the norm the trainer measured before clipping (the callbacks see it clipped)."""
    spike = ["fault_injection.grad_spike_at_steps=[8]", "fault_injection.grad_spike_factor=1000"]
    run_dir = captured_run("sft", tmp_path, "max_steps=9", "capture.on_grad_spike=5", *spike)
    meta = json.loads((run_dir / "captures" / "step-000008-rank0" / "capture.json").read_text(encoding="utf-8"))
    assert meta["reason"].startswith("grad_spike")
    assert meta["weights"] == "step_start"
    assert sorted(p.name for p in (run_dir / "captures").glob("step-*")) == ["step-000008-rank0"]
