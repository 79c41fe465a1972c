"""How the action trains: the canary in a child process over the checked-out repository, and, for a lockstep
baseline, the pull request's base commit checked out beside it and trained in turns with it.

The child runs `python -m canary_action run` (or `pair`) with the repository first on its import path (a
`trainer_factory` or reward function of the team's own code imports from it), the repository as its working
directory, and an environment without the action's inputs or the runner's credentials (environment.py): the
pull request's code never sees the token the publishing process holds. A `setup` command first installs what
that code needs, into an environment layered over the image's, per tree.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from canary_action.config.load import LoadedConfig
from canary_action.errors import ERROR_FILE_ENV, CanaryError, TrainingError, UsageError, from_record
from canary_action.train.launch.environment import child_environment, prepare_setup

_GIT = ("git", "-c", "safe.directory=*")


@dataclass(frozen=True)
class ChildTrainer:
    """The action's trainer: one canary run of the config, in a child process over `tree`."""

    tree: Path
    setup: str | None = None

    def __call__(self, loaded: LoadedConfig, output_dir: Path) -> Path:
        config = loaded.path if loaded.path is not None else self.tree / f"{loaded.config.name}.yaml"
        output_dir.mkdir(parents=True, exist_ok=True)
        before = set(output_dir.iterdir())
        run_child(self.tree, self.setup, ["run", str(config), "-o", str(output_dir)])
        made = [d for d in set(output_dir.iterdir()) - before if (d / "metrics.json").is_file()]
        if len(made) != 1:
            raise TrainingError(f"the canary wrote {len(made)} runs into {output_dir}, not one", fix="rerun the job")
        return made[0] / "metrics.json"


def run_child(tree: Path, setup: str | None, args: Sequence[str], extra_trees: Sequence[Path] = ()) -> None:
    """`python -m canary_action ARGS` over `tree`; raises the error the child ended with (its class, message, fix)."""
    scratch = Path(tempfile.mkdtemp(prefix="rlhf-canary-child-"))
    env = child_environment(tree, extra_trees)
    python = Path(sys.executable)
    if setup:
        python, env = prepare_setup(setup, tree, scratch / "env", env)
    error_file = scratch / "error.json"
    env[ERROR_FILE_ENV] = str(error_file)
    # Both streams to the job log: the child's report and progress are the step's output.
    done = subprocess.run(
        [str(python), "-m", "canary_action", *args], cwd=tree, env=env, stdout=sys.stderr, check=False
    )
    if done.returncode in (0, 1):  # 1: a regression verdict (`pair` compares): not an error here
        return
    if error_file.is_file():
        raise from_record(json.loads(error_file.read_text(encoding="utf-8")))
    raise TrainingError(
        f"the canary process ended with exit status {done.returncode} without saying why",
        fix="read the job log above (killed for memory? a signal?)",
    )


def checkout_base(workspace: Path, sha: str, dest: Path) -> Path:
    """The base commit's tree at `dest` (a git worktree of the workspace), fetching the commit when a shallow
    checkout lacks it. Raises UsageError naming what to change in the workflow."""
    if not (workspace / ".git").exists():
        raise UsageError(
            f"baseline lockstep needs the repository checked out with git; {workspace} is no git repository",
            fix="check out with actions/checkout before the canary step",
        )
    if not _git_ok(workspace, "cat-file", "-e", f"{sha}^{{commit}}"):
        fetched = subprocess.run([*_GIT, "-C", str(workspace), "fetch", "--no-tags", "--depth=1", "origin", sha],
                                 capture_output=True, text=True, check=False)  # fmt: skip
        if fetched.returncode != 0:
            raise UsageError(
                f"the pull request's base commit {sha[:12]} is not in the checkout and could not be fetched: "
                f"{fetched.stderr.strip()[-300:]}",
                fix="check out with `fetch-depth: 0` (actions/checkout), or let the job reach the origin remote",
            )
    added = subprocess.run([*_GIT, "-C", str(workspace), "worktree", "add", "--detach", str(dest), sha],
                           capture_output=True, text=True, check=False)  # fmt: skip
    if added.returncode != 0:
        raise UsageError(
            f"could not check out the base commit {sha[:12]}: {added.stderr.strip()[-300:]}",
            fix="make sure the workspace is a writable git checkout",
        )
    return dest


def _git_ok(workspace: Path, *args: str) -> bool:
    return subprocess.run([*_GIT, "-C", str(workspace), *args], capture_output=True, check=False).returncode == 0


@dataclass(frozen=True)
class LockstepTrainer:
    """The action's lockstep baseline: the base commit and the checked-out PR, trained in turns."""

    workspace: Path
    setup: str | None = None

    def __call__(self, config: str, base_sha: str, output_dir: Path) -> Path:
        """Run the pair; the pair's directory (compare judges its head side against its base side)."""
        base = checkout_base(self.workspace, base_sha, Path(tempfile.mkdtemp(prefix="rlhf-canary-base-")) / "tree")
        output_dir.mkdir(parents=True, exist_ok=True)
        before = set(output_dir.iterdir())
        args = ["pair", config, "--base", str(base), "--head", str(self.workspace), "-o", str(output_dir)]
        args += ["--setup", self.setup] if self.setup else []
        try:
            run_child(self.workspace, None, args, extra_trees=[base])
        except CanaryError as error:
            made = [d for d in set(output_dir.iterdir()) - before if (d / "pair.json").is_file()]
            if made and isinstance(error, TrainingError):
                error.metrics_path = made[0]  # what both sides measured is still compared and reported
            raise
        made = [d for d in set(output_dir.iterdir()) - before if (d / "pair.json").is_file()]
        if len(made) != 1:
            raise TrainingError(f"the lockstep pair wrote {len(made)} pairs into {output_dir}", fix="rerun the job")
        return made[0]
