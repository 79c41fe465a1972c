"""Real lockstep pairs of tiny canaries on the CPU: two code trees, two processes taking turns, one verdict.

Each test builds its own trees in tmp_path — as the action checks out the base commit beside the PR's — with
the config inside each tree, and runs `canary pair` as a user does.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from canary_action.metrics.io import read_metrics
from tests.factories import NO_HELDOUT

pytestmark = pytest.mark.training

REPO = Path(__file__).parents[2]
SFT = REPO / "configs" / "tiny" / "sft.yaml"
CONFIG = Path("canary.yaml")
#: Long enough for the default tier (min_step_count 20 after the warm-up cut); short enough for CI.
STEPS = "max_steps=34"
FACTORY = """
import sys
from pathlib import Path

from canary_action.train.builtin.example_factory import build_trainer as plain


def build_trainer(context):
    Path("factory-ran-here").write_text(str(Path.cwd()))  # its working directory is writable to it
    print(f"factory ran in {Path.cwd()}", file=sys.stderr)
    return plain(context)
"""


def tree(root: Path, name: str, config: str, **files: str) -> Path:
    directory = root / name
    directory.mkdir(parents=True)
    (directory / CONFIG).write_text(config, encoding="utf-8")
    for filename, text in files.items():
        (directory / filename).write_text(text, encoding="utf-8")
    return directory


def canary_pair(
    base: Path, head: Path, out: Path, *args: str, env: dict[str, str] | None = None, heldout: bool = False
) -> subprocess.CompletedProcess[str]:
    """`canary pair` of the two trees' canary.yaml; without the held-out evaluation unless `heldout`."""
    command = [sys.executable, "-m", "canary_action", "pair", str(CONFIG), "--base", str(base), "--head", str(head),
               "-o", str(out), "--set", STEPS, "--json", *args, *(() if heldout else NO_HELDOUT)]  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, timeout=900, check=False, env=env)


def pair_dir(out: Path) -> Path:
    (found,) = out.iterdir()
    return found


def test_a_planted_slowdown_on_the_head_side_is_a_regression_named_on_it(tmp_path: Path) -> None:
    sft = SFT.read_text(encoding="utf-8")
    base = tree(tmp_path, "base", sft)
    head = tree(tmp_path, "head", sft + "fault_injection:\n  extra_matmuls_per_step: 400\n")
    done = canary_pair(base, head, tmp_path / "out")
    assert done.returncode == 1, done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert result["verdict"] == "regression"
    step = next(c for c in result["checks"] if c["name"] == "step_time")
    assert step["status"] == "fail"
    assert "minimum effect" in step["message"]
    assert result["pairing"]["head_tree"] == str(head.resolve())
    assert result["suspects"][0]["evidence"], "the planted key is named as the cause"
    assert "extra_matmuls_per_step" in json.dumps(result["suspects"][0])
    written = pair_dir(tmp_path / "out")
    assert {p.name for p in written.iterdir()} >= {"base", "head", "pair.json", "result.json", "report.md"}
    record = json.loads((written / "pair.json").read_text(encoding="utf-8"))
    assert {tuple(r["order"]) for r in record["rounds"]} <= {("base", "head"), ("head", "base")}
    assert len({tuple(r["order"]) for r in record["rounds"]}) == 2, "the order inside a round is drawn"
    for side in ("base", "head"):
        metrics = read_metrics(written / side / "metrics.json")
        assert metrics.pair is not None
        assert metrics.pair.side == side
        assert metrics.status.state == "completed"
        assert metrics.series["pair/round"][:4] == [0.0, 0.0, 1.0, 1.0]


def test_an_aa_pair_passes(tmp_path: Path) -> None:
    sft = SFT.read_text(encoding="utf-8")
    done = canary_pair(tree(tmp_path, "base", sft), tree(tmp_path, "head", sft), tmp_path / "out", heldout=True)
    result = json.loads(done.stdout)
    assert done.returncode == 0, (result["reason"], done.stderr[-3000:])
    assert result["verdict"] == "pass", (result["reason"], result["notes"], done.stderr[-3000:])
    # Never a failure; a warning (a point estimate over the minimum effect, not clear) is noise said as such, and
    # it came once in a suite run on this 2-core machine: a judged check, not a pass that was promised.
    step_time = next(c for c in result["checks"] if c["name"] == "step_time")
    assert step_time["status"] in ("pass", "warn"), step_time["message"]
    # Same seed, same batches, same code: the loss curves coincide, and so the numerics are identical (issue 32).
    written = pair_dir(tmp_path / "out")
    losses = [read_metrics(written / s / "metrics.json").series["train/loss"] for s in ("base", "head")]
    assert losses[0] == losses[1]
    numerics = next(c for c in result["checks"] if c["name"] == "numerics")
    assert numerics["status"] == "pass"
    assert numerics["message"].startswith("identical: loss, gradient norm and weights bitwise equal at all 34 steps")
    held = next(c for c in result["checks"] if c["name"] == "heldout_eval")
    assert held["status"] == "pass", held["message"]
    assert result["heldout"]["basis"] == "paired"
    assert result["heldout"]["effect"] == 0  # the same model, scored on the same examples by one process
    assert {p.name for p in written.iterdir()} == {"base", "head", "pair.json", "result.json", "report.md"}
    assert not (written / "head" / "heldout").exists(), "the snapshots are removed once evaluated"


