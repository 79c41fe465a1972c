"""The search of `canary bisect`, apart from training: where in commits 1..n (0 the good commit, n the bad one)
the effect of the bad commit appears, from noisy measurements of "commit k against the good commit".

Each boundary of a searched range has a level: the effect measured at that commit (0 at the good commit, the
confirming pair's effect at the bad one). A candidate is called from its measurement against the two levels
(normal errors, each SD read from its 95 % interval, a level's own SD added to the candidate's):

- more than Z_CONSISTENT SDs from both levels, and between them: a level in between — more than one change in
  the range, each side of it searched on its own (regressions that add up in steps); beyond one of them: like
  that one (a larger effect than the bad commit's is still the bad commit's side);
- else like the low end (the change comes after it) or like the high end (the change is in it or before it)
  when the likelihood of one level is LIKELIHOOD_RATIO times the other's, or more: a wrong call of that kind
  happens at most ~0.12 % of the time, whatever the noise (the worst case, where the gap is 3 SD);
- otherwise: not clear. It is measured once more when the budget allows; still not clear, the search of that
  range stops and the range is reported, never a commit picked from it.

A commit is named only when the range narrowed to it through clear calls alone and the intervals of the
levels either side of it are apart. Commits that cannot be
measured (they do not build or train) are skipped, as `git bisect skip` does, and the next nearest tried.

The budget: one regression costs the confirming pair plus at most floor(log2 n) + 1 more; each further
regression found (a level in between) adds ceil(log2 n) + 1. Retries, skips and the search share it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final, Literal

Z_CONSISTENT: Final = 3.0
LIKELIHOOD_RATIO: Final = 100.0
Z_95: Final = 1.959964

Call = Literal["before", "after", "between", "unclear", "skipped"]


@dataclass(frozen=True)
class Effect:
    """A change in percent against the good commit, with its confidence interval."""

    pct: float
    low: float
    high: float

    @classmethod
    def zero(cls) -> Effect:
        return cls(0.0, 0.0, 0.0)

    @property
    def sd(self) -> float:
        """The standard error the 95 % interval implies."""
        return (self.high - self.low) / (2 * Z_95)


Span = tuple[int, int, Effect, Effect]  # (low, high, the level at low, the level at high)


@dataclass(frozen=True)
class Step:
    index: int
    call: Call
    effect: Effect | None = None
    why: str = ""  # for a skipped commit: what failed


@dataclass(frozen=True)
class Finding:
    """The commits low+1..high hold one change of the effect, from `before` (at low) to `after` (at high).
    `clear`: narrowed to one commit through clear calls; otherwise `why` says where the search stopped."""

    low: int
    high: int
    before: Effect
    after: Effect
    clear: bool
    why: str = ""


@dataclass
class Search:
    n: int
    measure: Callable[[int], Effect | str]
    """Commit k against the good commit: its effect, or why it could not be measured."""
    budget: int
    steps: list[Step] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)

    @property
    def spent(self) -> int:
        return len(self.steps)

    def run(self, total: Effect) -> Search:
        """Search commits 1..n-1 (n measured already: `total`) for where the effect appears. Its steps so far
        stay readable when a measurement raises (Ctrl-C)."""
        ranges = [(0, self.n, Effect.zero(), total)]
        while ranges:
            ranges[:0] = _narrow(self, *ranges.pop(0))
        self.findings.sort(key=lambda f: f.low)
        return self


def default_budget(n: int) -> int:
    """Pairs after the confirming one, for one regression in n commits."""
    return math.floor(math.log2(n)) + 1 if n > 1 else 0


def bisect(n: int, total: Effect, measure: Callable[[int], Effect | str], *, budget: int | None = None) -> Search:
    return Search(n, measure, default_budget(n) if budget is None else budget).run(total)


def _narrow(search: Search, low: int, high: int, before: Effect, after: Effect) -> list[Span]:
    """Narrow (low, high] to one commit and append its finding; each level in between found on the way splits
    off the range above it, returned to be searched next (and adds to the budget)."""
    skipped: set[int] = set()
    retried: set[int] = set()
    splits: list[Span] = []
    while high - low > 1:
        k = nearest_untried(low, high, skipped)
        if k is None:
            why = "every commit in between was skipped (it could not be measured)"
            search.findings.append(Finding(low, high, before, after, clear=False, why=why))
            return splits
        if search.spent >= search.budget:
            why = f"out of pairs ({search.budget} after the confirming one)"
            search.findings.append(Finding(low, high, before, after, clear=False, why=why))
            return splits
        measured = search.measure(k)
        if isinstance(measured, str):
            search.steps.append(Step(k, "skipped", why=measured))
            skipped.add(k)
            continue
        call = classify(measured, before, after)
        search.steps.append(Step(k, call, measured))
        if call == "before":
            low, before = k, measured
        elif call == "after":
            high, after = k, measured
        elif call == "between":
            splits.insert(0, (k, high, measured, after))
            search.budget += math.ceil(math.log2(search.n)) + 1
            high, after = k, measured
        elif k not in retried and search.spent < search.budget:
            retried.add(k)
        else:
            why = f"the effect at commit {k} is not clear: between the two ends"
            search.findings.append(Finding(low, high, before, after, clear=False, why=why))
            return splits
    if distinct(before, after):
        search.findings.append(Finding(low, high, before, after, clear=True))
    else:
        why = "the change across it is not clear: the intervals either side of it overlap"
        search.findings.append(Finding(low, high, before, after, clear=False, why=why))
    return splits


def distinct(before: Effect, after: Effect) -> bool:
    """Whether two levels' intervals are apart: a change between them is clear."""
    return before.high < after.low or after.high < before.low


def classify(effect: Effect, before: Effect, after: Effect) -> Call:
    """How `effect` lies against the levels `before` and `after` (module docstring)."""
    span = after.pct - before.pct
    if span == 0:
        return "unclear"
    position = (effect.pct - before.pct) / span  # 0 at `before`, 1 at `after`
    if _sds_apart(effect, before) > Z_CONSISTENT and _sds_apart(effect, after) > Z_CONSISTENT:
        return "between" if 0 < position < 1 else "before" if position <= 0 else "after"
    variance = effect.sd**2 + max(before.sd, after.sd) ** 2
    if variance == 0:
        return "before" if position < 0.5 else "after"
    # log of L(before) / L(after) for a normal measurement of `effect` around either level
    log_ratio = ((effect.pct - after.pct) ** 2 - (effect.pct - before.pct) ** 2) / (2 * variance)
    if log_ratio >= math.log(LIKELIHOOD_RATIO):
        return "before"
    if -log_ratio >= math.log(LIKELIHOOD_RATIO):
        return "after"
    return "unclear"


def _sds_apart(effect: Effect, level: Effect) -> float:
    sd = math.hypot(effect.sd, level.sd)
    gap = abs(effect.pct - level.pct)
    return gap / sd if sd else (math.inf if gap else 0.0)


def nearest_untried(low: int, high: int, skipped: set[int]) -> int | None:
    """The commit strictly between low and high nearest their middle, not skipped (as `git bisect skip` moves
    to a neighbour); None when every one was skipped."""
    middle = (low + high) // 2
    order = sorted(range(low + 1, high), key=lambda k: (abs(k - middle), k))
    return next((k for k in order if k not in skipped), None)
