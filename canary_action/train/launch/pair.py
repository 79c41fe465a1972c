"""A lockstep pair: the base commit's code tree and the PR's, trained side by side on this machine, taking turns.

    canary pair ──► load both configs (each from its own tree) ──► start two pair_side.py processes
        (each: its tree on the import path, after the installed packages, and as the working directory; the other
        tree nowhere)
        ──► both load their model ──► rounds: in a random order, each side trains chunk_steps steps while the
        other waits ──► one side ends (done, NaN, crash) ──► the other is stopped ──► pair.json

Only one side computes at a time, and the waiting lies outside every measured step, so whatever drifts on the
machine (load, clocks, thermals) hits both sides alike within a round; compare/paired.py judges round by round.
Both sides keep the memory they free (glibc malloc tuned through MALLOC_ALLOCATOR_ENV): by default glibc hands
large freed blocks back to the kernel and maps them again at the next batch, so every step pays page faults
whose cost depends on the process's allocation history — measured on a shared 2-core VM, identical sides then
differed by a process-level spread of 3.5 %; with the tuning, 0.9 % (docs/benchmarks.md, "Lockstep A/B"). Both
sides are also pinned to the same CPUs: only one computes at a time, so it costs nothing.
Both sides write their own complete metrics.json whatever happens. This module starts processes and passes
turns; it imports no torch.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import random
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Final

from canary_action.config.load import LoadedConfig, load_config
from canary_action.errors import CanaryError, ConfigError, RunInterrupted, TrainingError, UsageError
from canary_action.evaluate.client import Evaluator
from canary_action.files import FileRefusedError, remove_unsafe, tail_inside, write_new_inside
from canary_action.metrics import schema as m
from canary_action.metrics.heldout import HeldoutEval
from canary_action.metrics.pair import PairRecord, ProcessSummary, Round, Side, SideEnd
from canary_action.metrics.stream import rebuild_killed
from canary_action.train.launch import heldout
from canary_action.train.launch.environment import (
    Identity,
    child_environment,
    head_identity,
    prepare_setup,
    private_temporary,
)
from canary_action.train.launch.outcome import new_run_dir
from canary_action.train.launch.pair_side import ERROR_LOG, SideSpec
from canary_action.train.launch.private_tree import private_tree, remove_private_tree
from canary_action.train.launch.tree_diff import diff_trees
from canary_action.train.launch.uids import HEAD_UID_ENV

SIDES: Final[tuple[Side, Side]] = ("base", "head")
#: glibc malloc: serve allocations below 256 MiB from the heap, never trim it below 1 GiB, grow it 256 MiB at a
#: time — freed tensor memory is reused instead of unmapped and faulted in again. A value already set wins;
#: CANARY_PAIR_MALLOC=default leaves glibc as it is (another allocator preloaded, or to measure the difference).
MALLOC_OPT_OUT: Final = "CANARY_PAIR_MALLOC"
MALLOC_ALLOCATOR_ENV: Final = {
    "MALLOC_MMAP_THRESHOLD_": str(256 << 20),
    "MALLOC_TRIM_THRESHOLD_": str(1 << 30),
    "MALLOC_TOP_PAD_": str(256 << 20),
}
DEFAULT_CHUNK_STEPS: Final = 2
#: Beyond timeout_minutes of training per side: process start, imports and model loading (a first download).
START_MARGIN_S: Final = 30 * 60
_STOP_GRACE_S: Final = 60
_LOG_TAIL_BYTES: Final = 16 * 1024
#: A turn message ("wait 12 cpu") is short: a longer line is not the canary's side talking.
_TURN_LINE_MAX: Final = 80
_DEVICES: Final = ("cpu", "cuda", "mps", "xpu")
_NOW_GRACE_S: Final = 5  # a chunk of a tiny canary takes under a second; a hung one never ends


@dataclass(frozen=True)
class PairOutcome:
    pair_dir: Path
    record: PairRecord
    base: Path
    head: Path
    """The head side's metrics.json (the PR's code): the run a paired comparison judges."""
    error: CanaryError | None = None
    """The head side refused its config (ConfigError), crashed, or the pair hung (TrainingError); what both
    sides measured is written. A failing base side is no error of the pull request: it is in `notes`."""
    notes: list[str] = field(default_factory=list)
    """For the comparison's notes: how the base side failed, when it did."""


