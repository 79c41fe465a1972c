"""pair.json: the record of a lockstep pair — two canaries (base and head code trees) that took turns.

Each side's own measurements are in its metrics.json (with `pair` naming this record's pair_id, and the
series column pair/round); this record keeps what belongs to the pair: the turns in the order they were
given, the chunk size, how each side ended, and (version 2) what the head tree changed against the base tree.
"""

from __future__ import annotations

from typing import Final, Literal

from pydantic import Field

from canary_action.metrics.heldout import HeldoutEval
from canary_action.metrics.schema import Closed

PAIR_RECORD_VERSION: Final = 5
#: Versions read: 2 added `code`, 3 `head_uid`, 4 `heldout`, 5 `process`, `confirmation` and `not_confirmed`, and
#: nothing else.
READ_PAIR_RECORD_VERSIONS: Final = (1, 2, 3, 4, 5)
Side = Literal["base", "head"]
ChangeKind = Literal["added", "removed", "modified"]


class Round(Closed):
    index: int
    order: list[Side] = Field(description="The sides in the order they trained this round (drawn at random).")


class SideEnd(Closed):
    tree: str
    config_path: str = Field(description="The config file inside the tree.")
    metrics_path: str = Field(description="The side's metrics.json, relative to pair.json's directory.")
    exit_code: int | None = Field(description="0 trained, 2 refused config, 3 crashed; None: never started.")
    steps: int = Field(description="Optimizer steps the side completed.")


class CodeChange(Closed):
    """One file the head tree changed against the base tree."""

    path: str = Field(description="Relative to the tree's root, with / separators.")
    change: ChangeKind
    lines_added: int = Field(0, ge=0, description="0 for a binary or large file (compared, not diffed).")
    lines_removed: int = Field(0, ge=0)
    added: list[str] = Field(default_factory=list, description="The first non-blank lines it added, clipped.")


class CodeDiff(Closed):
    """What the head tree changed against the base tree, written before either side started."""

    method: Literal["git", "walk"] = Field(
        description="git: the base commit against the head's working tree (untracked files are not changes); "
        "walk: every file of both folders compared, version-control, cache and environment folders left out."
    )
    files: list[CodeChange] = Field(description="The largest changes first, at most 200.")
    num_files: int = Field(ge=0, description="Files changed in all.")
    base_commit: str | None = None
    head_commit: str | None = None
    note: str | None = Field(None, description="Why the list may be incomplete (a walk that stopped).")


class ProcessSummary(Closed):
    """A side's process, per step: the medians over its steps after the first (metrics.json has every step's).
    What tells a slow process from slow code (train/process_counters.py); None where the side did not measure it."""

    steps: int = Field(ge=0, description="The steps summarised.")
    step_time_s: float | None = None
    cpu_s: float | None = Field(None, description="User and system CPU time per step, all threads.")
    user_cpu_s: float | None = None
    system_cpu_s: float | None = None
    minor_faults: float | None = None
    major_faults: float | None = None
    voluntary_switches: float | None = None
    involuntary_switches: float | None = None
    runqueue_wait_s: float | None = Field(None, description="The training thread's wait for a CPU while runnable.")
    cpus: list[int] = Field(default_factory=list, description="The CPUs the training thread ended its steps on.")


class PairRecord(Closed):
    pair_record_version: Literal[1, 2, 3, 4, 5] = PAIR_RECORD_VERSION
    pair_id: str
    chunk_steps: int
    seed: int = Field(description="Seed of the random orders: which side starts first, and inside each round.")
    started_at: str
    finished_at: str
    wall_s: float = Field(description="Both sides, from start to the last metrics.json written.")
    rounds: list[Round]
    base: SideEnd
    head: SideEnd
    code: CodeDiff | None = Field(None, description="What the head tree changed (None: version 1, or not diffed).")
    head_uid: int | None = Field(
        None,
        description="The user the head side ran as, one of its own (the coordinator was root); None: the "
        "coordinator's user, or version 1-2.",
    )
    heldout: dict[Side, HeldoutEval] | None = Field(
        None,
        description="Both sides' held-out evaluations, by the coordinator's evaluator on the same examples (the base "
        "side's config decides them); None: the base config turns it off, or version 1-3.",
    )
    process: dict[Side, ProcessSummary] | None = Field(
        None, description="Each side's process, per step (version 5; None where neither side measured it)."
    )
    confirmation: str | None = Field(
        None,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$",
        description="The confirming pair, a folder of confirmation/ beside this record: a speed check failed, so the "
        "same trees ran again as fresh processes with a new seed (compare/confirm.py).",
    )
    not_confirmed: str | None = Field(
        None, description="Why a speed check that failed has no confirming pair (the wall-time cap, a crash)."
    )
