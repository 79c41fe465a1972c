"""The held-out evaluation's parts that hostile input reaches: a side's snapshots (read without following links,
tensors only, checked against the rebuilt model), the evaluator process (isolated, no token, no code tree but the
trusted one) and what a training process saves. The real evaluation runs in tests/integration/."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from safetensors.torch import save_file

from canary_action.config.load import load_config
from canary_action.evaluate.client import JOB_FILE, LOG_FILE, RESULTS_FILE, Evaluator
from canary_action.evaluate.models import SnapshotRefused, read_snapshot, trained
from canary_action.evaluate.plan import META_FILE, SNAPSHOT_DIR, WEIGHTS_FILE, SnapshotMeta, snapshot_steps
from canary_action.files import folders_inside
from canary_action.train.snapshots import Snapshots

ROOT = Path(__file__).parents[2]
SFT = ROOT / "configs" / "tiny" / "sft.yaml"


def snapshot(run_dir: Path, tensors: dict[str, torch.Tensor], *, step: int = 4, **meta: Any) -> Path:
    folder = run_dir / SNAPSHOT_DIR / f"step-{step:06d}"
    folder.mkdir(parents=True)
    save_file(tensors, str(folder / WEIGHTS_FILE))
    fields = {"step": step, "model_name": "builtin:tiny-llama", "lora": None, "num_tensors": len(tensors),
              "num_parameters": sum(t.numel() for t in tensors.values()), **meta}  # fmt: skip
    (folder / META_FILE).write_text(json.dumps(fields), encoding="utf-8")
    return folder


def test_a_snapshot_reads_back_its_tensors(tmp_path: Path) -> None:
    snapshot(tmp_path, {"w": torch.ones(2, 3)})
    meta, tensors = read_snapshot(tmp_path, "step-000004")
    assert meta.step == 4
    assert torch.equal(tensors["w"], torch.ones(2, 3))


def test_a_link_in_a_side_s_snapshot_is_never_followed(tmp_path: Path) -> None:
    """A head side may leave a link where its weights were: to another model's file, or a root-only one."""
    elsewhere = tmp_path / "elsewhere.safetensors"
    save_file({"w": torch.ones(2)}, str(elsewhere))
    folder = snapshot(tmp_path / "run", {"w": torch.zeros(2)})
    (folder / WEIGHTS_FILE).unlink()
    (folder / WEIGHTS_FILE).symlink_to(elsewhere)
    with pytest.raises(SnapshotRefused, match="cannot be read"):
        read_snapshot(tmp_path / "run", "step-000004")
    # ... nor a link that is the heldout folder, or a step's folder
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / SNAPSHOT_DIR).symlink_to(tmp_path / "run" / SNAPSHOT_DIR)
    assert folders_inside(linked, [SNAPSHOT_DIR]) == []
    (tmp_path / "run" / SNAPSHOT_DIR / "step-000009").symlink_to(folder)
    assert folders_inside(tmp_path / "run", [SNAPSHOT_DIR]) == ["step-000004"]


def test_a_fifo_or_a_forged_meta_is_refused_without_waiting(tmp_path: Path) -> None:
    folder = snapshot(tmp_path, {"w": torch.ones(2)})
    (folder / WEIGHTS_FILE).unlink()
    os.mkfifo(folder / WEIGHTS_FILE)  # opening it for reading would wait for a writer forever
    started = time.monotonic()
    with pytest.raises(SnapshotRefused, match="not a regular file"):
        read_snapshot(tmp_path, "step-000004")
    assert time.monotonic() - started < 5
    other = snapshot(tmp_path / "b", {"w": torch.ones(2)}, code="import os")  # a key the meta does not have
    with pytest.raises(SnapshotRefused, match="cannot be read"):
        read_snapshot(tmp_path / "b", other.name)
    snapshot(tmp_path / "c", {"w": torch.ones(2)}, num_tensors=5)  # says more tensors than it holds
    with pytest.raises(SnapshotRefused, match="does not hold the 5"):
        read_snapshot(tmp_path / "c", "step-000004")
    broken = snapshot(tmp_path / "d", {"w": torch.ones(2)})
    (broken / WEIGHTS_FILE).write_bytes(b"\xff" * 64)  # not a safetensors header
    with pytest.raises(SnapshotRefused, match=r"cannot be read|not a safetensors file"):
        read_snapshot(tmp_path / "d", broken.name)