@dataclass
class _Side:
    name: Side
    tree: Path
    config_path: Path
    loaded: LoadedConfig
    run_dir: Path
    process: subprocess.Popen[bytes] | None = None
    turns_out: IO[str] | None = None  # coordinator -> side
    turns_in: IO[bytes] | None = None  # side -> coordinator
    steps: int = 0
    ended: bool = False
    device: str = "cpu"
    """Where the side trains, as it said once loaded."""
    identity: Identity = field(default_factory=Identity)
    """Who the side runs as: the head side a user of its own where the coordinator is root (environment.py)."""
    ready: bool = False
    """It said it loaded ("wait 0")."""
    scratch: Path | None = None
    """Its home and setup environment (removed when the pair ends)."""
    view: Path | None = None
    """Where its code runs from when that is not `tree`: a head side of its own user gets its own view of its tree
    (private_tree.py; removed when the pair ends)."""
    python: Path = Path(sys.executable)
    """Its interpreter: this one, or its setup environment's."""
    removed: list[str] = field(default_factory=list)
    """What it left in its run folder that the canary neither reads nor uploads (links, FIFOs, hard links), removed
    once none of its processes was left (files.remove_unsafe)."""


def run_pair(
    base_tree: Path,
    head_tree: Path,
    config_path: Path,
    *,
    output_dir: Path | None = None,
    overrides: Sequence[str] = (),
    chunk_steps: int = DEFAULT_CHUNK_STEPS,
    seed: int | None = None,
    cpus: Sequence[int] | None = None,
    setup: str | None = None,
    max_wall_s: float | None = None,
) -> PairOutcome:
    """Train the config from both trees in lockstep; write base/ and head/ metrics.json and pair.json. `max_wall_s`:
    a pair still training after that long is stopped as a hung one (a confirming pair's cap)."""
    if chunk_steps < 1:
        raise UsageError(f"--chunk-steps must be at least 1, got {chunk_steps}", fix="pass 1 or more")
    trees = (base_tree, head_tree)
    sides = [_load_side(name, tree, config_path, overrides) for name, tree in zip(SIDES, trees, strict=True)]
    sides[1].identity = head_identity()
    pair_id, pair_dir, started = new_run_dir(sides[1].loaded.config, output_dir, kind="pair")
    code = diff_trees(base_tree, head_tree, exclude=[pair_dir.parent])  # before the sides write anything
    _make_places(sides, pair_dir)
    rounds: list[Round] = []
    seed = random.SystemRandom().randrange(2**31) if seed is None else seed
    rng = random.Random(seed)
    hung: TimeoutError | None = None
    interrupted: KeyboardInterrupt | None = None
    evaluator: Evaluator | str | None = None
    evaluations: dict[Side, HeldoutEval] | None = None
    try:
        try:
            shared = set(cpus) if cpus else pair_cpus(sides[1].loaded)
            deadline = _deadline(sides, max_wall_s)
            _start_sides(sides, pair_id, started, chunk_steps, rng=rng, deadline=deadline, setup=setup)
            evaluator = _start_evaluator(sides, pair_dir, shared)
            _take_turns(sides, rounds, rng, deadline, shared)
        except TimeoutError as timeout:
            hung = timeout
        except KeyboardInterrupt as stop:  # Ctrl-C, or SIGTERM from a cancelled job (cli.py): record, re-raise
            interrupted = stop
        finally:
            _finish_all(sides, now=hung is not None or interrupted is not None)
        # The sides' environments stay until then: the evaluator may run with the base side's (--setup).
        evaluations = _evaluate(evaluator, sides, stopped=hung is not None or interrupted is not None)
    finally:  # whatever ended it, an error included: no evaluator left waiting, no side's places left behind
        if isinstance(evaluator, Evaluator) and evaluations is None:
            evaluator.cancel()
        for side in sides:
            _clean(side)
    finished = datetime.now(UTC)
    base, head = sides
    record = PairRecord(
        pair_id=pair_id, chunk_steps=chunk_steps, seed=seed, started_at=_iso(started), finished_at=_iso(finished),
        wall_s=(finished - started).total_seconds(), rounds=rounds, base=_end(base), head=_end(head), code=code,
        head_uid=head.identity.uid, heldout=evaluations, process=_processes(sides),
    )  # fmt: skip
    (pair_dir / "pair.json").write_text(record.model_dump_json(indent=2) + "\n", encoding="utf-8")
    if interrupted is not None:
        raise RunInterrupted(pair_dir, interrupted) from interrupted
    paths = (base.run_dir / "metrics.json", head.run_dir / "metrics.json")
    error = _side_error(head, pair_dir)
    if hung is not None:
        error = TrainingError(
            str(hung), fix=f"read the sides' logs above; what both sides measured is in {pair_dir}",
            metrics_path=paths[1] if paths[1].exists() else None,
        )  # fmt: skip
    base_error = _side_error(base, pair_dir)
    notes = [f"{base_error.message}: the base side's steps up to then are the baseline"] if base_error else []
    notes += [_removed_note(side) for side in sides if side.removed]
    return PairOutcome(pair_dir, record, *paths, error=error, notes=notes)


