"""How the action trains: the canary in a child process over the checked-out repository, and, for a lockstep
baseline, the pull request's base commit checked out beside it and trained in turns with it.

The child runs `python -m canary_action run` (or `pair`) with the repository on its import path after the
installed packages (a `trainer_factory` or reward function of the team's own code imports from it; a `torch/`
folder in it does not shadow torch), the repository as its working directory, an environment without the
action's inputs, the runner's credentials or its command files, and no way to read the action's memory
(environment.py) — defence in depth: untrusted code belongs in a job given no write token at all. A `setup`
command first installs what that code needs, into an environment layered over the image's, per tree.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from canary_action.config.load import LoadedConfig, load_config
from canary_action.config.thresholds import Tier
from canary_action.errors import (
    ERROR_FILE_ENV,
    CanaryError,
    ConfigError,
    NoPairBaseError,
    TrainingError,
    UsageError,
    from_record,
)
from canary_action.files import FileRefusedError, read_regular_file, remove_unsafe
from canary_action.metrics.stream import rebuild_killed
from canary_action.safe_git import git_command
from canary_action.train.launch.environment import (
    adopting_orphans,
    child_environment,
    prepare_setup,
    private_temporary,
    unprivileged,
)

_STOP_GRACE_S = 30
_ERROR_FILE_LIMIT = 2**20


@dataclass(frozen=True)
class ChildTrainer:
    """The action's trainer: one canary run of the config, in a child process over `tree`."""

    tree: Path
    setup: str | None = None

    def __call__(self, loaded: LoadedConfig, output_dir: Path) -> Path:
        config = loaded.path if loaded.path is not None else self.tree / f"{loaded.config.name}.yaml"
        output_dir.mkdir(parents=True, exist_ok=True)
        before = set(output_dir.iterdir())
        try:
            try:
                run_child(self.tree, self.setup, ["run", str(config), "-o", str(output_dir)])
            finally:  # before anything of the run is read: what its code left there that is not a plain file
                _clear(output_dir)
        except CanaryError as error:
            # Where the run's metrics.json is, the parent finds for itself: the child's word names no path here.
            made = _new_runs(output_dir, before)
            if isinstance(error, TrainingError):
                error.metrics_path = None
                if len(made) == 1:
                    # A killed child left its provisional metrics.json and streamed steps: this process finishes it.
                    rebuild_killed(made[0])
                    error.metrics_path = made[0] / "metrics.json"
            raise
        made = _new_runs(output_dir, before)
        if len(made) != 1:
            raise TrainingError(f"the canary wrote {len(made)} runs into {output_dir}, not one", fix="rerun the job")
        return made[0] / "metrics.json"


def _clear(output_dir: Path) -> None:
    removed = remove_unsafe(output_dir)
    if removed:
        shown = ", ".join(removed[:10]) + (f" and {len(removed) - 10} more" if len(removed) > 10 else "")
        print(f"rlhf-canary: removed from {output_dir}, as nothing the canary writes is one: {shown}", file=sys.stderr)


def _new_runs(output_dir: Path, before: set[Path]) -> list[Path]:
    """The run folders the child made: real folders only (a link it planted would lead this process's writes
    elsewhere), each with a metrics.json."""
    made = set(output_dir.iterdir()) - before
    return [d for d in made if not d.is_symlink() and d.is_dir() and (d / "metrics.json").is_file()]