@pytest.mark.parametrize("family", ["dpo", "grpo", "rloo"])
def test_every_family_takes_turns(family: str, tmp_path: Path) -> None:
    """Generation (GRPO, RLOO) and preference (DPO) loops hold between steps as SFT's does."""
    config = (REPO / "configs" / "tiny" / f"{family}.yaml").read_text(encoding="utf-8")
    repo = tree(tmp_path, "tree", config)
    done = canary_pair(repo, repo, tmp_path / "out", "--set", "max_steps=4", heldout=True)
    assert done.returncode in (0, 1), done.stderr[-3000:]
    written = pair_dir(tmp_path / "out")
    for side in ("base", "head"):
        metrics = read_metrics(written / side / "metrics.json")
        assert metrics.status.state == "completed"
        assert metrics.series["pair/round"] == [0.0, 0.0, 1.0, 1.0]
    # Each family's held-out metric, scored on both sides by the pair's evaluator (issue 32).
    evaluations = json.loads((written / "pair.json").read_text(encoding="utf-8"))["heldout"]
    metric = {"dpo": "preference", "grpo": "reward", "rloo": "reward"}[family]
    for side in ("base", "head"):
        assert (evaluations[side]["status"], evaluations[side]["metric"]) == ("evaluated", metric), evaluations[side]
    assert evaluations["base"]["points"] == evaluations["head"]["points"]


def test_a_nan_on_one_side_ends_the_pair_and_keeps_both_measurements(tmp_path: Path) -> None:
    sft = SFT.read_text(encoding="utf-8")
    head = tree(tmp_path, "head", sft + "fault_injection:\n  nan_loss_at_step: 9\n")
    done = canary_pair(tree(tmp_path, "base", sft), head, tmp_path / "out")
    assert done.returncode == 1, done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert next(c for c in result["checks"] if c["name"] == "nan_steps")["status"] == "fail"
    written = pair_dir(tmp_path / "out")
    head_metrics = read_metrics(written / "head" / "metrics.json")
    base_metrics = read_metrics(written / "base" / "metrics.json")
    assert (head_metrics.status.state, head_metrics.status.reason) == ("stopped_early", "non_finite")
    assert (base_metrics.status.state, base_metrics.status.reason) == ("stopped_early", "pair_ended")
    assert 9 <= base_metrics.summary.num_steps <= 12  # type: ignore[union-attr]  # its own chunk, then stopped


def test_a_crash_on_one_side_is_exit_3_with_both_measurements_written(tmp_path: Path) -> None:
    sft = SFT.read_text(encoding="utf-8")
    head = tree(tmp_path, "head", sft + "fault_injection:\n  crash_at_step: 7\n")
    done = canary_pair(tree(tmp_path, "base", sft), head, tmp_path / "out")
    assert done.returncode == 3, done.stderr[-3000:]
    assert "the head side" in done.stderr
    assert "error.log" in done.stderr
    written = pair_dir(tmp_path / "out")
    assert read_metrics(written / "head" / "metrics.json").status.state == "failed"
    assert read_metrics(written / "base" / "metrics.json").status.reason == "pair_ended"
    assert json.loads(done.stdout)["verdict"] == "crashed"


def test_a_failing_base_side_is_no_regression_of_the_pull_request(tmp_path: Path) -> None:
    sft = SFT.read_text(encoding="utf-8")
    base = tree(tmp_path, "base", sft + "fault_injection:\n  crash_at_step: 7\n")
    done = canary_pair(base, tree(tmp_path, "head", sft), tmp_path / "out")
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert result["verdict"] == "neutral", result["reason"]
    status = next(c for c in result["checks"] if c["name"] == "run_status")
    assert status["status"] == "skip"
    assert "other side of its lockstep pair ended first" in status["message"]
    assert any("the base side" in n and "PlantedCrashError" in n for n in result["notes"])


