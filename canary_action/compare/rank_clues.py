"""Evidence for the `communication` suspect from the ranks of a multi-process run, measured: a straggler (one
rank's compute far above the median rank's, the others waiting for it) and collectives that take longer.

The recorded changes that point at communication (world size, the distributed config, torch/NCCL) are in
`effects.py`; `suspects.py` weighs all of them together.
"""

from __future__ import annotations

import statistics
from typing import Final

from canary_action.compare.clues import DIST, MIN_GROWTH, MIN_SHARE, PERF, Case, Clue, ms, pct
from canary_action.compare.distributed import Straggler, straggler
from canary_action.compare.result import Check
from canary_action.compare.runs import RunData

# A straggler that fails rank_imbalance is the most direct evidence this suspect gets: one rank measured slow.
STRAGGLER_WEIGHT: Final = {"fail": 0.85, "warn": 0.45}  # warn: the baselines were as imbalanced
COLLECTIVE_WEIGHT: Final = {"fail": 0.6, "warn": 0.35}  # the collectives grew, but the step barely did
COLLECTIVE_SHARE_WEIGHT: Final = (0.3, 0.6)  # base + slope x the share of the step-time growth, as in clues.py


def communication_clues(case: Case) -> list[Clue]:
    if case.current.distributed is None:
        return []
    return [clue for clue in (_straggler_clue(case), _collective_clue(case)) if clue is not None]


def _straggler_clue(case: Case) -> Clue | None:
    check = _flagged(case, "rank_imbalance")
    found = straggler(case.current.distributed)
    if check is None or found is None:
        return None
    lines = [
        f"rank {found.rank}'s compute {ms(found.compute_s)} per step vs the median rank's {ms(found.median_s)} "
        f"({pct(found.imbalance_pct / 100, signed=True)})"
    ]
    lines += [line for line in (_others_wait(case, found), _persistence(case.current, found.rank)) if line]
    summary = (
        f"a straggler: rank {found.rank} computes {found.imbalance_pct:.0f} % longer than the median rank, "
        "and the other ranks wait for it in every collective"
    )
    steps = (
        f"look at rank {found.rank}'s device: clocks, temperature and throttling (nvidia-smi -q -d PERFORMANCE), "
        "or another job on its host",
        "look for work done on one rank only (logging, evaluation, checkpointing) or batches of uneven length per rank",
    )
    return Clue("communication", STRAGGLER_WEIGHT[check.status], tuple(lines), PERF | DIST, summary, steps)


def _others_wait(case: Case, found: Straggler) -> str | None:
    """How long the other ranks sit in collectives per step (median over them), against the baselines' ranks."""
    dist = case.current.distributed
    own = [w for r in dist.ranks if r.rank != found.rank and (w := r.comm_median_s) is not None] if dist else []
    if not own:
        return None
    line = f"the other ranks wait in collectives {ms(statistics.median(own))} per step"
    before = [w for b in case.baselines if (w := _median_wait(b)) is not None]
    return line + (f" (the baselines' ranks {ms(statistics.fmean(before))})" if before else "")


def _persistence(run: RunData, rank: int) -> str | None:
    """On how many steady steps the straggler was the slowest: every step points at its device or its share of
    the work, some steps at contention (a neighbour, a periodic job)."""
    columns = run.steady_rank_compute
    if rank not in columns or len(columns) < 2:
        return None
    position = list(columns).index(rank)
    rows = [row for row in zip(*columns.values(), strict=True) if all(v is not None for v in row)]
    if not rows:
        return None
    slowest = sum(1 for row in rows if max(range(len(row)), key=lambda i: row[i] or 0.0) == position)
    return f"rank {rank} was the slowest in {slowest} of {len(rows)} steady steps"


def _median_wait(run: RunData) -> float | None:
    waits = [w for r in run.distributed.ranks if (w := r.comm_median_s) is not None] if run.distributed else []
    return statistics.median(waits) if waits else None


def _collective_clue(case: Case) -> Clue | None:
    """Collectives that take longer: by their share of the step-time growth when the step grew, else from the
    communication_time check alone."""
    d, check = case.delta, _flagged(case, "communication_time")
    part = d.collective if d is not None else None
    grew = d is not None and d.step.delta_s >= MIN_GROWTH * d.step.baseline_s
    steps = (
        "rerun both commits with NCCL_DEBUG=INFO: compare the chosen algorithm, protocol and transport",
        "compare the torch and NCCL versions and the DDP/FSDP settings (bucket sizes, sharding) with the baseline's",
    )
    if d is not None and part is not None and grew and part.share is not None and part.share >= MIN_SHARE:
        b, c = ms(part.baseline_s), ms(part.current_s)
        growth = f"+{ms(d.step.delta_s)} step-time growth"
        line = f"collective time per step {b} → {c}: explains {pct(part.share)} of the {growth}"
        base, slope = COLLECTIVE_SHARE_WEIGHT
        weight = base + slope * min(1.0, part.share)
        return Clue("communication", weight, (line,), PERF | DIST, f"the collectives slowed: {b} → {c} per step", steps)
    if check is None or check.baseline is None or check.current is None:
        return None
    b, c = ms(check.baseline), ms(check.current)
    change = f" ({pct(check.delta_pct / 100, signed=True)})" if check.delta_pct is not None else ""
    line = f"collective time per step {b} → {c}{change}"
    summary = f"the collectives slowed: {b} → {c} per step"
    return Clue("communication", COLLECTIVE_WEIGHT[check.status], (line,), DIST, summary, steps)


def _flagged(case: Case, name: str) -> Check | None:
    return next((c for c in case.flagged if c.name == name and c.status in ("fail", "warn")), None)
