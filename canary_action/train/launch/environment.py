"""What a child canary process gets to see: its code tree on the import path after the installed packages,
what a setup command installed for it, and no token.

Training runs code from the pull request (a factory, a reward function, a collator). It runs in a child
process whose environment holds none of the action's inputs, the runner's tokens or its command files, and
that cannot read its parent's memory or environment: the action makes itself non-dumpable (`seal_process`),
which keeps /proc/PPID/environ, /proc/PPID/mem and /proc/PPID/maps from a process of the same user that lacks
CAP_SYS_PTRACE and CAP_SYS_ADMIN, and children start with no capability but the file-access ones
(`unprivileged`: a Docker action runs as root; it keeps what writing the runner-owned checkout and caches
needs). What it cannot stop: the Docker socket the runner mounts into every Docker action is root on the
machine, for any process that can open it; hence no token in the job that runs pull request code, and an
ephemeral machine (docs/runner-setup.md). That is defence in depth, not a boundary: code from an
untrusted pull request belongs in a job that was given no write token at all (docs/action.md, "Trust").

Every file of a pull request is code, its top-level folders too: a `torch/` or `accelerate/` beside the
config must not replace the real one. So the child runs with PYTHONSAFEPATH (`python -m` and `-c` put no
working directory first on the path, in the child and in every process it starts), and the tree — the
checked-out repository, or one side of a lockstep pair — is appended to the path by canary_action's own
import (CANARY_CODE_TREE), after the standard library and the installed packages: a team's `team_pipeline`
imports, a `torch/` in the tree does not. Nothing inside another tree is on the path.

A setup command (the action's `setup` input, `canary pair --setup`) runs in the tree inside a virtual
environment of its own, layered over the image's: a `.pth` file puts the image's site-packages after the
environment's own, so what the command installs wins and everything else (torch, TRL, the canary) is the image's.
The child then runs with that environment's Python, and the fingerprint lists what the command installed
(fingerprint.py reads CANARY_SETUP_PREFIX), so a dependency bump in a pull request shows as a suspect.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import site
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from canary_action.errors import ConfigError, TrainingError, UsageError
from canary_action.train.launch.uids import HEAD_UID_ENV, free_uid, process_statuses

#: Variables a child never gets: the action's inputs (the token is one), the runner's credentials, and the
#: runner's command files' paths. Leaving the paths out is defence in depth, not a boundary: the files sit in a
#: known folder of the runner (/github/file_commands in a Docker action), and a child keeps the file-access
#: capabilities, so one that looks can still write GITHUB_ENV or GITHUB_PATH and change the job's later steps.
#: Hence the measure job's later steps hold no token and run nothing they trust (docs/action.md, "Trust").
SECRET_PREFIXES: Final = ("INPUT_", "ACTIONS_")
SECRET_NAMES: Final = frozenset({
    "GITHUB_TOKEN", "GH_TOKEN", "CANARY_GITHUB_TOKEN",
    "GITHUB_ENV", "GITHUB_PATH", "GITHUB_OUTPUT", "GITHUB_STATE", "GITHUB_STEP_SUMMARY",
})  # fmt: skip
SETUP_PREFIX_ENV: Final = "CANARY_SETUP_PREFIX"
#: The code tree a child appends to sys.path when canary_action is imported (canary_action/__init__.py).
CODE_TREE_ENV: Final = "CANARY_CODE_TREE"
_PR_SET_DUMPABLE: Final = 4
_PR_CAPBSET_DROP: Final = 24
_PR_SET_NO_NEW_PRIVS: Final = 38
_PR_SET_CHILD_SUBREAPER: Final = 36
_PR_CAP_AMBIENT: Final = 47
_PR_CAP_AMBIENT_CLEAR_ALL: Final = 4
_CAP_LAST_CAP: Final = Path("/proc/sys/kernel/cap_last_cap")
#: CAP_CHOWN, CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER, CAP_FSETID: root's access to files it does not own
#: (the runner user's checkout, caches). Neither lets a process read another's /proc environ or memory.
_FILE_CAPABILITIES: Final = frozenset({0, 1, 2, 3, 4})
_CAPABILITY_VERSION_3: Final = 0x20080522
_PR_SET_KEEPCAPS: Final = 8
_PR_CAP_AMBIENT_RAISE: Final = 2
#: CAP_DAC_READ_SEARCH: read any file and search any folder, write none it does not own.
_CAP_DAC_READ_SEARCH: Final = 2
_SETUP_TAIL_LINES: Final = 20
_KILL_ROUNDS: Final = 40
#: Where any user may write: a head side's files left there are removed with its processes.
SHARED_TEMPORARY: Final = ("/tmp", "/var/tmp", "/dev/shm")


def scrubbed(env: Mapping[str, str]) -> dict[str, str]:
    """`env` without the action's inputs, the runner's ACTIONS_* credentials and any GitHub token."""
    return {k: v for k, v in env.items() if not k.upper().startswith(SECRET_PREFIXES) and k.upper() not in SECRET_NAMES}


def child_environment(tree: Path, trees: Sequence[Path] = (), base: Mapping[str, str] | None = None) -> dict[str, str]:
    """A scrubbed copy of `base` (this process's environment) whose import path ends with `tree`, puts no working
    directory first, and has no entry inside `trees` (the other side of a pair)."""
    env = scrubbed(os.environ if base is None else base)
    others = [t.resolve() for t in (tree, *trees)]
    inherited = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and not _inside(Path(p), others)]
    env["PYTHONPATH"] = os.pathsep.join(inherited)
    if not inherited:
        del env["PYTHONPATH"]
    env.update({"PYTHONSAFEPATH": "1", CODE_TREE_ENV: str(tree)})
    return env


def safe_path_environment(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """For processes the canary starts itself (the launcher's ranks): no working directory first on their path;
    the code tree (this process's, or the working directory of a `canary run` at a terminal) appended last."""
    env = dict(os.environ if base is None else base)
    env.setdefault(CODE_TREE_ENV, str(Path.cwd()))
    env["PYTHONSAFEPATH"] = "1"
    return env


def launch_code_tree() -> Path | None:
    """The code tree that safe_path_environment gives the processes the canary starts (None: none)."""
    tree = safe_path_environment()[CODE_TREE_ENV]
    return Path(tree) if tree else None


def seal_process() -> None:
    """Make this process non-dumpable: a process without capabilities (a child started `unprivileged`, or any
    unprivileged one) can then read neither its /proc/PID/environ nor its memory, where the token is."""
    _prctl(_PR_SET_DUMPABLE, 0)


def unprivileged() -> None:
    """preexec_fn of every child that runs pull request code: leave only the file-access capabilities in its
    bounding set and none inheritable or ambient, so that a child running as root (a Docker action) gets no
    other back at exec, and let nothing it runs gain privileges (setuid binaries, file capabilities). Not
    root: there is nothing to drop, and the refusals change nothing."""
    last = int(_CAP_LAST_CAP.read_text()) if _CAP_LAST_CAP.is_file() else 40
    for capability in range(last + 1):
        if capability not in _FILE_CAPABILITIES:
            _prctl(_PR_CAPBSET_DROP, capability)
    _prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL)
    _clear_inheritable()
    _prctl(_PR_SET_NO_NEW_PRIVS, 1)


@dataclass(frozen=True)
class Identity:
    """Who a child that runs a tree's code is: the coordinator's own user (`uid` None), or a user of its own that
    may read every file but write only what it was given (`give`) — so that it can neither signal, trace nor read
    the memory of a process of another user, nor write another's files. Linux, started by root."""

    uid: int | None = None

    def preexec(self) -> None:
        """preexec_fn: `unprivileged`, then this user (groups none, CAP_DAC_READ_SEARCH alone, kept across exec)."""
        unprivileged()
        if self.uid is None:
            return
        os.setgroups([])
        os.setresgid(self.uid, self.uid, self.uid)
        _prctl(_PR_SET_KEEPCAPS, 1)
        os.setresuid(self.uid, self.uid, self.uid)
        _set_capabilities(1 << _CAP_DAC_READ_SEARCH)
        _prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_RAISE, _CAP_DAC_READ_SEARCH)

    def give(self, path: Path) -> None:
        """Make `path` (a folder this side writes: its run directory, its scratch) this user's."""
        if self.uid is not None:
            os.chown(path, self.uid, self.uid)

    def environment(self, env: Mapping[str, str], home: Path) -> dict[str, str]:
        """`env` for this user: a home (and so caches: ~/.cache, ~/.triton, the datasets cache) of its own in
        `home`, the Hugging Face hub cache still the one everyone reads. Unchanged for the coordinator's user."""
        if self.uid is None:
            return dict(env)
        hub = env.get("HF_HOME") or str(Path(env.get("XDG_CACHE_HOME") or Path(env.get("HOME", "/root")) / ".cache")
                                          / "huggingface")  # fmt: skip
        user = f"rlhf-canary-{self.uid}"  # getpass.getuser() reads it first: the uid has no passwd entry
        return {**env, "HOME": str(home), "XDG_CACHE_HOME": str(home / ".cache"), "HF_HOME": hub,
                "HF_DATASETS_CACHE": str(home / "datasets"), "USER": user, "LOGNAME": user}  # fmt: skip

    def end_leftovers(self) -> list[int]:
        """Kill every process of this user (what a side's code left running: a daemon forked off), as the user
        itself: kill(-1) reaches its own processes only; again while one is found alive (a process forking while
        the signal goes round). The processes still alive after that (none, in practice); nothing to do for the
        coordinator's user. Then what the user left in the shared temporary folders is removed too."""
        if self.uid is None:
            return []
        for _ in range(_KILL_ROUNDS):
            pid = os.fork()
            if pid == 0:  # pragma: no cover - the child
                try:
                    os.setresgid(self.uid, self.uid, self.uid)
                    os.setresuid(self.uid, self.uid, self.uid)
                    os.kill(-1, signal.SIGKILL)
                finally:
                    os._exit(0)
            os.waitpid(pid, 0)
            if not live_processes(self.uid):
                break
            time.sleep(0.05)
        left = live_processes(self.uid)
        if not left:
            self._remove_shared_files()
        return left

    def _remove_shared_files(self) -> None:
        """What this user left at the top of the shared temporary folders (files, folders, links: never followed),
        so that nothing of one pair's head side waits there for a later pair's."""
        for shared in SHARED_TEMPORARY:
            with contextlib.suppress(OSError), os.scandir(shared) as entries:
                for entry in entries:
                    with contextlib.suppress(OSError):
                        if entry.stat(follow_symlinks=False).st_uid != self.uid:
                            continue
                        if entry.is_dir(follow_symlinks=False):
                            shutil.rmtree(entry.path, ignore_errors=True)
                        else:
                            Path(entry.path).unlink()

    def reclaim(self, path: Path) -> None:
        """Give `path` (a side's run folder, its processes ended) and all in it back to this process's user, so that
        a later pair's head side, even of the same uid, cannot change it. Links are changed, never followed."""
        if self.uid is None or not path.is_dir():
            return
        with contextlib.suppress(OSError):
            for _, dirs, files, parent_fd in os.fwalk(path, follow_symlinks=False):
                os.chown(parent_fd, os.geteuid(), os.getegid())
                for name in [*dirs, *files]:
                    os.chown(name, os.geteuid(), os.getegid(), dir_fd=parent_fd, follow_symlinks=False)


class Orphans:
    """This process's children that were not there before (`adopting_orphans`): what a child left running."""

    def __init__(self, before: set[int]) -> None:
        self.before = before

    def end(self) -> list[int]:
        """Kill every child of this process that was not there before, and, as their own children are adopted here
        when they die, theirs, until none is left; the pids killed."""
        killed: list[int] = []
        for _ in range(_KILL_ROUNDS):
            new = [pid for pid in children_of(os.getpid()) if pid not in self.before and pid not in killed]
            if not new:
                break
            for pid in new:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            time.sleep(0.05)
            for pid in killed:  # reap ours; never waitpid(-1): a Popen elsewhere may be waiting on its own
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(pid, os.WNOHANG)
        return killed


@contextlib.contextmanager
def adopting_orphans() -> Iterator[Orphans]:
    """This process adopts the orphans of what it starts in the block (PR_SET_CHILD_SUBREAPER): a daemon a training
    child forked, double-forked or not, stays this process's descendant, which Orphans.end kills. Linux; elsewhere
    only direct children are found."""
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)
    yield Orphans(set(children_of(os.getpid())))


