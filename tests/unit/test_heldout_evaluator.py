"""The held-out evaluation's parts that hostile input reaches: a side's snapshots (read without following links,
tensors only, checked against the rebuilt model), the evaluator process (isolated, no token, no code tree but the
trusted one) and what a training process saves. The real evaluation runs in tests/integration/."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from safetensors.torch import save_file

from canary_action.config.load import load_config
from canary_action.evaluate.client import JOB_FILE, LOG_FILE, RESULTS_FILE, Evaluator
from canary_action.evaluate.models import SnapshotRefused, load_trained, read_meta
from canary_action.evaluate.plan import META_FILE, SNAPSHOT_DIR, WEIGHTS_FILE, EvalJob, snapshot_steps
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


MODEL = torch.nn.Sequential(torch.nn.Linear(3, 2))  # a stand-in for the rebuilt starting model: "0.weight", "0.bias"


def load(run_dir: Path, name: str = "step-000004", start: Any = MODEL) -> Any:
    return load_trained(run_dir, name, read_meta(run_dir, name), start)


def test_a_snapshot_is_read_into_a_copy_of_the_starting_model(tmp_path: Path) -> None:
    snapshot(tmp_path, {"0.weight": torch.full((2, 3), 7.0)})
    model = load(tmp_path)
    assert torch.equal(model[0].weight, torch.full((2, 3), 7.0))
    assert not torch.equal(MODEL[0].weight, model[0].weight), "the starting model stays as it was"


def test_a_link_in_a_side_s_snapshot_is_never_followed(tmp_path: Path) -> None:
    """A head side may leave a link where its weights were: to another model's file, or a root-only one."""
    elsewhere = tmp_path / "elsewhere.safetensors"
    save_file({"0.weight": torch.ones(2, 3)}, str(elsewhere))
    folder = snapshot(tmp_path / "run", {"0.weight": torch.zeros(2, 3)})
    (folder / WEIGHTS_FILE).unlink()
    (folder / WEIGHTS_FILE).symlink_to(elsewhere)
    with pytest.raises(SnapshotRefused, match="cannot be read"):
        load(tmp_path / "run")
    # ... nor a link that is the heldout folder, or a step's folder
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / SNAPSHOT_DIR).symlink_to(tmp_path / "run" / SNAPSHOT_DIR)
    assert folders_inside(linked, [SNAPSHOT_DIR]) == []
    (tmp_path / "run" / SNAPSHOT_DIR / "step-000009").symlink_to(folder)
    assert folders_inside(tmp_path / "run", [SNAPSHOT_DIR]) == ["step-000004"]


def test_a_fifo_or_a_forged_meta_is_refused_without_waiting(tmp_path: Path) -> None:
    folder = snapshot(tmp_path, {"0.weight": torch.ones(2, 3)})
    (folder / WEIGHTS_FILE).unlink()
    os.mkfifo(folder / WEIGHTS_FILE)  # opening it for reading would wait for a writer forever
    started = time.monotonic()
    with pytest.raises(SnapshotRefused, match="not a regular file"):
        load(tmp_path)
    assert time.monotonic() - started < 5
    snapshot(tmp_path / "b", {"0.weight": torch.ones(2, 3)}, code="import os")  # a key the meta does not have
    with pytest.raises(SnapshotRefused, match="cannot be read"):
        load(tmp_path / "b")
    snapshot(tmp_path / "c", {"0.weight": torch.ones(2, 3)}, num_tensors=5)  # names more tensors than it holds
    with pytest.raises(SnapshotRefused, match="not the 5 it names"):
        load(tmp_path / "c")
    broken = snapshot(tmp_path / "d", {"0.weight": torch.ones(2, 3)})
    (broken / WEIGHTS_FILE).write_bytes(b"\xff" * 64)  # not a safetensors header
    with pytest.raises(SnapshotRefused, match=r"cannot be read|not a safetensors file"):
        load(tmp_path / "d")
    lora = {"r": 8, "lora_alpha": 16, "lora_dropout": 0.0, "target_modules": "(.+)+q_proj"}  # a pattern: PEFT's regex
    snapshot(tmp_path / "e", {"0.weight": torch.ones(2, 3)}, lora=lora)
    with pytest.raises(SnapshotRefused, match="cannot be read"):
        read_meta(tmp_path / "e", "step-000004")
    snapshot(tmp_path / "f", {"0.weight": torch.ones(2, 3)}, lora={**lora, "target_modules": ["q_proj"], "r": 4096})
    with pytest.raises(SnapshotRefused, match="cannot be read"):
        read_meta(tmp_path / "f", "step-000004")
    # Adapters on modules the model lacks: PEFT refuses, and the snapshot is refused (its run's other points kept)
    snapshot(tmp_path / "g", {"0.weight": torch.ones(2, 3)}, lora={**lora, "target_modules": ["q_proj"]})
    with pytest.raises(SnapshotRefused, match="its LoRA structure cannot be rebuilt"):
        load(tmp_path / "g")