def run_child(tree: Path, setup: str | None, args: Sequence[str]) -> None:
    """`python -m canary_action ARGS` over `tree`; raises the error the child ended with (its class, message, fix).

    A cancelled job (KeyboardInterrupt here, from SIGTERM) is passed on as SIGTERM: the child writes what it
    measured, then this re-raises.
    """
    scratch = Path(tempfile.mkdtemp(prefix="rlhf-canary-child-"))
    try:
        _run_child(tree, setup, args, scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _run_child(tree: Path, setup: str | None, args: Sequence[str], scratch: Path) -> None:
    env = {**child_environment(tree), **private_temporary(scratch)}
    python = Path(sys.executable)
    if setup:
        python, env = prepare_setup(setup, tree, scratch / "env", env)
    error_file = scratch / "error.json"
    env[ERROR_FILE_ENV] = str(error_file)
    # Both streams to the job log: the child's report and progress are the step's output.
    command = [str(python), "-m", "canary_action", *args]
    # preexec_fn: the action is single-threaded here, so no lock can be held across the fork.
    with (
        adopting_orphans() as leftovers,
        subprocess.Popen(command, cwd=tree, env=env, stdout=sys.stderr, preexec_fn=unprivileged) as child,  # noqa: PLW1509
    ):
        try:
            code = child.wait()
        except KeyboardInterrupt:
            child.terminate()
            try:
                child.wait(timeout=_STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                child.kill()
            raise
        finally:  # what the training left running (a daemon it forked) ends before anything it wrote is read
            leftovers.end()
    if code == 0:
        return
    record = _error_record(error_file)
    if record is not None:
        raise from_record(record)
    raise TrainingError(
        f"the canary process {_how_it_ended(code)} without saying why",
        fix="read the job log above (killed for memory? a native crash?); the steps it measured are kept",
    )


def _error_record(path: Path) -> dict[str, object] | None:
    """The error the child wrote, as data; None when it wrote none, or something that is not one (torn by a
    kill, too large, not an object): the exit status then speaks for it."""
    try:
        record = json.loads(read_regular_file(path, limit=_ERROR_FILE_LIMIT))
    except (OSError, FileRefusedError, ValueError, RecursionError):
        return None
    return record if isinstance(record, dict) else None


def _how_it_ended(code: int) -> str:
    if code >= 0:
        return f"ended with exit status {code}"
    try:
        return f"was killed by signal {-code} ({signal.Signals(-code).name})"
    except ValueError:  # a real-time signal has no name
        return f"was killed by signal {-code}"


def lockstep_base(workspace: Path, event_base: str, head: str | None) -> str:
    """The commit to pair the checkout with, so that the pair measures what the pull request changes. On
    pull_request the checkout is GitHub's merge commit (the PR's head merged into its base branch as it is now):
    its first parent is the base branch then, which the merge is measured against; the event's base.sha may be
    older. With the head itself checked out (pr-canary.yml's measure job), the merge base of the event's base and
    HEAD: the base branch's newer commits are not the PR's doing. Without the history to find it (a shallow
    checkout), the event's base."""
    parents = head_parents(workspace)
    if len(parents) == 2 and (head is None or parents[1] == head):
        return parents[0]
    return _git_out(workspace, "merge-base", event_base, "HEAD") or event_base


def head_parents(workspace: Path) -> list[str]:
    """HEAD's parents, from the commit object itself: `git rev-list --parents` lists none in a shallow clone
    (actions/checkout's default depth of 1), while the commit still names them."""
    body = _git_out(workspace, "cat-file", "-p", "HEAD").split("\n\n", 1)[0]
    return [line.split()[1] for line in body.splitlines() if line.startswith("parent ")]


def measured_commit(workspace: Path, *, merge_sha: str | None) -> str | None:
    """The commit the workspace has checked out, as the pull request knows it: HEAD, or, when HEAD is GitHub's
    test merge commit (`merge_sha`, GITHUB_SHA on pull_request), its second parent: the pull request's head as
    it was when the job checked out — which may be newer than the event's. None without a git checkout."""
    head = _git_out(workspace, "rev-parse", "--verify", "HEAD")
    if not head:
        return None
    parents = head_parents(workspace)
    if len(parents) == 2 and merge_sha is not None and head == merge_sha:
        return parents[1]
    return head


def _git_out(workspace: Path, *args: str) -> str:
    try:
        done = subprocess.run(git_command(workspace, *args), capture_output=True, text=True, check=False)
    except OSError:  # no git, or a config it could not list (safe_git.py): as a failed command
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def checkout_base(workspace: Path, sha: str, dest: Path) -> Path:
    """The base commit's tree at `dest` (a git worktree of the workspace), fetching the commit when a shallow
    checkout lacks it. Raises UsageError naming what to change in the workflow."""
    if not (workspace / ".git").exists():
        raise UsageError(
            f"baseline lockstep needs the repository checked out with git; {workspace} is no git repository",
            fix="check out with actions/checkout before the canary step",
        )
    if _git_out(workspace, "cat-file", "-t", sha) != "commit":
        fetched = subprocess.run(git_command(workspace, "fetch", "--no-tags", "--depth=1", "origin", sha),
                                 capture_output=True, text=True, check=False)  # fmt: skip
        if fetched.returncode != 0:
            raise UsageError(
                f"the pull request's base commit {sha[:12]} is not in the checkout and could not be fetched: "
                f"{fetched.stderr.strip()[-300:]}",
                fix="check out with `fetch-depth: 0` (actions/checkout), or let the job reach the origin remote",
            )
    added = subprocess.run(git_command(workspace, "worktree", "add", "--detach", str(dest), sha),
                           capture_output=True, text=True, check=False)  # fmt: skip
    if added.returncode != 0:
        raise UsageError(
            f"could not check out the base commit {sha[:12]}: {added.stderr.strip()[-300:]}",
            fix="make sure the workspace is a writable git checkout",
        )
    return dest


@dataclass(frozen=True)
class LockstepTrainer:
    """The action's lockstep baseline: the base commit and the checked-out PR, trained in turns.

    The coordinator (train/launch/pair.py) runs here, from the image's canary, not from the workspace: a pull
    request's own `canary_action/` would shadow it. Each side is a child over its own tree (environment.py).
    """

    workspace: Path
    setup: str | None = None
    tier: Tier = "default"
    threshold_file: Path | None = None
    """The limits the pair will be judged by: a pair that fails them is confirmed by a second pair."""

    def __call__(self, config: str, base_sha: str, output_dir: Path) -> tuple[Path, list[str]]:
        """Run the pair: its directory (compare judges its head side against its base side), and notes. Raises
        NoPairBaseError, before anything trains, when the base side cannot be made."""
        from canary_action.train.launch.confirm_pair import run_confirmed

        base = self.base_tree(config, base_sha)
        try:
            outcome = run_confirmed(
                base, self.workspace, Path(config), output_dir=output_dir, setup=self.setup, tier=self.tier,
                threshold_file=self.threshold_file,
            )  # fmt: skip
        finally:  # the checkout's record of the base tree goes with it (the tree is in this command's own folder)
            _git_out(self.workspace, "worktree", "remove", "--force", str(base))
            _git_out(self.workspace, "worktree", "prune")
        notes = [f"baseline: the base commit {base_sha[:12]}, trained in lockstep beside this one", *outcome.notes]
        if outcome.error is not None:
            if isinstance(outcome.error, TrainingError) and outcome.head.is_file():
                outcome.error.metrics_path = outcome.pair_dir  # what both sides measured is still compared
            raise outcome.error
        return outcome.pair_dir, notes

    def base_tree(self, config: str, base_sha: str) -> Path:
        """The base commit checked out beside the workspace, its config loading; NoPairBaseError otherwise (a
        shallow checkout that cannot fetch it, a pull request that adds the canary, a base config this release
        refuses)."""
        try:
            base = checkout_base(self.workspace, base_sha, Path(tempfile.mkdtemp(prefix="rlhf-canary-base-")) / "tree")
        except UsageError as e:
            raise NoPairBaseError(e.message, fix=e.fix) from e
        path = base / config
        if not path.is_file():
            raise NoPairBaseError(
                f"the base commit {base_sha[:12]} has no {config} (a pull request that adds the canary?)",
                fix="nothing to pair with until the config is on the base branch; artifact baselines judge it",
            )
        try:
            loaded = load_config(path)
        except ConfigError as e:
            raise NoPairBaseError(
                f"the base commit's {config} is refused: {e.message}", fix="fix the config on the base branch"
            ) from e
        if loaded.config.num_processes > 1:
            raise NoPairBaseError(
                f"the base commit's {config} runs {loaded.config.num_processes} processes; a pair runs one per side",
                fix="pair once the base branch's config runs one process, or compare with artifact baselines",
            )
        return base