def children_of(pid: int) -> list[int]:
    """The running processes whose parent is `pid` (zombies left out), from /proc."""
    return [
        child for child, fields in process_statuses() if fields.get("PPid", "").strip() == str(pid) and _running(fields)
    ]


def live_processes(uid: int) -> list[int]:
    """The processes running as `uid` (real, effective or saved), zombies left out (they run nothing)."""
    return [
        pid for pid, fields in process_statuses() if str(uid) in fields.get("Uid", "").split()[:3] and _running(fields)
    ]


def _running(fields: dict[str, str]) -> bool:
    return not fields.get("State", "").strip().startswith("Z")


def private_temporary(scratch: Path, identity: Identity | None = None) -> dict[str, str]:
    """A child's own temporary folder and compile caches, inside its 0700 scratch: torch inductor and Triton keep
    their caches under the shared temporary folder by default and load a cached module that already exists, so a
    head side could plant code there that the base side (or a later pair's) would load as root. Made 0700 in
    `scratch`, given to `identity`; the variables that point a child at them."""
    identity = identity or Identity()
    places = {"TMPDIR": scratch / "tmp", "TORCHINDUCTOR_CACHE_DIR": scratch / "inductor",
              "TRITON_CACHE_DIR": scratch / "triton"}  # fmt: skip
    for place in places.values():
        place.mkdir(mode=0o700)
        identity.give(place)
    return {name: str(place) for name, place in places.items()}