def _removed_note(side: _Side) -> str:
    shown = ", ".join(side.removed[:8]) + (f" and {len(side.removed) - 8} more" if len(side.removed) > 8 else "")
    return (
        f"the {side.name} side left what the canary never reads or uploads in its run folder, removed before anything "
        f"was read: {shown} (docs/lockstep.md, 'Integrity')"
    )


def _deadline(sides: Sequence[_Side], max_wall_s: float | None) -> float:
    """When the pair counts as hung: both sides' training timeouts after a start margin, or `max_wall_s`."""
    deadline = time.monotonic() + START_MARGIN_S + 2 * max(s.loaded.config.timeout_minutes for s in sides) * 60
    return deadline if max_wall_s is None else min(deadline, time.monotonic() + max_wall_s)


def _start_sides(
    sides: list[_Side], pair_id: str, started: datetime, chunk_steps: int, *, rng: random.Random, deadline: float,
    setup: str | None,
) -> None:  # fmt: skip
    """Both sides started, in a random order; the base side first loaded when the head side would download."""
    resolved = [s.tree for s in sides]
    for side in _start_order(sides, rng):
        _start(side, pair_id, started, chunk_steps, trees=resolved, setup=setup)
        if side.name == "base" and _head_waits_for_downloads(sides[1]):
            _await(side, deadline)


def _start_evaluator(sides: list[_Side], pair_dir: Path, pair_cpus: set[int]) -> Evaluator | str | None:
    """The held-out evaluator of both sides, by the base side's config (the default branch's: it decides the
    examples and the metric), with the base tree for its reward functions; off the pair's CPUs where others are
    free. Its imports run beside the sides' loading and training, at idle priority (evaluate/process.py). None: the
    base config turns it off; a string: why it could not start."""
    base = sides[0]
    python = str(sys.executable) if importlib.util.find_spec("torch") is not None else str(base.python)
    subjects = [(s.name, s.loaded.config, s.run_dir, s.name == "base") for s in sides]  # the head's is untrusted
    try:
        evaluator = heldout.start_evaluator(
            base.loaded.config, subjects, pair_dir, trusted_tree=base.tree, python=python, cwd=base.tree
        )
    except OSError as error:
        return f"the held-out evaluator could not start: {error}"
    others = set(os.sched_getaffinity(0)) - pair_cpus
    if evaluator is not None and others:
        with contextlib.suppress(ImportError, OSError):  # psutil is the [train] extra's; pinning only helps
            pin_process(evaluator.process.pid, others)
    return evaluator


