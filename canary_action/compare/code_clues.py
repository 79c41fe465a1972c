"""Evidence from a lockstep pair's code diff: the files the pull request changed, and the lines they added.

The two sides of a pair trained the same config on one machine with one stack, so when nothing else differs
(no library, no config key) the code the head tree changed is where the difference came from, and the first
place to look. It is a recorded change, not a measurement: the measured clues (timing, ops, memory) still say
which part of the step moved. Documentation-only changes are no evidence.
"""

from __future__ import annotations

from typing import Final

from canary_action.compare.clues import ANY, Case, Clue
from canary_action.metrics.pair import CodeChange

#: The sides differ in this code and nothing else recorded: the cause, whatever part of the step it slowed (the
#: measured suspects, the data pipeline or the compute, follow it and say which part).
ONLY_CHANGE_WEIGHT: Final = 0.95
AMONG_OTHERS_WEIGHT: Final = 0.5  # a library or config key moved too
SHOWN_FILES: Final = 3
NOT_CODE: Final = (".md", ".rst", ".adoc", ".png", ".jpg", ".jpeg", ".gif", ".svg", ".ipynb")


def code_clues(case: Case) -> list[Clue]:
    code = case.code
    if code is None:
        return []
    files = [f for f in code.files if not f.path.lower().endswith(NOT_CODE)]
    if not files:
        return []
    weight = ONLY_CHANGE_WEIGHT if not case.env and not case.config else AMONG_OTHERS_WEIGHT
    top = files[0]
    more = f" and {code.num_files - 1} more file{'s' if code.num_files > 2 else ''}" if code.num_files > 1 else ""
    against = f"its base commit {code.base_commit[:12]}" if code.base_commit else "the base tree"
    summary = f"the pull request's code: {top.path}{more} changed against {against}, which trained beside it"
    listed = ", ".join(_counted(f) for f in files[:SHOWN_FILES])
    evidence = [f"{code.num_files} file{'s' if code.num_files != 1 else ''} changed: {listed}"]
    evidence += [f"{f.path} adds: " + " · ".join(f.added) for f in files[:SHOWN_FILES] if f.added]
    if code.note:
        evidence.append(f"the diff is incomplete: {code.note}")
    steps = (
        f"read what {top.path} adds: per-step work that is not needed (an extra forward pass, a copy, a sync "
        "such as .item() or .cpu()) shows as step time",
        f"revert {top.path} in a branch and rerun the pair to confirm",
    )
    # A worse learner is the correctness clue's to explain (correctness_clues.py), with advice about the math.
    return [Clue("code", weight, tuple(evidence), ANY - {"learning"}, summary, steps)]


def _counted(change: CodeChange) -> str:
    if change.change != "modified":
        return f"{change.path} ({change.change})"
    if change.lines_added == change.lines_removed == 0:
        return f"{change.path} (binary or large)"
    return f"{change.path} (+{change.lines_added} −{change.lines_removed})"