def head_identity(env: Mapping[str, str] | None = None) -> Identity:
    """The head side's identity: a user of its own where the coordinator is root on Linux (CANARY_PAIR_HEAD_UID,
    default a free uid from DEFAULT_HEAD_UID up), unless that variable is `off`; else the coordinator's."""
    value = (os.environ if env is None else env).get(HEAD_UID_ENV, "").strip()
    if value == "off" or not sys.platform.startswith("linux") or os.geteuid() != 0:
        return Identity()
    if value and not (value.isdigit() and 0 < int(value) < 2**31):
        raise UsageError(
            f"{HEAD_UID_ENV}={value!r} is not a user id",
            fix="give a numeric uid no other process on this machine uses, or `off` to run both sides as root",
        )
    return Identity(int(value) if value else free_uid())


def _set_capabilities(bits: int) -> None:
    """capset(2): effective, permitted and inheritable are `bits` (capabilities 0-31), nothing above."""
    header = (ctypes.c_uint32 * 2)(_CAPABILITY_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)(bits, bits, bits, 0, 0, 0)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.capset(header, data) != 0:
        raise OSError(ctypes.get_errno(), "capset failed")


def _clear_inheritable() -> None:
    """capset(2) with the inheritable set emptied: root's exec keeps inheritable capabilities past the bounding
    set (older Docker releases passed the default set as inheritable)."""
    if not sys.platform.startswith("linux"):
        return
    header = (ctypes.c_uint32 * 2)(_CAPABILITY_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()  # two (effective, permitted, inheritable) triples: 64 capability bits
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.capget(header, data) == 0:
        data[2] = data[5] = 0
        libc.capset(header, data)


def _prctl(option: int, arg: int, arg2: int = 0) -> None:
    """prctl(2) where there is one (Linux); a refusal (EPERM: nothing to drop) changes nothing and is fine."""
    if not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(ctypes.c_int(option), ctypes.c_ulong(arg), ctypes.c_ulong(arg2), ctypes.c_ulong(0), ctypes.c_ulong(0))


def prepare_setup(
    command: str, tree: Path, prefix: Path, env: Mapping[str, str], identity: Identity | None = None
) -> tuple[Path, dict[str, str]]:
    """Run the setup command in `tree` inside a new environment at `prefix`, as `identity` (default: this
    process's user, unprivileged); (its python, the child env).

    Raises ConfigError (exit 2) when the command fails, with the end of its output.
    """
    identity = identity or Identity()
    # Made before any of the tree's code runs, and so that none of it can: isolated interpreters (-I: no working
    # directory or PYTHON* variable on the import path, where a tree's `venv.py` or `sysconfig.py` would shadow the
    # standard library's) started outside the tree, with the child's scrubbed environment, unprivileged.
    prefix.parent.mkdir(parents=True, exist_ok=True)
    identity.give(prefix.parent)
    venv = [sys.executable, "-I", "-m", "venv", "--without-pip", str(prefix)]
    _environment_step(venv, prefix.parent, env, identity)
    python = prefix / "bin" / "python"
    purelib = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    own = Path(_environment_step([str(python), "-I", "-c", purelib], prefix.parent, env, identity).strip())
    image = [p for p in (*site.getsitepackages(), site.getusersitepackages()) if Path(p).is_dir()]
    # addsitedir, not a bare path: the image's own .pth files (an editable install's finder) must run too.
    lines = "".join(f"import site; site.addsitedir({p!r})\n" for p in image)
    (own / "_rlhf_canary_image.pth").write_text(lines, encoding="utf-8")
    child = {**env, "VIRTUAL_ENV": str(prefix), "PATH": f"{prefix / 'bin'}{os.pathsep}{env.get('PATH', '')}",
             SETUP_PREFIX_ENV: str(prefix)}  # fmt: skip
    # `pip` inside the environment is the image's pip module run by this environment's python.
    (prefix / "bin" / "pip").write_text(f'#!/bin/sh\nexec "{python}" -m pip "$@"\n', encoding="utf-8")
    (prefix / "bin" / "pip").chmod(0o755)
    done = subprocess.run(
        ["/bin/sh", "-c", command], cwd=tree, env=child, capture_output=True, text=True, check=False,
        preexec_fn=identity.preexec,  # the setup command is the pull request's code too
    )  # fmt: skip
    print(done.stdout + done.stderr, file=sys.stderr, end="")
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-_SETUP_TAIL_LINES:])
        raise ConfigError(
            f"the setup command failed in {tree} (exit status {done.returncode}): {command}",
            errors=[tail] if tail else [],
            fix="fix the `setup` input (it runs with `sh -c` in the checked-out repository, pip installing into a "
            "per-run environment over the image's packages)",
        )
    return python, child


def _environment_step(command: list[str], cwd: Path, env: Mapping[str, str], identity: Identity) -> str:
    """One step of making the setup environment; its stdout, or TrainingError (exit 3: this machine's Python
    could not make it, no fault of the pull request) with the end of its output."""
    done = subprocess.run(
        command, cwd=cwd, env=dict(env), capture_output=True, text=True, check=False,
        preexec_fn=identity.preexec,  # one thread here: no lock can be held across the fork
    )  # fmt: skip
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-_SETUP_TAIL_LINES:])
        raise TrainingError(
            f"could not make the setup command's environment ({' '.join(command[1:4])}): exit {done.returncode}"
            + (f"\n{tail}" if tail else ""),
            fix="the image's Python needs its venv module (Debian: python3-venv); read the output above",
        )
    return done.stdout


def _inside(path: Path, trees: Sequence[Path]) -> bool:
    resolved = path.resolve()
    return any(resolved == t or t in resolved.parents for t in trees)