def _evaluate(
    evaluator: Evaluator | str | None, sides: list[_Side], *, stopped: bool
) -> dict[Side, HeldoutEval] | None:
    """Both sides' held-out evaluations, once both have ended (None: the base config turns it off)."""
    if evaluator is None:
        return None
    if isinstance(evaluator, str):
        return {
            "base": HeldoutEval(status="failed", message=evaluator),
            "head": HeldoutEval(status="failed", message=evaluator),
        }
    if stopped:  # a hang or an interrupt: the pair is over without a verdict on learning
        evaluator.cancel()
        why = HeldoutEval(status="skipped", reason="stopped", message="the pair was stopped before it ended")
        return {"base": why, "head": why}
    runs = [(s.name, s.run_dir, _status(s)) for s in sides]
    found = heldout.finish(evaluator, runs, sides[1].loaded.config.name)
    return {"base": found["base"], "head": found["head"]}


def _make_places(sides: list[_Side], pair_dir: Path) -> None:
    """Each side's run folder (the head side's its own user's, when it has one) and the head side's view of its
    tree; or a line saying that both sides run as one user."""
    for side in sides:
        side.run_dir = pair_dir / side.name
        side.run_dir.mkdir(parents=True, exist_ok=True)
        side.identity.give(side.run_dir)  # the head side writes its own folder only
    head = sides[1]
    if head.identity.uid is not None:
        head.view = private_tree(head.tree, head.identity, exclude=[pair_dir.parent])
        return
    print(
        "rlhf-canary pair: both sides run as this user (not root, or CANARY_PAIR_HEAD_UID=off): the head side's "
        "code could signal the base side or write its files (docs/lockstep.md, 'Integrity')",
        file=sys.stderr,
    )


def _load_side(name: Side, tree: Path, config_path: Path, overrides: Sequence[str]) -> _Side:
    if not tree.is_dir():
        raise UsageError(f"the {name} tree {tree} is not a directory", fix=f"pass the {name} commit's checkout")
    path = config_path if config_path.is_absolute() else tree / config_path
    if not path.is_file():
        raise UsageError(
            f"the {name} tree has no {config_path} ({path})",
            fix="the config path is looked up inside each tree: add the file there, or pass the path both trees have",
        )
    loaded = load_config(path, overrides)
    if loaded.config.num_processes > 1:
        raise ConfigError(
            f"{path}: a lockstep pair runs one process per side; num_processes is {loaded.config.num_processes}",
            fix="pair the single-process canary (--set num_processes=1), or compare multi-process runs separately",
        )
    return _Side(name=name, tree=tree.resolve(), config_path=path, loaded=loaded, run_dir=Path())


def _start_order(sides: list[_Side], rng: random.Random) -> list[_Side]:
    """Who starts (and loads) first is drawn, but for a head side that must wait for the base side's downloads."""
    return list(sides) if _head_waits_for_downloads(sides[1]) else rng.sample(sides, k=len(sides))


def _head_waits_for_downloads(head: _Side) -> bool:
    """A head side of its own user writes no shared cache: what its config loads from the Hub (or a custom
    factory's, which may) is downloaded by the base side first, which loads before it starts."""
    from canary_action.config.schema import factory_of
    from canary_action.train import hub
    from canary_action.train.precheck import loaded_names

    if head.identity.uid is None:
        return False
    config = head.loaded.config
    # a team's function may load from the Hub itself
    return factory_of(config) is not None or any(hub.on_hub(n.name, n.kind) for n in loaded_names(config))


