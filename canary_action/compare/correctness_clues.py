"""Evidence for a correctness regression: where a lockstep pair's numerics parted, and the files the pull request
changed that hold the loss, the collator or the data.

A held-out figure that got worse says that the model learns worse; the pair says from which step the training
math differs (the first batch, or later) and the code diff says which changed files can be the cause. The
reviewer gets both, and one line to act on: diff that file's loss or data path against the base.
"""

from __future__ import annotations

import re
from typing import Final

from canary_action.compare.clues import Case, Clue
from canary_action.compare.result import Numerics
from canary_action.metrics.pair import CodeChange

CHECKS: Final = frozenset({"heldout_eval", "numerics"})
#: A worse held-out figure with the numerics changed: the math change is the cause, whatever else moved.
WEIGHT_BOTH: Final = 0.95
WEIGHT_ONE: Final = 0.7
#: What a file's path or added lines say when they hold the training math: the loss, the labels and masks, the
#: collator, the data's formatting, the reward.
MATH_WORDS: Final = re.compile(
    r"loss|label|logit|shift|mask|pad|collat|token|truncat|template|eos|reward|advantage|beta|reduc|mean\(|sum\(|"
    r"cross_entropy|log_softmax|dataset|prompt|chosen|rejected",
    re.IGNORECASE,
)
SHOWN_FILES: Final = 3


def correctness_clues(case: Case) -> list[Clue]:
    flagged = [c for c in case.flagged if c.name in CHECKS]
    if not flagged:
        return []
    found = case.numerics
    changed = found is not None and found.state == "changed"
    heldout = next((c for c in flagged if c.name == "heldout_eval"), None)
    evidence: list[str] = []
    if changed and found is not None:
        evidence.append(_parted(found))
    if heldout is not None:
        evidence.append(f"heldout_eval: {heldout.message}")
    files = _math_files(case)
    if files:
        evidence.append("files the pull request changed that hold the loss, collator or data: "
                        + "; ".join(_file(f) for f in files[:SHOWN_FILES]))  # fmt: skip
    step = found.first_step if changed and found is not None else None
    top = files[0].path if files else "the pull request's training code"
    summary = (
        f"the training math changed from step {step}" if step is not None else "the model learns worse on held-out data"
    ) + (f", in {top}" if files else "")
    return [Clue("numerics", WEIGHT_BOTH if changed and heldout is not None else WEIGHT_ONE, tuple(evidence),
                 CHECKS | {"learning"}, summary, _next_steps(top, step))]  # fmt: skip


def _parted(found: Numerics) -> str:
    values = ", ".join(f"{v.name} {_v(v.base)} → {_v(v.head)}" for v in found.values if v.base != v.head)
    before = f"identical up to step {found.first_step - 1}, " if found.first_step and found.first_step > 1 else ""
    return f"the pair's two sides trained the same batches from the same weights: {before}apart from step " + (
        f"{found.first_step} ({values})"
    )


def _next_steps(top: str, step: int | None) -> tuple[str, ...]:
    if step == 1:
        where = (f"diff {top} against the base: the first batch already gives another loss, so the change is in the "
                 "loss itself (label shift, mask, reduction, a detached term) or in what reaches it (collator, "
                 "padding, template, EOS, truncation)")  # fmt: skip
    elif step is not None:
        where = (f"diff {top} against the base: the sides agree until step {step}, so the change acts later (the "
                 "optimizer, the schedule, a clip, or data first met at that step)")  # fmt: skip
    else:
        where = f"diff {top} against the base, and read how its data and loss reach the model"
    return (
        where,
        "if the change is meant, the held-out figure is its judge: make it learn at least as well, then merge",
    )


def _math_files(case: Case) -> list[CodeChange]:
    if case.code is None:
        return []
    return [f for f in case.code.files if MATH_WORDS.search(f.path) or any(MATH_WORDS.search(a) for a in f.added)]


def _file(change: CodeChange) -> str:
    lines = [a for a in change.added if MATH_WORDS.search(a)][:2]
    added = f" adds: {' · '.join(lines)}" if lines else ""
    return f"{change.path} (+{change.lines_added} −{change.lines_removed}){added}"


def _v(value: float | None) -> str:
    return "none" if value is None else f"{value:.6g}"
