"""Root-cause ranking: which cause best explains the checks that failed or warned, from measured evidence.

Every rule (clues.py: measurements; effects.py: recorded changes) yields clues for a category. A category's
confidence combines its clues' weights as independent evidence, 1 - prod(1 - w), capped at MAX_CONFIDENCE
(a canary never proves a cause), then scales by how much of the regression it accounts for: the share of
flagged checks it explains (a warning counts half). Timing clues already weigh by their share of the
step-time growth, so a cause behind a small part of a slowdown stays small.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import Final

from canary_action.compare.breakdown import BreakdownDelta, breakdown, compare_breakdowns
from canary_action.compare.clues import (
    Case,
    Clue,
    explains,
    memory_clues,
    numerics_clues,
    op_clues,
    timing_clues,
    token_clues,
)
from canary_action.compare.code_clues import code_clues
from canary_action.compare.correctness_clues import correctness_clues
from canary_action.compare.effects import config_clues, distributed_clues, env_clues
from canary_action.compare.gpu import gpu_clues
from canary_action.compare.rank_clues import communication_clues
from canary_action.compare.result import Change, Check, Numerics, OpChange, StepSplit, Suspect, SuspectCategory
from canary_action.compare.runs import RunData
from canary_action.config.blocks import ProfilerConfig
from canary_action.metrics.pair import CodeDiff

MAX_SUSPECTS: Final = 5
MAX_CONFIDENCE: Final = 0.95
UNKNOWN_CONFIDENCE: Final = 0.2  # no evidence at all: a guess that it is noise or something unmeasured
STATUS_WEIGHT: Final = {"fail": 1.0, "warn": 0.5}
NON_FINITE_CHECKS: Final = frozenset({"nan_steps", "inf_steps"})

# Ties go to the cause that is cheapest to confirm: a recorded change before a reading of the timing.
CATEGORY_ORDER: Final[tuple[SuspectCategory, ...]] = (
    "numerics", "config", "dependency", "code", "dataloader", "tokenization", "kernel", "host", "memory",
    "communication", "io", "unknown",
)  # fmt: skip

#: A next step that only helps when a library moved: left out when the environments are the same (a lockstep pair).
DEPENDENCY_STEP: Final = "check dependency changes (torch, CUDA, cuDNN) that swap kernels"

RULES: Final[tuple[Callable[[Case], list[Clue]], ...]] = (
    timing_clues, token_clues, op_clues, env_clues, config_clues, memory_clues, numerics_clues,
    communication_clues, distributed_clues, code_clues, gpu_clues, correctness_clues,
)  # fmt: skip

# Per category: the summary when no clue names the cause concretely, and next steps after the clues' own.
DEFAULTS: Final[dict[SuspectCategory, tuple[str, tuple[str, ...]]]] = {
    "dataloader": ("the data pipeline: steps wait longer for their batches", (
        "raise the dataloader workers, or move per-batch CPU work (tokenization, collation) out of the step",
        "time the collator alone on a few batches to find the slow part")),
    "tokenization": ("tokenization: the same data gives a different number of tokens", (
        "tokenize a few examples with the baseline's and the current stack and diff the token ids",
        "check truncation (max_length, max_prompt_length), padding side and special tokens")),
    "kernel": ("compute kernels: the forward/backward/optimizer work itself got slower", (
        "rerun with profiler.enabled: true to see which ops slowed",
        DEPENDENCY_STEP,
        "capture a step (capture: {steps: [N]}) and run canary replay RUN_DIR --matrix: the model's forward and "
        "backward alone under each attention implementation, dtype and compile setting (docs/replay.md)")),
    "host": ("host overhead: Python, data handling, kernel launches and syncs around the GPU's work", (
        "profile the host side (py-spy, or the torch profiler's CPU view) to see where the step's time goes",
        "look for new per-step Python work and .item()/.cpu() syncs in the training step")),
    "memory": ("memory: the run holds more GPU memory", (
        "rerun with profiler.enabled: true (profile_memory) to see which allocations grew",
        "set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to rule out fragmentation")),
    "communication": ("communication: the collectives between the ranks changed", (
        "rerun with NCCL_DEBUG=INFO to see the chosen algorithm and transport",
        "compare the world size, gpu_count and the NCCL version with the baseline's")),
    "io": ("I/O and logging: periodic stalls slow some steps", (
        "look for a period in the step-time chart (every N steps: logging, checkpointing, evaluation)",
        "raise the logging/save intervals or move them off the training loop; check the runner's disk")),
    "numerics": ("numerics: the loss or gradients left their usual range", (
        "find the first bad step in metrics.json stability.non_finite (it lists parameters with bad gradients)",
        "with dtype fp16, try bf16; else lower learning_rate or max_grad_norm",
        "rerun with the same seed: a repeat means a code or dependency change, not chance")),
    "dependency": ("a dependency moved", (
        "pin the previous versions in a branch and rerun the canary to bisect",
        "read the release notes between the two versions")),
    "code": ("the pull request's code changed", (
        "read the changed files' new lines for per-step work that is not needed",
        "revert the changes in a branch and rerun the pair to confirm")),
    "config": ("a config key changed", (
        "revert the changed keys in a branch and rerun the canary",
        "if the change is intended, accept its cost: the next default-branch run records new baselines")),
    "unknown": ("no measured change explains this: noise, or a cause the canary does not record", (
        "rerun the canary on the same commit to rule out noise (a real regression repeats)",
        "rerun with profiler.enabled: true to see which ops slowed",
        "bisect the commits between the baseline and this one")),
}  # fmt: skip


def rank_suspects(  # noqa: PLR0917 - the verdict passes the runs, the checks and the three diffs in this order
    current: RunData,
    baselines: Sequence[RunData],
    checks: Sequence[Check],
    env: Sequence[Change],
    config: Sequence[Change],
    ops: Sequence[OpChange],
    *,
    code: CodeDiff | None = None,
    split: StepSplit | None = None,
    numerics: Numerics | None = None,
) -> list[Suspect]:
    """The likeliest causes of the failing/warning checks, most confident first (at most MAX_SUSPECTS).

    [] when nothing failed or warned. A run with NaN/Inf steps puts numerics first whatever else moved: a
    non-finite loss makes every other figure of the run meaningless.
    """
    flagged = [c for c in checks if c.status in STATUS_WEIGHT]
    if not flagged:
        return []
    case = Case(
        current, baselines, flagged, _breakdown_delta(current, baselines), env, config, ops, code, split, numerics
    )
    clues = [clue for rule in RULES for clue in rule(case)]
    unwanted = set() if env or not baselines else {DEPENDENCY_STEP}
    found = [_suspect(cat, [c for c in clues if c.category == cat], flagged, unwanted) for cat in CATEGORY_ORDER]
    suspects = [s for s in found if s is not None] or [_unknown(flagged)]
    non_finite = any(c.name in NON_FINITE_CHECKS for c in flagged)
    suspects.sort(
        key=lambda s: (
            not (non_finite and s.category == "numerics"),
            -s.confidence,
            CATEGORY_ORDER.index(s.category),
        )
    )
    window = _fitting_window(current)
    return [_with_window(s, window) for s in suspects[:MAX_SUSPECTS]]


_PROFILE: Final = "profiler.enabled: true"


def _fitting_window(current: RunData) -> str:
    """`profiler.enabled: true`, plus a window inside the run when the default one (steps 50-69) would end past
    it: a config whose window ends after max_steps is refused, so the bare advice would lead to an error."""
    fields = ProfilerConfig.model_fields
    start, num = fields["start_step"].default, fields["num_steps"].default
    max_steps = current.config.get("max_steps")
    if not isinstance(max_steps, int) or max_steps >= start + num - 1:
        return _PROFILE
    fitted = max(1, min(num, max_steps // 4))
    return f"{_PROFILE}, profiler.start_step: {max_steps - fitted + 1}, profiler.num_steps: {fitted}"


def _with_window(suspect: Suspect, window: str) -> Suspect:
    if window == _PROFILE:
        return suspect
    steps = [step.replace(_PROFILE, window) for step in suspect.next_steps]
    return suspect.model_copy(update={"next_steps": steps})


def _breakdown_delta(current: RunData, baselines: Sequence[RunData]) -> BreakdownDelta | None:
    own = breakdown(current)
    others = [b for run in baselines if (b := breakdown(run)) is not None]
    return compare_breakdowns(own, others) if own is not None and others else None


def _suspect(
    category: SuspectCategory, clues: Sequence[Clue], flagged: Sequence[Check], unwanted: set[str]
) -> Suspect | None:
    relevant = sorted((c for c in clues if any(explains(c.scope, f) for f in flagged)), key=lambda c: -c.weight)
    if not relevant:
        return None
    explained = [f for f in flagged if any(explains(c.scope, f) for c in relevant)]
    strength = min(MAX_CONFIDENCE, 1 - math.prod(1 - c.weight for c in relevant))
    coverage = _weight(explained) / _weight(flagged)
    summary, steps = DEFAULTS[category]
    return Suspect(
        category=category,
        confidence=round(strength * (0.5 + 0.5 * coverage), 2),
        summary=next((c.summary for c in relevant if c.summary), summary),
        evidence=_unique(line for c in relevant for line in c.evidence),
        next_steps=_next_steps([s for c in relevant for s in c.next_steps], [s for s in steps if s not in unwanted]),
        explains=[f.name for f in explained],
    )


def _unknown(flagged: Sequence[Check]) -> Suspect:
    summary, steps = DEFAULTS["unknown"]
    evidence = [f"{c.name}: {c.message}" for c in flagged]
    return Suspect(category="unknown", confidence=UNKNOWN_CONFIDENCE, summary=summary, evidence=evidence,
                   next_steps=list(steps))  # fmt: skip


def _next_steps(own: Sequence[str], defaults: Sequence[str]) -> list[str]:
    # The clues' concrete steps first; the category's generic ones only fill a short list.
    steps = _unique(own)
    return (steps if len(steps) >= 2 else _unique([*steps, *defaults]))[:3]


def _weight(checks: Iterable[Check]) -> float:
    return sum(STATUS_WEIGHT[c.status] for c in checks)


def _unique(lines: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(lines))