def pair_cpus(loaded: LoadedConfig) -> set[int]:
    """The CPUs both sides share: the first cpu_threads of those this process may use (all of them with
    cpu_threads: auto). Sharing costs nothing, since only one side computes at a time."""
    allowed = sorted(os.sched_getaffinity(0))
    threads = loaded.config.cpu_threads
    return set(allowed[:threads] if isinstance(threads, int) else allowed)


def _start(
    side: _Side, pair_id: str, started: datetime, chunk_steps: int, *, trees: list[Path], setup: str | None
) -> None:
    side.scratch = scratch = Path(tempfile.mkdtemp(prefix=f"rlhf-canary-{side.name}-"))  # 0700: this side's alone
    side.identity.give(scratch)
    workdir = side.view or side.tree
    env = side.identity.environment(side_environment(workdir, [*trees, workdir]), home=scratch / "home")
    env.update(private_temporary(scratch, side.identity))
    python = Path(sys.executable)
    if setup:  # each side installs what its own tree asks for, in an environment of its own
        python, env = prepare_setup(setup, workdir, scratch / "env", env, side.identity)
    side.python = python
    tuned = env.get(MALLOC_OPT_OUT) != "default" and all(env.get(k) == v for k, v in MALLOC_ALLOCATOR_ENV.items())
    spec = SideSpec(
        run_id=f"{pair_id}-{side.name}",
        run_dir=side.run_dir.resolve(),
        started=started,
        config=side.loaded.config.model_dump(mode="json"),
        config_source=str(side.config_path),
        notices=[
            "lockstep side: glibc malloc keeps freed memory ("
            + ", ".join(f"{k}={env[k]}" for k in MALLOC_ALLOCATOR_ENV)
            + "), so that both sides' steps pay the same page faults"
            if tuned
            else f"lockstep side: glibc malloc as the environment set it ({_malloc_said(env)})"
        ],
        side=m.PairSide(
            pair_id=pair_id,
            side=side.name,
            chunk_steps=chunk_steps,
            tree=str(side.tree),
            allocator="tuned" if tuned else "default",
        ),
    )
    spec_path = side.run_dir / "side.json"
    # The head side's setup command has run, as the head side's user, in a folder it owns: what it left at side.json
    # (a link to a host file) is replaced, never written through.
    write_new_inside(side.run_dir, spec_path.name, spec.model_dump_json(indent=2).encode())
    to_side_r, to_side_w = os.pipe()
    from_side_r, from_side_w = os.pipe()
    command = [str(python), "-m", "canary_action.train.launch.pair_side", "--spec", str(spec_path.resolve()),
               "--turns", str(to_side_r), str(from_side_w)]  # fmt: skip
    # The sides' training logs go to stderr: stdout belongs to the command's summary.
    side.process = subprocess.Popen(
        command,
        cwd=workdir,
        env=env,
        stdout=sys.stderr,
        pass_fds=(to_side_r, from_side_w),
        preexec_fn=side.identity.preexec,  # noqa: PLW1509  # one thread here: no lock can be held across the fork
    )
    os.close(to_side_r)
    os.close(from_side_w)
    side.turns_out = os.fdopen(to_side_w, "w")
    side.turns_in = os.fdopen(from_side_r, "rb", buffering=0)  # read a turn's bytes as they come (_read_turn)


def side_environment(tree: Path, trees: Sequence[Path]) -> dict[str, str]:
    """The side's environment (environment.py: no tokens, its tree last on the import path, nothing first, no
    path inside the other tree), malloc tuned."""
    env = child_environment(tree, trees)
    return env if env.get(MALLOC_OPT_OUT) == "default" else {**MALLOC_ALLOCATOR_ENV, **env}


def _malloc_said(env: dict[str, str]) -> str:
    if env.get(MALLOC_OPT_OUT) == "default":
        return f"{MALLOC_OPT_OUT}=default"
    return ", ".join(f"{k}={env[k]}" for k in MALLOC_ALLOCATOR_ENV if k in env) or "no MALLOC_* variable"


