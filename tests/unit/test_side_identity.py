"""A lockstep head side's user of its own (environment.Identity) and its own view of its tree (private_tree.py).

Run as root (the action's container, and this test machine), the head side may read everything and write only what
it was given: it cannot signal the base side, nor write the base side's files, the pair's results or either tree.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from canary_action.errors import UsageError
from canary_action.train.launch.environment import Identity, head_identity
from canary_action.train.launch.private_tree import private_tree, remove_private_tree
from canary_action.train.launch.uids import (
    DEFAULT_HEAD_UID,
    HEAD_UID_ENV,
    HEAD_UIDS,
    LOCK_DIR_ENV,
    free_uid,
    lock_folder,
    lock_path,
)

as_root = pytest.mark.skipif(
    not sys.platform.startswith("linux") or os.geteuid() != 0, reason="a user of its own needs root on Linux"
)
HEAD = Identity(free_uid())  # never a uid another pair on this machine uses: its leftovers are killed by uid


def as_head(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-I", "-c", code, *args],
        capture_output=True, text=True, timeout=60, check=False, preexec_fn=HEAD.preexec,
    )  # fmt: skip


def test_the_head_side_is_a_user_of_its_own_only_as_root() -> None:
    as_root = sys.platform.startswith("linux") and os.geteuid() == 0
    uid = head_identity({}).uid
    assert uid in range(DEFAULT_HEAD_UID, DEFAULT_HEAD_UID + HEAD_UIDS) if as_root else uid is None
    assert head_identity({HEAD_UID_ENV: "off"}).uid is None
    if as_root:
        assert head_identity({HEAD_UID_ENV: "70000"}).uid == 70000
        with pytest.raises(UsageError, match="is not a user id"):
            head_identity({HEAD_UID_ENV: "nobody"})


@as_root
def test_the_head_user_reads_everything_writes_nothing_of_others_and_cannot_signal_them(tmp_path: Path) -> None:
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    (private / "config.yaml").write_text("name: x\n", encoding="utf-8")
    results = tmp_path / "results.json"
    results.write_text("{}", encoding="utf-8")
    base_side = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        probe = (
            "import os, signal, sys\n"
            "print(os.getuid(), open(sys.argv[1]).read().strip())\n"
            "for act in (lambda: open(sys.argv[2], 'w'), lambda: os.kill(int(sys.argv[3]), signal.SIGSTOP)):\n"
            "    try:\n"
            "        act(); print('allowed')\n"
            "    except PermissionError:\n"
            "        print('refused')\n"
        )
        done = as_head(probe, str(private / "config.yaml"), str(results), str(base_side.pid))
    finally:
        base_side.kill()
        base_side.wait()
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:3] == [f"{HEAD.uid} name: x", "refused", "refused"]
    assert results.read_text(encoding="utf-8") == "{}"


@as_root
def test_a_forked_off_process_of_the_head_user_ends_with_the_side(tmp_path: Path) -> None:
    started = tmp_path / "daemon.pid"
    tmp_path.chmod(0o777)
    done = as_head(
        "import subprocess, sys\n"
        "quiet = subprocess.DEVNULL\n"
        "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'], start_new_session=True,\n"
        "                     stdin=quiet, stdout=quiet, stderr=quiet)\n"
        "open(sys.argv[1], 'w').write(str(p.pid))\n",
        str(started),
    )
    assert done.returncode == 0, done.stderr
    pid = int(started.read_text(encoding="utf-8"))
    assert _alive(pid)  # outside the side's process group: the side's own end would not take it
    HEAD.end_leftovers()
    deadline = time.monotonic() + 10
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(pid)


def _alive(pid: int) -> bool:
    """Running (a zombie, waiting for its parent to collect it, has ended)."""
    stat = Path(f"/proc/{pid}/stat")
    try:
        return stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


@as_root
def test_the_head_sides_view_of_its_tree_is_writable_to_it_and_leaves_the_tree_alone(tmp_path: Path) -> None:
    tree = tmp_path / "head"
    (tree / "pkg").mkdir(parents=True)
    (tree / "pkg" / "model.py").write_text("SPEED = 1\n", encoding="utf-8")
    (tree / "out").mkdir()  # the pair's output folder inside the tree: left out
    (tree / "out" / "base.json").write_text("{}", encoding="utf-8")
    outside = tmp_path / "outside"
    outside.mkdir()
    (tree / "linked").symlink_to(outside)  # a link out of the tree: kept as a link, its target never given away

    view = private_tree(tree, HEAD, exclude=[tree / "out"])

    assert (view / "pkg" / "model.py").stat().st_ino == (tree / "pkg" / "model.py").stat().st_ino  # linked, not copied
    assert not (view / "out").exists()
    assert (view / "linked").is_symlink()
    assert outside.stat().st_uid == 0
    assert (view / "pkg").stat().st_uid == HEAD.uid
    done = as_head(
        "import pathlib, sys\n"
        "view = pathlib.Path(sys.argv[1])\n"
        "(view / 'build').mkdir(); (view / 'build' / 'wheel').write_text('x')\n"  # pip install . builds in the tree
        "try:\n"
        "    (view / 'pkg' / 'model.py').write_text('SPEED = 2')\n"
        "except PermissionError:\n"
        "    print('the tree files stay read-only')\n",
        str(view),
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "the tree files stay read-only"
    assert (tree / "pkg" / "model.py").read_text(encoding="utf-8") == "SPEED = 1\n"
    assert not (tree / "build").exists()
    remove_private_tree(view)
    assert sorted(p.name for p in tree.iterdir()) == ["linked", "out", "pkg"]


@as_root
def test_the_head_user_is_one_no_process_runs_as() -> None:
    """Two pairs on one machine (a test suite beside a pair, seen in CI) shared uid 61471, and the first to end
    killed every process of that uid: the other's head side too. The default is a uid no process uses."""
    taken = free_uid()
    holder = subprocess.Popen(["sleep", "60"], preexec_fn=Identity(taken).preexec)  # noqa: PLW1509
    try:
        deadline = time.monotonic() + 10
        while Path(f"/proc/{holder.pid}/status").read_text().find(f"Uid:\t{taken}") < 0:
            assert time.monotonic() < deadline, "the holder never ran as its uid"
            time.sleep(0.01)
        assert free_uid() != taken
        assert head_identity({}).uid != taken
    finally:
        holder.kill()
        holder.wait()