def test_a_cancelled_pair_writes_both_sides_and_its_record(tmp_path: Path) -> None:
    """SIGTERM (a cancelled CI job) mid-pair: each side records the interrupt and writes its metrics.json."""
    import signal
    import time

    sft = SFT.read_text(encoding="utf-8")
    base, head = tree(tmp_path, "base", sft), tree(tmp_path, "head", sft)
    command = [sys.executable, "-m", "canary_action", "pair", str(CONFIG), "--base", str(base), "--head", str(head),
               "-o", str(tmp_path / "out"), "--set", "max_steps=400"]  # fmt: skip
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as pair:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and pair.stderr is not None:
            if re.search(r"step +[1-9]\d*/400", pair.stderr.readline()):  # both sides are training
                break
        pair.send_signal(signal.SIGTERM)
        pair.communicate(timeout=300)
    assert pair.returncode != 0
    written = pair_dir(tmp_path / "out")
    assert (written / "pair.json").is_file()
    for side in ("base", "head"):
        metrics = read_metrics(written / side / "metrics.json")
        assert metrics.status.state in ("failed", "stopped_early"), metrics.status
        assert len(metrics.series.get("step", [])) < 400  # a side may not have had its first turn yet
    # The held-out evaluator started with the pair ends with it, evaluating nothing (issue 32).
    record = json.loads((written / "pair.json").read_text(encoding="utf-8"))
    assert {e["reason"] for e in record["heldout"].values()} == {"stopped"}
    assert not [p for p in psutil.process_iter(["cmdline"]) if str(written) in " ".join(p.info["cmdline"] or [])]


def test_each_side_installs_its_own_requirements_and_a_bump_is_named(tmp_path: Path) -> None:
    """--setup runs in each tree into its own environment: the head's newer package is in its fingerprint, and
    the comparison lists the move among the environment changes."""
    from tests.unit.test_child_environment import wheel

    sft = SFT.read_text(encoding="utf-8")
    base, head = tree(tmp_path, "base", sft), tree(tmp_path, "head", sft)
    wheel(base, "1.0")
    wheel(head, "2.0")
    done = canary_pair(base, head, tmp_path / "out", "--setup", "pip install -q --no-index ./fakepkg-*.whl")
    assert done.returncode in (0, 1), done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert {"field": "setup:fakepkg", "baseline": "1.0", "current": "2.0"} in result["env_changes"]
    written = pair_dir(tmp_path / "out")
    assert read_metrics(written / "head" / "metrics.json").env.setup_packages == {"fakepkg": "2.0"}


def test_a_factory_only_the_head_tree_has_runs_in_the_head_side_and_is_invisible_to_the_base(tmp_path: Path) -> None:
    custom = (REPO / "configs" / "tiny" / "custom.yaml").read_text(encoding="utf-8")
    head_config = custom.replace(
        "canary_action.train.builtin.example_factory:build_trainer", "team_factory:build_trainer"
    )
    head = tree(tmp_path, "head", head_config, **{"team_factory.py": FACTORY})
    base = tree(tmp_path, "base", custom)
    done = canary_pair(base, head, tmp_path / "out", "--set", "max_steps=12", "--threshold-tier", "smoke")
    assert done.returncode in (0, 1), done.stderr[-3000:]
    # Run as root, the head side is a user of its own that works in its own view of the head tree (a hidden
    # folder in it, removed at the end): what it writes reaches neither tree.
    [ran_in] = [line.split(" in ", 1)[1] for line in done.stderr.splitlines() if line.startswith("factory ran in ")]
    assert ran_in.startswith(str(head.resolve())), ran_in
    assert not (head / "factory-ran-here").exists()
    assert not (base / "factory-ran-here").exists()
    assert not list(head.glob(".rlhf-canary-head-*"))
    code = json.loads((pair_dir(tmp_path / "out") / "pair.json").read_text(encoding="utf-8"))["code"]
    changed = {f["path"]: f["change"] for f in code["files"]}
    assert changed == {"team_factory.py": "added", "canary.yaml": "modified"}, "diffed before the sides wrote files"
    # The base tree's config naming the head's module: the base side cannot import it, and says so; a base that
    # cannot run is no fault of the pull request, so the verdict is neutral (no baseline), not a failure.
    shutil.copy(head / CONFIG, base / CONFIG)
    refused = canary_pair(base, head, tmp_path / "again", "--set", "max_steps=12", "--threshold-tier", "smoke")
    assert refused.returncode == 0, refused.stderr[-3000:]
    result = json.loads(refused.stdout)
    assert result["verdict"] == "neutral"
    assert any("the base side" in n and "team_factory" in n for n in result["notes"]), result["notes"]