def _take_turns(sides: list[_Side], rounds: list[Round], rng: random.Random, deadline: float, cpus: set[int]) -> None:
    """Both sides report ready at step 0 and are pinned to `cpus`; then round after round, each trains one chunk in
    a random order.

    Pinned only once both have loaded: the sides load at the same time, and pinned to one CPU from their start
    (cpu_threads 1) their imports and model loading took 11.6 s each instead of 5.2 s, a third of the pair's time.
    Only sides training on the CPU: a GPU side's host work (its launches, the driver's threads) keeps every core.
    """
    for side in sides:
        if not side.ready:
            _await(side, deadline)
    for side in sides:
        if side.process is not None and not side.ended and cpus and side.device == "cpu":
            pin_process(side.process.pid, cpus)
    index = 0
    while all(not s.ended for s in sides):
        order = rng.sample(sides, k=len(sides))
        rounds.append(Round(index=index, order=[s.name for s in order]))
        for side in order:
            _send(side, f"go {index}")
            _await(side, deadline)
            if side.ended:
                _await_exit(side, deadline)
        index += 1
    for side in sides:  # one side ended: the pair is over, the other stops where it waits
        if not side.ended:
            _send(side, "stop")


def pin_process(pid: int, cpus: set[int]) -> None:
    """Every thread of process `pid` and of the processes it started (affinity is per thread on Linux), and so
    the threads and processes they start later, onto `cpus`. One that ended meanwhile is no error."""
    import psutil  # the [train] extra's: the coordinator itself runs without it when `--setup` installs each side's

    try:
        family = [pid, *(child.pid for child in psutil.Process(pid).children(recursive=True))]
    except psutil.Error:
        family = [pid]
    for member in family:
        tasks = Path(f"/proc/{member}/task")
        for tid in (int(t.name) for t in tasks.iterdir()) if tasks.is_dir() else (member,):
            with contextlib.suppress(ProcessLookupError, FileNotFoundError):
                os.sched_setaffinity(tid, cpus)


def _await(side: _Side, deadline: float) -> None:
    """Read the side's next "wait <steps>"; an end of pipe means it ended (its exit status says how).

    The pipe is the head side's code's to write, so it is read strictly: bytes, under the pair's deadline, one
    line of at most _TURN_LINE_MAX bytes and nothing after it (the side waits for its turn once it has written),
    ASCII. Anything else ends that side, named; a line that never ends is a hang at the deadline."""
    assert side.turns_in is not None
    raw = _read_turn(side, deadline)
    if raw is None:
        side.ended = True
        return
    line = raw.decode("ascii", errors="replace")
    words = line.split()
    if (
        raw.endswith(b"\n") and raw.count(b"\n") == 1 and raw.isascii() and len(words) in (2, 3)
        and words[0] == "wait" and words[1].isdecimal() and len(words[1]) < 10
        and (len(words) == 2 or words[2].split(":")[0] in _DEVICES)
    ):  # fmt: skip
        side.steps = int(words[1])
        side.device = words[2] if len(words) == 3 else side.device
        side.ready = True
        return
    # Anything else is not the canary's side talking (a pull request's code writing to the pipe): the side ends
    # here, and the pair with it; it is stopped with the other (_finish), and what both measured is kept.
    print(f"the {side.name} side broke the turn protocol ({line[:80]!r}): the pair ends here", file=sys.stderr)
    side.ended = True


def _read_turn(side: _Side, deadline: float) -> bytes | None:
    """The bytes of one turn message: up to and with its newline, or _TURN_LINE_MAX + 1 bytes without one; None at
    the end of the pipe with nothing read. TimeoutError when the deadline passes first."""
    assert side.turns_in is not None
    fd = side.turns_in.fileno()
    read = b""
    while b"\n" not in read and len(read) <= _TURN_LINE_MAX:
        ready, _, _ = select.select([fd], [], [], max(deadline - time.monotonic(), 0))
        if not ready:
            raise TimeoutError(f"the {side.name} side did not finish its turn before the pair's deadline (a hang?)")
        chunk = os.read(fd, _TURN_LINE_MAX + 1 - len(read))
        if not chunk:
            return read or None
        read += chunk
    return read


