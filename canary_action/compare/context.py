"""What every check reads: the current run, the baselines it may use, the thresholds; and the shared
constructors for checks that could not be judged."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal

from canary_action.compare.comparability import Split, describe
from canary_action.compare.result import Check, CheckGroup
from canary_action.compare.runs import RunData
from canary_action.config.thresholds import Thresholds


@dataclass(frozen=True)
class Context:
    current: RunData
    baselines: Sequence[RunData]
    """Every baseline, newest first (stability checks need no comparability)."""
    perf: Split
    learning: Split
    thresholds: Thresholds
    tier: str = "default"
    partner: RunData | None = None
    """A lockstep pair's base side when the current run is its head side: perf is then judged round by round
    against it (paired.py), and held to the history (below)."""
    numerics_accepted: bool = False
    """A maintainer accepted this commit's change of the training numerics (fail_on_numerics_change)."""

    @property
    def history(self) -> list[RunData]:
        """The comparable baselines beside a lockstep pair's base side: separate runs (artifacts). A perf check
        that fails against them fails, whatever the pair says (`held_to_history`)."""
        return [b for b in self.perf.usable if b is not self.partner]

    @property
    def level(self) -> float:
        """The confidence level of the statistical checks' intervals and of their test (confidence_level)."""
        return self.thresholds.confidence_level

    @property
    def learning_severity(self) -> Literal["fail", "warn"]:
        return "fail" if self.thresholds.fail_on_learning else "warn"


def skipped(
    name: str,
    group: CheckGroup,
    unit: str,
    why: str,
    *,
    baseline: float | None = None,
    current: float | None = None,
    fix: str | None = None,
) -> Check:
    """A check that was not judged. With `fix` (what would let it be judged) it was asked for, and the verdict
    can be neutral at best; without, it does not apply to this run (no CUDA memory on a CPU...)."""
    return Check(
        name=name, group=group, status="skip", unit=unit, message=why, baseline=baseline, current=current, fix=fix
    )


#: The fix for a check the current run can be judged on but its baselines cannot (older or 0.1 files).
NEW_BASELINE: Final = "record a new baseline with this release's `canary run` on the default branch"


def not_comparable(name: str, group: CheckGroup, unit: str, split: Split) -> Check:
    fields = [c.field for c in split.differences]
    return Check(
        name=name,
        group=group,
        status="not-comparable",
        unit=unit,
        message=f"not comparable with the baseline: {describe(split.differences)}",
        fix=f"compare with baselines recorded with the same {', '.join(fields)}, or pass "
        + " ".join(f"--allow-change {f}" for f in fields)
        + " if the difference is intended",
    )


def no_baseline(name: str, group: CheckGroup, unit: str, current: float | None = None) -> Check:
    return Check(name=name, group=group, status="skip", unit=unit, current=current, message="no baseline to compare")


def spread(values: Sequence[float]) -> float:
    """Sample SD of the baselines' figures, 0 with fewer than two. In floats: statistics.stdev is exact
    (fractions) and, per step of a nightly loss band, dominated a comparison's time."""
    if len(values) < 2:
        return 0.0
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))


def noise_margin(values: Sequence[float], k: float) -> float:
    """k x the SD of (current - mean of n baselines) implied by the baselines' spread: k S sqrt(1 + 1/n)."""
    return k * spread(values) * math.sqrt(1 + 1 / len(values)) if values else 0.0


def pct(delta: float, base: float) -> float | None:
    return 100 * delta / base if base else None
