"""A hostile head side, run as a real pair: everything a pull request's code can write is hostile to the root side
that reads it (docs/lockstep.md, 'Integrity'). As root (the action's container, this test machine), the head side is
a user of its own; what it tries here — links where the coordinator writes and reads, special files and hard links
for the upload, a module planted in the shared compile cache, daemons, forged workflow commands, a slowdown it hides
by stopping the base side — must cross nothing, and its slowdown must still be judged a regression.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from canary_action.train.launch.environment import live_processes
from tests.integration.test_lockstep import REPO, STOPPER, canary_pair, tree

pytestmark = [
    pytest.mark.training,
    pytest.mark.skipif(
        not sys.platform.startswith("linux") or os.geteuid() != 0,
        reason="the head side is a user of its own only when the pair runs as root",
    ),
]

SECRET = "ghs_planted0123456789secret"
#: What the head's setup command does, as the head's user, before the coordinator writes anything into the head's
#: run folder: a link at side.json (root wrote the side's JSON through it) and at error.log (root read it back as the
#: failure's text: /proc/self/environ held the token), and a daemon that outlives the setup.
HOSTILE_SETUP = """
set -u
targets=$(cat targets.json)
victim=$(python -c 'import json,sys; print(json.load(sys.stdin)["victim"])' <<EOF
$targets
EOF
)
out=$(python -c 'import json,sys; print(json.load(sys.stdin)["out"])' <<EOF
$targets
EOF
)
run=$(ls -td "$out"/*/head | head -n 1)  # this pair's (a confirming pair is the newest)
ln -s "$victim" "$run/side.json"
ln -s /proc/self/environ "$run/error.log"
nohup sleep 300 >/dev/null 2>&1 &
echo $! > "$run/setup-daemon.pid"
exit "${FAIL_SETUP:-0}"
"""

#: The head's trainer: STOPPER's (twice as slow, and stopping the base side to hide it) and, once it trains, every
#: plant it can make in its run folder and the shared temporary folder, a daemon of its own and forged workflow
#: commands on its output.
HOSTILE = (
    STOPPER
    + """
import json
import subprocess
import sys

TARGETS = json.loads(Path(__file__).with_name("targets.json").read_text())
PICKLE = b"\\x80\\x04\\x95\\x1c\\x00cos\\nsystem\\n\\x94\\x8c\\x02id\\x94\\x85\\x94R\\x94."  # os.system("id")


def attempt(tried, name, action):
    try:
        action()
        tried[name] = "done"
    except OSError as error:
        tried[name] = type(error).__name__


def plant(run_dir):
    tried = {}
    attempt(tried, "link to a host file", lambda: os.symlink(TARGETS["victim"], run_dir / "creds"))
    attempt(tried, "link to a host folder", lambda: os.symlink(TARGETS["host_folder"], run_dir / "host"))
    attempt(tried, "fifo", lambda: os.mkfifo(run_dir / "pipe"))
    step = run_dir / "captures" / "step-000001-rank0"  # a capture for `canary replay` on the downloaded artifact
    attempt(tried, "capture", lambda: (step.mkdir(parents=True),
                                       (run_dir / "captures" / "config.json").write_bytes(PICKLE),
                                       (step / "batch-0.safetensors").write_bytes(PICKLE),
                                       os.symlink(TARGETS["victim"], step / "weights.safetensors")))
    attempt(tried, "hard link", lambda: os.link(TARGETS["victim"], run_dir / "hard"))
    shared = Path(TARGETS["shared_cache"])
    attempt(tried, "shared cache", lambda: (shared.mkdir(parents=True, exist_ok=True),
                                            (shared / "planted.py").write_text("PLANTED = True\\n")))
    quiet = subprocess.DEVNULL
    daemon = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], start_new_session=True,
                              stdin=quiet, stdout=quiet, stderr=quiet)
    (run_dir / "trainer-daemon.pid").write_text(str(daemon.pid))
    (run_dir / "tried.json").write_text(json.dumps(tried))
    print("::add-mask::planted\\n::stop-commands::hostile\\n::error::forged by the head side", flush=True)


slow_build = build_trainer


def build_trainer(context):
    trainer = slow_build(context)
    plant(Path(trainer.args.output_dir).parent)
    return trainer
"""
)


#: The base side's trainer, recording where its temporary folder and compile caches are.
RECORDER = """
import os
from pathlib import Path

from canary_action.train.builtin.example_factory import build_trainer as plain


def build_trainer(context):
    trainer = plain(context)
    names = ("TMPDIR", "TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")
    record = "".join(f"{name}={os.environ.get(name, '')}\\n" for name in names)
    (Path(trainer.args.output_dir).parent / "environment.txt").write_text(record)
    return trainer
"""


def hostile_trees(tmp_path: Path, out: Path) -> tuple[Path, Path, Path]:
    """The base tree, the hostile head tree, and the host file it aims at (root's, 0600)."""
    victim = tmp_path / "host-credentials"
    victim.write_text("root only\n", encoding="utf-8")
    victim.chmod(0o600)
    host_folder = tmp_path / "host-folder"
    host_folder.mkdir(mode=0o700)
    (host_folder / "runner.key").write_text("key\n", encoding="utf-8")
    targets = {"victim": str(victim), "host_folder": str(host_folder), "out": str(out),
               "shared_cache": str(tmp_path / "shared-tmp" / "torchinductor_root" / "xx")}  # fmt: skip
    custom = (REPO / "configs" / "tiny" / "custom.yaml").read_text(encoding="utf-8")
    hostile = custom.replace("canary_action.train.builtin.example_factory", "hostile")
    recorder = custom.replace("canary_action.train.builtin.example_factory", "recorder")
    base = tree(tmp_path, "base", recorder, **{"setup.sh": "true\n", "recorder.py": RECORDER})
    head = tree(tmp_path, "head", hostile, **{"hostile.py": HOSTILE, "setup.sh": HOSTILE_SETUP,
                                              "targets.json": json.dumps(targets)})  # fmt: skip
    for folder in (tmp_path, out.parent):  # the head's user reads its tree's and its targets' folders
        folder.chmod(0o755)
    return base, head, victim


def test_a_hostile_head_side_crosses_nothing_and_its_slowdown_is_still_a_regression(tmp_path: Path) -> None:
    out = tmp_path / "out"
    base, head, victim = hostile_trees(tmp_path, out)
    env = {**os.environ, "INPUT_GITHUB-TOKEN": SECRET, "TMPDIR": str(tmp_path / "shared-tmp")}
    (tmp_path / "shared-tmp").mkdir(mode=0o1777)
    (tmp_path / "shared-tmp").chmod(0o1777)
    done = canary_pair(base, head, out, "--setup", "sh setup.sh", env=env)

    assert done.returncode == 1, done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert result["verdict"] == "regression"
    assert next(c for c in result["checks"] if c["name"] == "step_time")["status"] == "fail"
    pairs = sorted(out.iterdir())
    first = pairs[0]
    [attack] = (first / "head").rglob("attack.txt")
    assert attack.read_text(encoding="utf-8") == "refused"  # its SIGSTOP of the base side
    tried = json.loads(next((first / "head").rglob("tried.json")).read_text(encoding="utf-8"))
    # It could plant them: what matters is that nothing follows them.
    assert tried["link to a host file"] == tried["capture"] == "done"

    # Nothing written through a link, and nothing but plain folders and files left for the upload.
    assert victim.read_text(encoding="utf-8") == "root only\n"
    leftovers = [p for p in out.rglob("*") if p.is_symlink() or not (p.is_dir() or p.is_file())]
    assert leftovers == []
    assert all(p.stat().st_nlink == 1 for p in out.rglob("*") if p.is_file())
    said = " ".join(result["notes"])
    for planted in (
        "error.log (a link)",
        "creds (a link)",
        "host (a link)",
        "pipe (a named pipe (FIFO))",
        "captures/step-000001-rank0/weights.safetensors (a link)",
    ):
        assert planted in said, result["notes"]
    # What it left as a capture is data a replay refuses (never unpickled), with the replay's exit code for it.
    replayed = subprocess.run([sys.executable, "-m", "canary_action", "replay", str(first / "head")],
                              capture_output=True, text=True, cwd=tmp_path, timeout=120, check=False)  # fmt: skip
    assert replayed.returncode == 2, replayed.stderr[-2000:]
    assert "config.json: not JSON this replay reads" in replayed.stderr
    # A hard link to root's file: refused where fs.protected_hardlinks is on (most distributions), removed elsewhere.
    assert tried["hard link"] == "PermissionError" or "hard (a file of 2 hard links)" in said
    assert SECRET not in done.stdout + done.stderr
    # Its own processes ended with the pair: the trainer's daemon and the setup's.
    pids = [int(p.read_text(encoding="utf-8")) for p in out.rglob("*daemon.pid")]
    assert len(pids) >= 2
    assert not [pid for pid in pids if _alive(pid)]
    head_uid = json.loads((first / "pair.json").read_text(encoding="utf-8"))["head_uid"]
    assert live_processes(head_uid) == []
    # The base side's compile caches and temporary folder were its own: inside a 0700 folder of root's in the
    # shared temporary folder, not the shared one the head planted in.
    recorded = dict(
        line.split("=", 1) for line in (first / "base" / "environment.txt").read_text(encoding="utf-8").splitlines()
    )
    shared = tmp_path / "shared-tmp"
    for name in ("TMPDIR", "TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR"):
        assert Path(recorded[name]).relative_to(shared).parts[0].startswith("rlhf-canary-"), recorded
    assert (shared / "torchinductor_root" / "xx" / "planted.py").is_file()  # it planted there, for nobody


def test_a_head_whose_setup_fails_leaves_no_process_and_its_links_are_never_read(tmp_path: Path) -> None:
    """The head's setup command forks a daemon and fails: the pair returned with the daemon still running (in a
    bisect it lived through later pairs)."""
    out = tmp_path / "out"
    base, head, victim = hostile_trees(tmp_path, out)
    env = {**os.environ, "INPUT_GITHUB-TOKEN": SECRET, "FAIL_SETUP": "1"}
    done = canary_pair(base, head, out, "--setup", "sh setup.sh", env=env)

    assert done.returncode == 2, done.stderr[-3000:]
    assert "the setup command failed" in done.stderr
    assert SECRET not in done.stdout + done.stderr
    [pid_file] = out.rglob("setup-daemon.pid")
    pid = int(pid_file.read_text(encoding="utf-8"))
    deadline = time.monotonic() + 5
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(pid)
    assert victim.read_text(encoding="utf-8") == "root only\n"
    assert [p for p in out.rglob("*") if p.is_symlink()] == []


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, IndexError):
        return False