def _await_exit(side: _Side, deadline: float) -> None:
    """Let a side that ended finish exiting before the other trains on: its interpreter's teardown (freeing the
    model, torch's threads) ran beside the other side's last chunk on the shared CPUs, at half its CPU time per
    wall second in 7 of 10 benchmark pairs (docs/benchmarks.md). A side that does not exit in time is ended
    later (_finish)."""
    if side.process is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            side.process.wait(timeout=max(0.0, min(deadline - time.monotonic(), _STOP_GRACE_S)))


def _send(side: _Side, message: str) -> None:
    assert side.turns_out is not None
    try:
        side.turns_out.write(message + "\n")
        side.turns_out.flush()
    except BrokenPipeError:
        side.ended = True


def _finish_all(sides: Sequence[_Side], *, now: bool) -> None:
    """Each side writes its metrics.json, whatever ended the pair, head first; a second Ctrl-C (or SIGTERM) while
    one side ends still ends the other, and is raised after both."""
    pending: BaseException | None = None
    for side in reversed(sides):
        try:
            _finish(side, now=now or pending is not None)
        except BaseException as error:
            pending = pending or error
    if pending is not None:
        raise pending


def _finish(side: _Side, *, now: bool = False) -> None:
    """Close the turns (a waiting side reads the end as "stop") and wait for the side to write its file;
    `now` (a hang, an interrupt): a side that has not ended within a few seconds (a chunk still computing ends
    at its next turn, where it reads the closed pipe as "stop") is sent SIGTERM, which it records, then writes."""
    for stream in (side.turns_out, side.turns_in):
        if stream is not None:
            with contextlib.suppress(BrokenPipeError):
                stream.close()
    if side.process is not None:
        _stop(side, now=now)
    # Whatever the side's code left running (a process forked off, by its setup command too: then no side process
    # was started) ends before anything it wrote is read; then nothing can change its folder, which is cleared of
    # what must never be read or uploaded.
    with _signals_held():  # an interrupt now would leave its processes and links behind: it waits for the sweep
        left = side.identity.end_leftovers()
        if side.run_dir != Path():
            # A process that would not end could still change the folder: nothing in it is read then.
            side.removed = remove_unsafe(side.run_dir) if not left else _remove_all(side.run_dir, left)
        side.identity.reclaim(side.run_dir)
    rebuild_killed(side.run_dir)  # a side killed (SIGKILL, out of memory) left its streamed steps: finish its file


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """SIGINT and SIGTERM held (delivered when the block ends) in this, the coordinator's only thread."""
    held = {signal.SIGINT, signal.SIGTERM}
    before = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


def _remove_all(run_dir: Path, left: list[int]) -> list[str]:
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True, exist_ok=True)
    return [f"all of it (processes {', '.join(map(str, left[:5]))} of its user would not end: nothing of it was read)"]