def test_tensors_must_fit_the_rebuilt_model(tmp_path: Path) -> None:
    start = torch.nn.Sequential(torch.nn.Linear(3, 2))
    meta = SnapshotMeta(step=4, model_name="builtin:tiny-llama", lora=None, num_tensors=1, num_parameters=6)
    with pytest.raises(SnapshotRefused, match="the rebuilt model lacks"):
        trained(start, meta, {"0.extra": torch.ones(2, 3)})  # type: ignore[arg-type]
    with pytest.raises(SnapshotRefused, match=r"\(3, 2\) in the snapshot, \(2, 3\) rebuilt"):
        trained(start, meta, {"0.weight": torch.ones(3, 2)})  # type: ignore[arg-type]
    model = trained(start, meta, {"0.weight": torch.full((2, 3), 7.0)})  # type: ignore[arg-type]
    assert torch.equal(model[0].weight, torch.full((2, 3), 7.0))
    assert not torch.equal(start[0].weight, model[0].weight), "the starting model stays as it was"


def test_the_evaluator_is_isolated_holds_no_token_and_no_pull_request_tree(tmp_path: Path) -> None:
    config = load_config(SFT).config
    os.environ["GITHUB_TOKEN"] = "ghs_never_in_the_evaluator"
    os.environ["CANARY_CODE_TREE"] = str(tmp_path / "pull-request")
    try:
        evaluator = Evaluator.start(config, [("run", config, tmp_path)], tmp_path / "eval", trusted_tree=None)
    finally:
        del os.environ["GITHUB_TOKEN"], os.environ["CANARY_CODE_TREE"]
    pid = evaluator.process.pid
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        cwd = Path(f"/proc/{pid}/cwd").resolve()
    finally:
        evaluator.cancel()
    assert not [v for v in environ if v.startswith((b"GITHUB_TOKEN=", b"CANARY_CODE_TREE="))]
    assert command[1:4] == [b"-I", b"-m", b"canary_action.evaluate"]
    assert cwd != Path.cwd()
    assert not any(cwd.iterdir()), "it works in an empty folder of its own"
    assert not any((tmp_path / "eval").iterdir()), "cancelled: its job and log are removed"


def test_an_evaluator_that_breaks_is_said_in_each_evaluation_with_its_log(tmp_path: Path) -> None:
    config = load_config(SFT).config
    broken = tmp_path / "python"
    broken.write_text("#!/bin/sh\necho 'out of memory while importing torch' >&2\nexit 7\n", encoding="utf-8")
    broken.chmod(0o755)
    evaluator = Evaluator.start(config, [("base", config, tmp_path), ("head", config, tmp_path)], tmp_path / "e",
                                trusted_tree=None, python=str(broken))  # fmt: skip
    found = evaluator.finish(timeout_s=30)
    assert set(found) == {"base", "head"}
    for evaluation in found.values():
        assert evaluation.status == "failed"
        assert evaluation.message is not None
        assert "exited with status 7" in evaluation.message
        assert "out of memory while importing torch" in evaluation.message
    assert (tmp_path / "e" / LOG_FILE).is_file(), "a failed evaluation keeps its log"
    assert (tmp_path / "e" / JOB_FILE).is_file()
    assert not (tmp_path / "e" / RESULTS_FILE).exists()


def test_a_model_the_canary_did_not_load_is_said_not_snapshotted(tmp_path: Path) -> None:
    config = load_config(SFT).config
    snapshots = Snapshots(config, tmp_path)
    own_model = torch.nn.Linear(2, 2)
    setup = SimpleNamespace(model=torch.nn.Linear(2, 2))  # what the canary loaded: not the trainer's
    snapshots.attach(SimpleNamespace(model=own_model), setup)  # type: ignore[arg-type]
    assert snapshots.refusal is not None
    assert "cannot be rebuilt" in snapshots.refusal
    assert "context.model" in (tmp_path / SNAPSHOT_DIR / "refused.txt").read_text(encoding="utf-8")
    snapshots.final(4)
    assert not folders_inside(tmp_path, [SNAPSHOT_DIR]), "nothing saved"


def test_the_loaded_model_is_saved_at_the_steps_asked_and_at_the_end(tmp_path: Path) -> None:
    config = load_config(SFT, ["max_steps=10", "heldout.steps=[3,5]"]).config
    model = torch.nn.Linear(2, 2)
    snapshots = Snapshots(config, tmp_path)
    snapshots.attach(SimpleNamespace(model=model), SimpleNamespace(model=model))  # type: ignore[arg-type]
    for step in range(1, 11):
        snapshots.between_steps(step, going_on=step < 10)
    snapshots.final(10)
    assert folders_inside(tmp_path, [SNAPSHOT_DIR]) == ["step-000003", "step-000005", "step-000010"]
    meta, tensors = read_snapshot(tmp_path, "step-000010")
    assert (meta.step, meta.lora, sorted(tensors)) == (10, None, ["bias", "weight"])


def test_snapshot_steps_default_to_halfway(tmp_path: Path) -> None:
    assert snapshot_steps(load_config(SFT, ["max_steps=30"]).config) == [15]
    assert snapshot_steps(load_config(SFT, ["max_steps=3"]).config) == []
    assert snapshot_steps(load_config(SFT, ["heldout.steps=[9,2,9]"]).config) == [2, 9]