@pytest.fixture
def own_lock_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The uid locks of this test in a folder of its own (this process's and its children's temporary folder), not
    in the machine's, where real pairs hold theirs."""
    folder = tmp_path / "locks"
    folder.mkdir(mode=0o700)
    monkeypatch.setenv(LOCK_DIR_ENV, str(folder))
    return folder


def test_a_uid_another_pair_has_claimed_is_taken_though_no_process_runs_as_it_yet(own_lock_folder: Path) -> None:
    """Two pairs started at the same moment (the test suite runs two at a time) both read /proc before either
    head side ran: the uid is claimed by a lock the first pair holds until it ends, and the second takes another."""
    first = DEFAULT_HEAD_UID + HEAD_UIDS - 1  # one uid alone: the second claim has nowhere else to go
    claimant = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\nfrom canary_action.train.launch.uids import free_uid\n"
         f"print(free_uid({first}, 1), flush=True)\ntime.sleep(60)"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert claimant.stdout is not None
        assert claimant.stdout.readline().strip() == str(first)
        with pytest.raises(UsageError, match="held by another pair"):
            free_uid(first, 1)
    finally:
        claimant.kill()
        claimant.communicate()
    assert lock_path(first).parent == own_lock_folder
    assert free_uid(first, 1) == first  # the lock ends with its process
    with pytest.raises(UsageError):  # and this process now holds it: not handed out twice
        free_uid(first, 1)


def test_a_link_planted_where_a_uids_lock_goes_is_not_followed(tmp_path: Path, own_lock_folder: Path) -> None:
    """Were a link planted where a lock goes, that uid is taken, and the file it points to is neither created nor
    opened."""
    first = DEFAULT_HEAD_UID + HEAD_UIDS - 2
    target = tmp_path / "not-to-be-created"
    (own_lock_folder / lock_path(first).name).symlink_to(target)
    with pytest.raises(UsageError, match="held by another pair"):
        free_uid(first, 1)
    assert not target.exists()


def test_the_uid_locks_are_in_a_folder_only_the_coordinators_user_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """They sat in the shared temporary folder, where a head side could pre-create all 4,096 (and where
    fs.protected_regular is on, root could then open none). Now: a 0700 folder of this user's, and one that another
    user could write, or a link, is refused by name."""
    monkeypatch.delenv(LOCK_DIR_ENV, raising=False)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    folder = lock_folder()
    assert folder.parent != Path(tempfile.gettempdir()) or folder.name.startswith("rlhf-canary-head-uids-")
    info = folder.lstat()
    assert (info.st_uid, info.st_mode & 0o777) == (os.geteuid(), 0o700)
    assert lock_path(5).parent == folder

    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    link = tmp_path / "link"
    link.symlink_to(shared)
    for bad in (shared, link):
        monkeypatch.setenv(LOCK_DIR_ENV, str(bad))
        with pytest.raises(UsageError, match="cannot go in"):
            lock_folder()


@as_root
def test_each_side_has_its_own_temporary_folder_and_compile_caches_the_other_cannot_write(tmp_path: Path) -> None:
    """torch inductor and Triton keep their caches under the shared temporary folder and load a module already there:
    a head side's planted module was imported by root. Each side now has its own, in its own 0700 scratch."""
    from canary_action.train.launch.environment import private_temporary

    base_scratch, head_scratch = tmp_path / "base", tmp_path / "head"
    base_scratch.mkdir(mode=0o700)
    head_scratch.mkdir(mode=0o700)
    HEAD.give(head_scratch)
    base_env, head_env = private_temporary(base_scratch), private_temporary(head_scratch, HEAD)
    assert set(base_env) == {"TMPDIR", "TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR"}
    for name, place in base_env.items():
        assert Path(place).parent == base_scratch
        assert Path(head_env[name]).parent == head_scratch
        assert (Path(place).stat().st_mode & 0o777, Path(place).stat().st_uid) == (0o700, 0)
        assert Path(head_env[name]).stat().st_uid == HEAD.uid
    plant = "import sys\nfrom pathlib import Path\nfor folder in sys.argv[1:]:\n" \
            "    try:\n        (Path(folder) / 'planted.py').write_text('x')\n        print('written')\n" \
            "    except PermissionError:\n        print('refused')\n"  # fmt: skip
    done = as_head(plant, *base_env.values(), *head_env.values())
    assert done.stdout.split() == ["refused"] * 3 + ["written"] * 3, done.stderr
