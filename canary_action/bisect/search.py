"""The search of `canary bisect`, apart from training: where in commits 1..n (0 the good commit, n the bad one)
the effect of the bad commit appears, from noisy measurements of "commit k against the good commit".

Each boundary of a searched range has a level: the effect there (exactly 0 at the good commit; the confirming
pair's effect at the bad one), every commit called like it pooled in (one change in the range means they share
it: pooling is the best estimate, and a noisy pair no longer blurs it). A candidate is called from its
measurement against the two levels (normal errors, each SD read from its 95 % interval, a level's own SD added
to the candidate's; a commit measured twice is the two looks pooled, inverse-variance weighted):

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

The budget: one regression costs the confirming pair plus at most floor(log2 n) + 1 more; a commit called in
between adds one pair (its second look), and each further regression confirmed ceil(log2 n) more. Retries,
skips and the search share it.
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
    def text(self) -> str:
        return f"{self.pct:+.1f} % [{self.low:+.1f}, {self.high:+.1f}]"

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
    """Narrow (low, high] to one commit and append its finding. A commit called in between is measured again
    (a pair more) before anything is split: one wild pair must not invent a second change. Confirmed, the range
    above it is split off and returned, to be searched next (the budget grows by ceil(log2 n) + 1 in all); not
    confirmed, the second look's call stands."""
    skipped: set[int] = set()
    retried: set[int] = set()
    looked: dict[int, Effect] = {}  # commits called in between once, measured again next
    splits: list[Span] = []
    while high - low > 1:
        k = nearest_untried(low, high, skipped)
        if k is None:
            return _stop(search, splits, (low, high, before, after), "every commit in between was skipped (it could "
                         "not be measured)")  # fmt: skip
        if search.spent >= search.budget:
            why = f"out of pairs ({search.budget} after the confirming one)"
            return _stop(search, splits, (low, high, before, after), why)
        measured = search.measure(k)
        if isinstance(measured, str):
            search.steps.append(Step(k, "skipped", why=measured))
            skipped.add(k)
            continue
        call = classify(measured, before, after)
        if k in looked and call == "between":  # confirmed: the range above it is searched on its own
            level = pooled(looked.pop(k), measured)
            search.steps.append(Step(k, "between", measured, why=f"confirmed; both looks: {level.text}"))
            splits.insert(0, (k, high, level, after))
            search.budget += math.ceil(math.log2(search.n))
            high, after = k, level
            continue
        why = "in between at the first look, not at the second" if looked.pop(k, None) else ""
        level = measured
        if k in retried:  # not clear at the first look: both looks, pooled, decide
            earlier = next(s.effect for s in reversed(search.steps) if s.index == k and s.effect is not None)
            level = pooled(earlier, measured)
            call, why = classify(level, before, after), f"both looks pooled: {level.text}"
        search.steps.append(Step(k, call, measured, why=why))
        if call == "before":  # one more measurement of the low level: pooled into it
            low, before = k, pooled(before, level)
        elif call == "after":
            high, after = k, pooled(after, level)
        elif call == "between":  # measured again first: one wild pair must not invent a second change
            looked[k] = measured
            search.budget += 1
        elif k not in retried and search.spent < search.budget:
            retried.add(k)
        else:
            return _stop(search, splits, (low, high, before, after), f"the effect at commit {k} is not clear: "
                         "between the two ends")  # fmt: skip
    if not distinct(before, after):
        why = "the change across it is not clear: the intervals either side of it overlap"
        return _stop(search, splits, (low, high, before, after), why)
    search.findings.append(Finding(low, high, before, after, clear=True))
    return splits


def _stop(search: Search, splits: list[Span], span: Span, why: str) -> list[Span]:
    """The range left is reported as it is, with why the search stopped there."""
    search.findings.append(Finding(*span, clear=False, why=why))
    return splits


def pooled(first: Effect, second: Effect) -> Effect:
    """Two measurements of one commit as one: their inverse-variance mean and its 95 % interval."""
    if first.sd == 0 or second.sd == 0:
        return first if first.sd == 0 else second
    weights = (1 / first.sd**2, 1 / second.sd**2)
    centre = (first.pct * weights[0] + second.pct * weights[1]) / sum(weights)
    half = Z_95 / math.sqrt(sum(weights))
    return Effect(centre, centre - half, centre + half)


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
    # log of L(before) / L(after): a normal measurement of `effect` around either level, each level's own error
    # added to the measurement's
    log_ratio = _log_likelihood(effect, before) - _log_likelihood(effect, after)
    if math.isnan(log_ratio):
        return "unclear"
    if log_ratio >= math.log(LIKELIHOOD_RATIO):
        return "before"
    if -log_ratio >= math.log(LIKELIHOOD_RATIO):
        return "after"
    return "unclear"


def _log_likelihood(effect: Effect, level: Effect) -> float:
    variance = effect.sd**2 + level.sd**2
    if variance == 0:
        return 0.0 if effect.pct == level.pct else -math.inf
    return -((effect.pct - level.pct) ** 2) / (2 * variance) - math.log(variance) / 2


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
