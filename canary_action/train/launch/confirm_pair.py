"""A lockstep pair, confirmed when it fails a speed check: the same trees again, as fresh processes with a new seed,
in the first pair's confirmation/ folder (compare/confirm.py judges the two). The cost is paid on a failure only,
and capped: a first pair slower than the cap is not repeated, and a confirming pair is stopped at it."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path

from canary_action.compare.confirm import CONFIRM_CAP_S, CONFIRMATION_DIR, failed_speed_checks
from canary_action.config.thresholds import Tier
from canary_action.errors import CanaryError
from canary_action.metrics.pair import PairRecord
from canary_action.train.launch import pair as lockstep
from canary_action.train.launch.pair import DEFAULT_CHUNK_STEPS, PairOutcome


def run_confirmed(
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
    cap_s: float = CONFIRM_CAP_S,
    tier: Tier = "default",
    threshold_file: Path | None = None,
    say: Callable[[str], None] | None = None,
) -> PairOutcome:
    """`run_pair`, and when its comparison fails a speed check, a second pair of the same trees recorded in the
    first pair's pair.json (`confirmation`, or `not_confirmed` saying why there is none). `cap_s` 0: never.
    `tier` and `threshold_file`: the limits the pair will be judged by, so that it is confirmed when that judgement
    fails it (the action's, `canary pair`'s)."""
    first = lockstep.run_pair(
        base_tree, head_tree, config_path, output_dir=output_dir, overrides=overrides, chunk_steps=chunk_steps,
        seed=seed, cpus=cpus, setup=setup,
    )  # fmt: skip
    failed = speed_failures(first, tier=tier, threshold_file=threshold_file)
    if not failed:
        return first
    wall_s = first.record.wall_s
    if cap_s <= 0:
        update = {"not_confirmed": "confirmation turned off"}
    elif wall_s > cap_s:
        update = {"not_confirmed": f"the pair took {wall_s / 60:.1f} min, more than the confirming pair's cap of "
                  f"{cap_s / 60:.1f} min"}  # fmt: skip
    else:
        if say is not None:
            say(f"{', '.join(failed)} failed: confirming with a second pair of fresh processes")
        try:
            second = lockstep.run_pair(
                base_tree, head_tree, config_path, output_dir=first.pair_dir / CONFIRMATION_DIR, overrides=overrides,
                chunk_steps=chunk_steps, cpus=cpus, setup=setup, max_wall_s=cap_s,
            )  # fmt: skip
        except CanaryError as e:
            update = {"not_confirmed": f"the confirming pair could not run: {e.message}"}
        except KeyboardInterrupt:  # Ctrl-C or a cancelled job: the first pair's record says so, then it ends
            _record(first, {"not_confirmed": "the confirming pair was interrupted"})
            raise
        else:
            if second.error is not None or not second.head.exists() or not second.base.exists():
                why = second.error.message if second.error is not None else "a side wrote no metrics.json"
                update = {"not_confirmed": f"the confirming pair {second.pair_dir.name} did not finish: {why}"}
            else:
                update = {"confirmation": second.pair_dir.name}
    return dataclasses.replace(first, record=_record(first, update))


def _record(first: PairOutcome, update: dict[str, str]) -> PairRecord:
    """The first pair's record with `update`, written again."""
    record = first.record.model_copy(update=update)
    (first.pair_dir / "pair.json").write_text(record.model_dump_json(indent=2) + "\n", encoding="utf-8")
    return record


def speed_failures(outcome: PairOutcome, *, tier: Tier = "default", threshold_file: Path | None = None) -> list[str]:
    """The speed checks the pair fails on its own (no artifact history: a slow process is what a second pair
    answers); none when a side did not finish (that is judged as it is)."""
    from canary_action.compare.command import run_compare

    if outcome.error is not None or not outcome.head.exists() or not outcome.base.exists():
        return []
    try:
        result = run_compare(
            outcome.pair_dir, [], tier=tier, threshold_file=threshold_file, missing_ok=True, confirmations=False
        )
    except CanaryError:  # the final comparison says what is wrong with the files
        return []
    return failed_speed_checks(result)
