"""A lockstep pair's judgement as `canary pair` writes it: the comparison of its sides, its note first, and
result.json and report.md in the pair's folder. `canary bisect` judges each of its pairs the same way."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from canary_action.compare.command import run_compare
from canary_action.config.thresholds import Tier

if TYPE_CHECKING:
    from canary_action.compare.result import CompareResult
    from canary_action.metrics.pair import PairRecord
    from canary_action.train.launch.pair import PairOutcome


def judge_pair(
    outcome: PairOutcome,
    baselines: Sequence[Path] = (),
    *,
    tier: Tier = "default",
    threshold_file: Path | None = None,
    numerics_accepted: bool = False,
) -> CompareResult:
    """Compare the pair's head side with its base side (and `baselines` as history); write result.json and
    report.md (GitHub markdown) in the pair's folder."""
    from canary_action.report.render import render

    result = run_compare(
        outcome.pair_dir, list(baselines), tier=tier, threshold_file=threshold_file, missing_ok=True,
        notes=outcome.notes, numerics_accepted=numerics_accepted,
    )  # fmt: skip
    # First among the notes; it needs the comparison's count of judged rounds.
    result = result.model_copy(update={"notes": [pair_note(outcome.record, result), *result.notes]})
    (outcome.pair_dir / "result.json").write_text(result.model_dump_json(indent=2) + "\n", encoding="utf-8")
    (outcome.pair_dir / "report.md").write_text(render(result, "markdown"), encoding="utf-8")
    return result


def pair_note(record: PairRecord, result: CompareResult) -> str:
    """The pair in a line: every round it trained (the warm-up's too), and how many of them the speed checks
    judged — the count the report's "Paired A/B" line gives."""
    note = f"lockstep pair {record.pair_id}: {len(record.rounds)} rounds of {record.chunk_steps} steps in all"
    note += f" (warm-up included), {record.wall_s:.0f} s"
    if result.pairing is None:  # not judged as a pair (a side wrote no metrics.json)
        return note
    if result.pairing.rounds is None:
        return note + "; too few rounds after the warm-up to judge speed"
    return note + f"; {result.pairing.rounds} of them judged for speed, after the warm-up"