def test_tensors_must_fit_the_rebuilt_model_before_any_is_read(tmp_path: Path) -> None:
    snapshot(tmp_path / "a", {"0.extra": torch.ones(2, 3)})
    with pytest.raises(SnapshotRefused, match=r"a tensor the rebuilt model lacks: 0\.extra"):
        load(tmp_path / "a")
    snapshot(tmp_path / "b", {"0.weight": torch.ones(3, 2)})
    with pytest.raises(SnapshotRefused, match=r"is \(3, 2\) in the snapshot, \(2, 3\) rebuilt"):
        load(tmp_path / "b")
    snapshot(tmp_path / "c", {"0.weight": torch.ones(2, 3, dtype=torch.int64)})
    with pytest.raises(SnapshotRefused, match="not a floating-point tensor"):
        load(tmp_path / "c")


def test_the_evaluator_is_isolated_holds_no_token_and_no_pull_request_tree(tmp_path: Path) -> None:
    """It runs where the trusted training runs (relative data and model paths resolve as there: with -I that
    folder is not on its import path), its scratch in a folder of its own, removed when it ends."""
    config = load_config(SFT).config
    trusted = tmp_path / "trusted-tree"
    trusted.mkdir()
    os.environ["GITHUB_TOKEN"] = "ghs_never_in_the_evaluator"
    os.environ["CANARY_CODE_TREE"] = str(tmp_path / "pull-request")
    try:
        evaluator = Evaluator.start(
            config, [("run", config, tmp_path, True)], tmp_path / "eval", trusted_tree=None, cwd=trusted
        )
    finally:
        del os.environ["GITHUB_TOKEN"], os.environ["CANARY_CODE_TREE"]
    pid = evaluator.process.pid
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        cwd = Path(f"/proc/{pid}/cwd").resolve()
        job = EvalJob.model_validate_json((tmp_path / "eval" / JOB_FILE).read_text(encoding="utf-8"))
        assert job.scratch is not None
        assert Path(job.scratch).is_dir()
    finally:
        evaluator.cancel()
    assert not [v for v in environ if v.startswith((b"GITHUB_TOKEN=", b"CANARY_CODE_TREE="))]
    assert command[1:4] == [b"-I", b"-m", b"canary_action.evaluate"]
    assert cwd == trusted.resolve()
    assert job.cpus == sorted(os.sched_getaffinity(0)), "the starter's CPUs, before it pins the evaluator"
    assert not Path(job.scratch).exists(), "its scratch is removed when it ends"
    assert not any((tmp_path / "eval").iterdir()), "cancelled: its job and log are removed"


def test_an_evaluator_that_breaks_is_said_in_each_evaluation_with_its_log(tmp_path: Path) -> None:
    config = load_config(SFT).config
    broken = tmp_path / "python"
    broken.write_text("#!/bin/sh\necho 'out of memory while importing torch' >&2\nexit 7\n", encoding="utf-8")
    broken.chmod(0o755)
    subjects = [("base", config, tmp_path, True), ("head", config, tmp_path, False)]
    evaluator = Evaluator.start(config, subjects, tmp_path / "e", trusted_tree=None, python=str(broken))
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


def test_a_factory_s_own_model_that_cannot_be_scored_says_why_and_saves_nothing(tmp_path: Path) -> None:
    """The trainer's model is not the one the canary loaded: it is scored in the training process instead
    (tests/integration/test_correctness.py); here that scoring breaks, and the evaluation will say why."""
    config = load_config(SFT).config
    snapshots = Snapshots(config, tmp_path)
    own_model = torch.nn.Linear(2, 2)
    setup = SimpleNamespace(model=torch.nn.Linear(2, 2))  # what the canary loaded (not the trainer's); no placement
    snapshots.attach(SimpleNamespace(model=own_model), setup)  # type: ignore[arg-type]
    assert snapshots.refusal is not None
    assert "could not be scored on held-out examples in the training process" in snapshots.refusal
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
    meta = read_meta(tmp_path, "step-000010")
    assert (meta.step, meta.lora, meta.num_tensors) == (10, None, 2)
    assert torch.equal(load_trained(tmp_path, "step-000010", meta, torch.nn.Linear(2, 2)).weight, model.weight)


def test_snapshot_steps_default_to_halfway_in_runs_of_100_steps_or_more(tmp_path: Path) -> None:
    assert snapshot_steps(load_config(SFT, ["max_steps=120"]).config) == [60]
    assert snapshot_steps(load_config(SFT, ["max_steps=99"]).config) == []
    assert snapshot_steps(load_config(SFT, ["heldout.steps=[9,2,9]"]).config) == [2, 9]


