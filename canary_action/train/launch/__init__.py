"""How a canary executes: the orchestration above the per-process runner (train/run.py).

    single      one process: this one runs CanaryRun and writes metrics.json          (single.py)
    ranks       N processes through accelerate's launcher, merged into one metrics.json (ranks.py, rank_worker.py)
    pair        two code trees trained side by side, taking turns, one metrics.json each (pair.py, pair_side.py)

The runner below knows nothing of how it was started: it takes a config, a run directory and, where an
orchestrator needs one, a rank context or a step gate. Nothing here is imported by train/run.py.
"""

from __future__ import annotations

import sys
from pathlib import Path

from canary_action.config.load import LoadedConfig
from canary_action.train import precheck
from canary_action.train.launch import heldout
from canary_action.train.launch.environment import launch_code_tree
from canary_action.train.launch.outcome import RunOutcome, new_run_dir


def run_canary(loaded: LoadedConfig, output_dir: Path | None = None) -> RunOutcome:
    """One canary from a loaded config: in this process, or through the launcher when num_processes > 1."""
    name = loaded.config.name

    def say(line: str) -> None:
        print(f"[{name}] {line}", file=sys.stderr, flush=True)

    # The team's code (a trainer_factory, reward functions) is found where every process of the run finds it: in
    # the code tree (the folder `canary run` runs in, or the action's checkout), appended after the standard
    # library and the installed packages, as the launched ranks and a pair's sides append it (environment.py).
    tree = launch_code_tree()
    if tree is not None and str(tree) not in sys.path:
        sys.path.append(str(tree))
    # What can be refused without torch is refused before it is imported, and before anything is written.
    for notice in precheck.check(loaded.config, announce=say):
        say(f"note: {notice}")
        loaded.notices.append(notice)
    run_id, run_dir, started = new_run_dir(loaded.config, output_dir)
    # Started before this process's own imports, so that the evaluator's (seconds) lie beside them: held-out
    # evaluation (launch/heldout.py), with the run as its own trusted config.
    config = loaded.config
    evaluator = heldout.start_evaluator(config, [("run", config, run_dir, True)], run_dir, trusted_tree=tree)
    # The first of the lines that say what a run is loading (train/progress.py has the others): these imports
    # alone take seconds to tens of seconds.
    say("loading torch, transformers and trl")
    if loaded.config.num_processes > 1:
        from canary_action.train.launch.ranks import launch_canary

        return launch_canary(loaded, run_id, run_dir, started, evaluator)
    from canary_action.train.launch.single import run_single

    return run_single(loaded, run_id, run_dir, started, evaluator)


__all__ = ["RunOutcome", "run_canary"]