def test_a_pair_prints_the_report_as_compare_does_and_labels_each_sides_lines(tmp_path: Path) -> None:
    """stdout: the terminal report (report.md stays GitHub markdown); stderr: each progress line names its side;
    the note counts every round and those judged, as the Paired A/B line does."""
    repo = tree(tmp_path, "tree", SFT.read_text(encoding="utf-8"))
    command = [sys.executable, "-m", "canary_action", "pair", str(CONFIG), "--base", str(repo), "--head", str(repo),
               "-o", str(tmp_path / "out"), "--set", "max_steps=4", *NO_HELDOUT]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode in (0, 1), done.stderr[-3000:]
    assert done.stdout.startswith("rlhf-canary "), done.stdout[:500]
    assert "| Check |" not in done.stdout
    assert re.search(r"^Note: lockstep pair \S+: 2 rounds of 2 steps in all \(warm-up included\)", done.stdout, re.M)
    assert "| Check |" in (pair_dir(tmp_path / "out") / "report.md").read_text(encoding="utf-8")
    for side in ("base", "head"):
        assert f"[tiny-sft {side}] step 4/4 |" in done.stderr
        assert f"[tiny-sft {side}] training 4 steps" in done.stderr
    assert "[tiny-sft] step" not in done.stderr


def test_sides_that_fail_to_start_point_at_the_traceback_they_wrote(tmp_path: Path) -> None:
    """An import that fails before the side's run exists (here a broken transformers on the path): exit 3, and
    the message names the error and an error.log that is there."""
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "transformers.py").write_text('raise ImportError("planted: transformers is broken")\n')
    sft = SFT.read_text(encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(shadow), os.environ.get("PYTHONPATH")]))}
    command = [sys.executable, "-m", "canary_action", "pair", str(CONFIG), "--base", str(tree(tmp_path, "base", sft)),
               "--head", str(tree(tmp_path, "head", sft)), "-o", str(tmp_path / "out"), "--json",
               *NO_HELDOUT]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False, env=env)
    assert done.returncode == 3, done.stderr[-3000:]
    log = pair_dir(tmp_path / "out") / "head" / "error.log"
    assert "failed during start: ImportError: planted: transformers is broken" in done.stderr
    assert f"read the traceback in {log}" in done.stderr
    assert "planted: transformers is broken" in log.read_text(encoding="utf-8")


STEP_CLOCK = """
import atexit
import os
import time
from pathlib import Path

from transformers import TrainerCallback

from canary_action.train.builtin.example_factory import build_trainer as plain


class StepClock(TrainerCallback):
    def on_step_begin(self, args, state, control, **kwargs):
        with (Path(args.output_dir) / "step-begins.txt").open("a") as log:  # the side's run folder: writable
            log.write(f"{time.time_ns()}\\n")


def slow_exit(folder):  # a side whose teardown takes a second of CPU, after its results are written
    (folder / "exit-begins.txt").write_text(f"{time.time_ns()}")
    end = time.monotonic() + 1.0
    while time.monotonic() < end:
        pass


def build_trainer(context):
    trainer = plain(context)
    trainer.add_callback(StepClock())
    atexit.register(slow_exit, Path(trainer.args.output_dir))
    return trainer
"""


def test_the_side_that_ends_first_writes_its_results_before_the_other_trains_its_last_chunk(tmp_path: Path) -> None:
    """Writing metrics.json (summaries, the file) while the other side trained made that side's last steps run
    1.8-2.5x their median in every benchmark pair, a false 'periodic stalls' suspect. The coordinator now hears
    of a side's end only once its file is written, and waits for its process to exit (its teardown ran beside
    the other side's last chunk at half its CPU time), so the other side's last chunk starts after both."""
    custom = (REPO / "configs" / "tiny" / "custom.yaml").read_text(encoding="utf-8")
    config = custom.replace("canary_action.train.builtin.example_factory:build_trainer", "clock:build_trainer")
    base = tree(tmp_path, "base", config, **{"clock.py": STEP_CLOCK})
    head = tree(tmp_path, "head", config, **{"clock.py": STEP_CLOCK})
    done = canary_pair(base, head, tmp_path / "out", "--set", "max_steps=8", "--threshold-tier", "smoke")
    assert done.returncode in (0, 1), done.stderr[-3000:]
    written = pair_dir(tmp_path / "out")
    first, second = json.loads((written / "pair.json").read_text(encoding="utf-8"))["rounds"][-1]["order"]
    [clock] = (written / second).rglob("step-begins.txt")
    begins = [int(t) for t in clock.read_text(encoding="utf-8").split()]
    assert len(begins) == 8
    last_chunk_starts = begins[-2]  # chunks of 2 steps (the default)
    assert (written / first / "metrics.json").stat().st_mtime_ns <= last_chunk_starts
    # and it has exited: its teardown (here a second of CPU) no longer runs beside the other side's last chunk
    [exit_began] = (written / first).rglob("exit-begins.txt")
    assert last_chunk_starts >= int(exit_began.read_text(encoding="utf-8")) + 1_000_000_000