def _stop(side: _Side, *, now: bool) -> None:
    """Wait for the side to exit; `now`: after a few seconds, SIGTERM. One that does not exit is killed."""
    assert side.process is not None
    with contextlib.suppress(ProcessLookupError):  # a side someone stopped (SIGSTOP) could not end, nor write
        os.kill(side.process.pid, signal.SIGCONT)
    if now:
        try:
            side.process.wait(timeout=_NOW_GRACE_S)
        except subprocess.TimeoutExpired:
            side.process.terminate()
    try:
        side.process.wait(timeout=_STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        side.process.terminate()  # the side records the signal as its failure and writes its metrics.json
        try:
            side.process.wait(timeout=_STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            side.process.kill()
            side.process.wait()


def _clean(side: _Side) -> None:
    """Remove what the side used and nobody reads: its home, its setup environment, its view of its tree."""
    if side.scratch is not None:
        shutil.rmtree(side.scratch, ignore_errors=True)
    if side.view is not None:
        remove_private_tree(side.view)


def _end(side: _Side) -> SideEnd:
    metrics = _read(side)
    return SideEnd(
        tree=str(side.tree),
        config_path=str(side.config_path),
        metrics_path=f"{side.name}/metrics.json",
        exit_code=side.process.returncode if side.process is not None else None,
        steps=metrics.summary.num_steps if metrics is not None and metrics.summary else side.steps,
    )


def _processes(sides: Sequence[_Side]) -> dict[Side, ProcessSummary] | None:
    """Each side's process per step (compare/slow_process.py), from its metrics.json; None where neither has it."""
    from canary_action.compare.slow_process import process_summary

    found: dict[Side, ProcessSummary] = {}
    for side in sides:
        try:
            metrics = _read(side)
        except (CanaryError, OSError, ValueError):  # a head side's file is its own to write: the comparison says
            continue
        summary = process_summary(metrics.series) if metrics is not None else None
        if summary is not None:
            found[side.name] = summary
    return found or None


def _read(side: _Side) -> m.Metrics | None:
    from canary_action.metrics.io import read_metrics

    path = side.run_dir / "metrics.json"
    return read_metrics(path) if path.exists() else None


def _status(side: _Side) -> m.Status | None:
    """How the side says its training ended; None when its metrics.json is missing or unreadable (a head side's is
    its own to write): then it is not evaluated, and the comparison says why."""
    try:
        metrics = _read(side)
    except (CanaryError, OSError, ValueError):
        return None
    return metrics.status if metrics is not None else None


def _side_error(side: _Side, pair_dir: Path) -> CanaryError | None:
    """How a side failed: its refused config (ConfigError) or its crash (TrainingError); None when it trained."""
    code = side.process.returncode if side.process is not None else None
    if code == 0:
        return None
    metrics = _read(side)
    status = metrics.status if metrics is not None else None
    log = side.run_dir / ERROR_LOG
    what = f"{status.exception_type}: {status.message}" if status and status.message else _last_line(side.run_dir)
    what = what or f"exit status {code}"
    where = f"the {side.name} side ({side.tree})"
    if code == 2:
        return ConfigError(f"{where} refused its config: {what}", fix=f"fix {side.config_path} in that tree")
    # No error.log when the side never started (its interpreter or `canary_action` itself did not import) or was
    # killed: its traceback, if any, is in the pair's output (the sides log to its stderr).
    read = f"read the traceback in {log}" if log.is_file() else f"read the {side.name} side's lines in the output above"
    if side.identity.uid is not None and "PermissionError" in what:
        read += (
            f"; this side runs as a user of its own (uid {side.identity.uid}) that writes only its copy of its tree, "
            "its run folder, its home and temporary folders: write there, or run the pair with "
            f"{HEAD_UID_ENV}=off (docs/lockstep.md, 'Integrity')"
        )
    return TrainingError(
        f"{where} failed during {status.stage if status else 'start'}: {what}",
        fix=f"{read}; what both sides measured is in {pair_dir}",
        metrics_path=side.run_dir / "metrics.json" if (side.run_dir / "metrics.json").exists() else None,
    )


def _last_line(run_dir: Path) -> str | None:
    """A traceback's last line (`ModuleNotFoundError: No module named 'trl'`) from the side's error.log, read without
    following a link (the side may have left one to a host file); None without one."""
    try:
        text = tail_inside(run_dir, [ERROR_LOG], size=_LOG_TAIL_BYTES).decode("utf-8", errors="replace")
    except (OSError, FileRefusedError):
        return None
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1][:2000] if lines else None


def _iso(moment: datetime) -> str:
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")