def test_an_evaluator_still_preparing_at_idle_priority_is_brought_back_as_it_is_told_to_go(tmp_path: Path) -> None:
    """SCHED_IDLE runs only on a CPU nothing else wants: a tiny canary beside two busy loops waited out the
    evaluator's whole time limit on an evaluator stuck preparing. finish() brings it to the normal policy before
    it says go. Here a stand-in evaluator goes idle, then writes the policy it reads "go" under."""
    config = load_config(SFT).config
    said = tmp_path / "said"
    idle = tmp_path / "python"
    idle.write_text(
        f"#!{sys.executable}\n"
        "import os, sys\n"
        "os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))\n"
        "line = sys.stdin.readline().strip()\n"
        f"open({str(said)!r}, 'w').write(f'{{line}} {{os.sched_getscheduler(0)}}')\n",
        encoding="utf-8",
    )
    idle.chmod(0o755)
    evaluator = Evaluator.start(config, [("run", config, tmp_path, True)], tmp_path / "e", python=str(idle))
    waited = time.monotonic() + 30
    while os.sched_getscheduler(evaluator.process.pid) != os.SCHED_IDLE and time.monotonic() < waited:
        time.sleep(0.01)
    assert os.sched_getscheduler(evaluator.process.pid) == os.SCHED_IDLE
    evaluator.finish(timeout_s=30)
    assert said.read_text(encoding="utf-8") == f"go {os.SCHED_OTHER}"


def test_the_evaluator_goes_idle_only_where_it_can_come_back() -> None:
    """Leaving SCHED_IDLE needs privilege: a probe on a thread of its own says whether this process has it (as
    root, it has); the thread's policy change touches no other thread."""
    from canary_action.evaluate.priority import can_leave_idle

    before = os.sched_getscheduler(0)
    assert can_leave_idle() is (os.geteuid() == 0 or _nice_allowed())
    assert os.sched_getscheduler(0) == before


def _nice_allowed() -> bool:
    import resource

    return resource.getrlimit(resource.RLIMIT_NICE)[0] >= 20


def test_what_an_evaluator_finished_before_a_timeout_is_kept(tmp_path: Path) -> None:
    """The base side is scored first and written at once: a head side that runs the evaluation into the time limit
    loses only its own figure."""
    config = load_config(SFT).config
    slow = tmp_path / "python"
    slow.write_text(
        "#!/bin/sh\n"  # what the evaluator writes once the base side is done, then a head side that never ends
        f'echo \'{{"evaluations": {{"base": {{"status": "skipped", "reason": "off"}}}}}}\' '
        f"> {tmp_path / 'e' / RESULTS_FILE}\nsleep 60\n",
        encoding="utf-8",
    )
    slow.chmod(0o755)
    subjects = [("base", config, tmp_path, True), ("head", config, tmp_path, False)]
    evaluator = Evaluator.start(config, subjects, tmp_path / "e", trusted_tree=None, python=str(slow))
    time.sleep(0.5)
    found = evaluator.finish(timeout_s=3)
    assert (found["base"].status, found["base"].reason) == ("skipped", "off")
    assert found["head"].status == "failed"
    assert "did not finish within 3 s" in (found["head"].message or "")


def test_a_file_s_held_out_rows_are_those_after_the_training_ones(tmp_path: Path) -> None:
    from canary_action.errors import ConfigError
    from canary_action.train.builtin.tokenizer import build_tokenizer
    from canary_action.train.data import load_heldout

    rows = tmp_path / "prefs.jsonl"
    rows.write_text("".join(json.dumps({"text": f"row {i}"}) + "\n" for i in range(10)), encoding="utf-8")
    config = load_config(SFT, [f"dataset_name={rows}", "dataset_size=6", "heldout.num_examples=8"]).config
    held, said = load_heldout(config, build_tokenizer())
    assert held["text"] == ["row 6", "row 7", "row 8", "row 9"]  # what is there after the first six
    assert said == f"rows 6-9 of {rows} (train), after the training rows"
    every = load_config(SFT, [f"dataset_name={rows}", "dataset_size=10"]).config
    with pytest.raises(ConfigError, match="none after the first dataset_size") as refused:
        load_heldout(every, build_tokenizer())
    assert "heldout.dataset_name" in (refused.value.fix or "")


def test_a_reward_set_s_fingerprint_holds_how_its_completions_are_sampled() -> None:
    """Baselines whose completions were sampled at another temperature did not score the same thing: their
    fingerprint differs, so the history path leaves them out (compare/heldout.py)."""
    from canary_action.evaluate.examples import heldout_set
    from canary_action.train.builtin.tokenizer import build_tokenizer

    grpo = ROOT / "configs" / "tiny" / "grpo.yaml"
    tokenizer = build_tokenizer()
    prints = {t: heldout_set(load_config(grpo, [f"temperature={t}"]).config, tokenizer).fingerprint for t in (1.0, 0.7)}
    again = heldout_set(load_config(grpo, ["temperature=1.0"]).config, tokenizer).fingerprint
    assert prints[1.0] == again
    assert prints[1.0] != prints[0.7]