#: A head side that is twice as slow (each step busy-waits as long as it computed: +100 % on any CPU, under any
#: load) and hides it by stopping the base side: a thread that finds the base side's process and sends it SIGSTOP for
#: 40 ms of every 50, recording what happened in its run folder.
STOPPER = """
import atexit
import os
import signal
import threading
import time
from pathlib import Path

from transformers import TrainerCallback

from canary_action.train.builtin.example_factory import build_trainer as plain

DONE = threading.Event()


def base_side(mine):
    # this pair's own base side only: the suite runs other pairs beside this one, and their base sides are not ours
    for entry in Path("/proc").iterdir():
        try:
            parts = (entry / "cmdline").read_bytes().split(b"\\0")
        except OSError:
            continue
        if any(os.path.realpath(part) == mine for part in parts if part.endswith(b"/base/side.json")):
            return int(entry.name)
    return None


def say(log, text):  # whole or not at all: the side may end, and this daemon thread with it, at any moment
    log.with_suffix(".part").write_text(text)
    os.replace(log.with_suffix(".part"), log)


def stop_it(log):
    pid, mine = None, os.fsencode(os.path.realpath(log.parent.parent.parent / "base" / "side.json"))
    while pid is None and not DONE.is_set():
        pid, _ = base_side(mine), time.sleep(0.01)
    atexit.register(lambda: (DONE.set(), os.kill(pid, signal.SIGCONT)))
    stops = 0
    while not DONE.is_set():
        try:
            os.kill(pid, signal.SIGSTOP)
            time.sleep(0.04)
            os.kill(pid, signal.SIGCONT)
        except PermissionError:
            say(log, "refused")
            return
        except ProcessLookupError:
            return
        stops += 1
        say(log, f"stopped {stops} times")
        time.sleep(0.01)


class TwiceAsSlow(TrainerCallback):
    def on_step_begin(self, args, state, control, **kwargs):
        self.began = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        until = 2 * time.perf_counter() - self.began
        while time.perf_counter() < until:
            pass


def build_trainer(context):
    trainer = plain(context)
    threading.Thread(target=stop_it, args=(Path(trainer.args.output_dir) / "attack.txt",), daemon=True).start()
    trainer.add_callback(TwiceAsSlow())
    return trainer
"""


def test_a_head_side_that_stops_the_base_side_as_the_same_user_is_named_never_passed(tmp_path: Path) -> None:
    """As one user (not root, or CANARY_PAIR_HEAD_UID=off) the head side's stops land, and the base side's CPU time
    per wall second shows them: the pair is not judged, never passed. (As root, the head side is a user of its own
    and its stops are refused: test_hostile_head.py.)"""
    custom = (REPO / "configs" / "tiny" / "custom.yaml").read_text(encoding="utf-8")
    base = tree(tmp_path, "base", custom)
    head = tree(tmp_path, "head", custom.replace("canary_action.train.builtin.example_factory", "stopper"),
                **{"stopper.py": STOPPER})  # fmt: skip
    shared = canary_pair(base, head, tmp_path / "shared", env={**os.environ, "CANARY_PAIR_HEAD_UID": "off"})
    assert shared.returncode in (0, 1), shared.stderr[-3000:]
    if os.geteuid() == 0:
        assert "both sides run as this user" in shared.stderr
    [attack] = pair_dir(tmp_path / "shared").rglob("attack.txt")
    assert attack.read_text(encoding="utf-8").startswith("stopped ")
    result = json.loads(shared.stdout)
    assert result["verdict"] != "pass"
    assert any("the base side was stopped or starved" in n for n in result["notes"]), result["notes"]
