"""canary bisect's search on modelled measurements: a step function of the commit index, each measurement an
interval that holds the true effect (what a confidence interval promises), placed anywhere inside it."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from canary_action.bisect.search import Effect, bisect, classify, default_budget, distinct, nearest_untried


def truth(index: int, changes: dict[int, float]) -> float:
    """The effect of commit `index` against the good commit: the changes at or before it, added."""
    return sum(size for at, size in changes.items() if at <= index)


def measured(true: float, half_width: float, offset: float) -> Effect:
    """An interval of `half_width` around a point `offset` half-widths from the truth (|offset| < 1: it holds it)."""
    centre = true + offset * half_width
    return Effect(centre, centre - half_width, centre + half_width)


def modelled(changes: dict[int, float], half_width: float, rng: random.Random, skip: frozenset[int] = frozenset()):
    def measure(index: int) -> Effect | str:
        if index in skip:
            return "setup failed"
        return measured(truth(index, changes), half_width, rng.uniform(-0.95, 0.95))

    return measure


@pytest.mark.parametrize("n", [2, 3, 5, 8, 12, 16])
def test_one_regression_is_named_at_every_position_within_the_budget(n: int) -> None:
    for at in range(1, n + 1):
        rng = random.Random(at)
        search = bisect(n, measured(15.0, 2.0, 0.3), modelled({at: 15.0}, 2.0, rng))
        (finding,) = search.findings
        assert (finding.low, finding.high, finding.clear) == (at - 1, at, True), search
        assert 1 + search.spent <= math.log2(n) + 2  # the confirming pair, then the search


@given(
    n=st.integers(2, 16),
    at=st.integers(1, 16),
    size=st.floats(-40, 40).filter(lambda x: abs(x) >= 3),
    width=st.floats(0.05, 1 / 6),
    seed=st.integers(0, 2**16),
    skips=st.frozensets(st.integers(1, 15), max_size=3),
)
def test_a_clear_finding_is_never_a_wrong_commit(  # noqa: PLR0917 (hypothesis passes each drawn value)
    n: int, at: int, size: float, width: float, seed: int, skips: frozenset[int]
) -> None:
    at = min(at, n)
    rng = random.Random(seed)
    half = abs(size) * width
    skips = frozenset(k for k in skips if k < n)
    search = bisect(n, measured(size, half, rng.uniform(-0.95, 0.95)), modelled({at: size}, half, rng, skips))
    for finding in search.findings:
        assert finding.low < at <= finding.high  # the change is inside every range reported
        if finding.clear:
            assert (finding.low, finding.high) == (at - 1, at)
    assert 1 + search.spent <= math.log2(n) + 2


@given(
    n=st.integers(4, 16),
    first=st.integers(1, 15),
    gap=st.integers(1, 14),
    sizes=st.tuples(st.floats(8, 30), st.floats(8, 30)),
    seed=st.integers(0, 2**16),
)
def test_two_regressions_are_both_named_or_said_to_be_more_than_one(
    n: int, first: int, gap: int, sizes: tuple[float, float], seed: int
) -> None:
    first, second = min(first, n - 1), min(first + gap, n)
    changes = {first: sizes[0], second: sizes[1]}
    rng = random.Random(seed)
    half = min(sizes) / 8
    search = bisect(n, measured(sum(sizes), half, 0.0), modelled(changes, half, rng))
    named = {f.high for f in search.findings if f.clear}
    assert named <= {first, second}
    assert len(search.findings) == 2 or named == {first, second}, search.findings
    for finding in search.findings:
        assert any(finding.low < at <= finding.high for at in changes)


def test_a_commit_that_cannot_be_measured_is_skipped_for_its_neighbour() -> None:
    search = bisect(8, Effect(15, 13, 17), modelled({6: 15.0}, 2.0, random.Random(0), frozenset({4})))
    assert [s.index for s in search.steps][:2] == [4, 3] or search.steps[0].call == "skipped"
    assert search.steps[0].why == "setup failed"
    (finding,) = search.findings
    assert (finding.low, finding.high, finding.clear) == (5, 6, True)


def test_when_every_commit_between_is_skipped_the_range_is_reported_not_a_commit() -> None:
    search = bisect(4, Effect(15, 13, 17), modelled({2: 15.0}, 2.0, random.Random(0), frozenset({1, 2, 3})))
    (finding,) = search.findings
    assert (finding.low, finding.high, finding.clear) == (0, 4, False)
    assert "skipped" in finding.why


def test_an_unclear_commit_is_measured_again_then_the_range_is_reported() -> None:
    def measure(index: int) -> Effect:
        return Effect(7.5, 1.0, 14.0)  # astride the middle, every time

    search = bisect(16, Effect(15, 13, 17), measure, budget=10)
    assert [s.call for s in search.steps] == ["unclear", "unclear"]
    (finding,) = search.findings
    assert not finding.clear
    assert (finding.low, finding.high) == (0, 16)
    assert "not clear" in finding.why


def test_a_change_that_is_not_apart_from_noise_names_no_commit() -> None:
    # The last guard: a range narrowed to one commit names it only when the levels either side are apart.
    assert not distinct(Effect(0.3, 0.1, 0.6), Effect(6, 0.5, 11.5))
    assert distinct(Effect(0.3, 0.1, 0.6), Effect(6, 3.5, 8.5))
    assert not bisect(1, Effect(3, -1, 7), lambda _: "never measured").findings[0].clear


def test_a_level_that_is_neither_end_is_a_second_change_even_near_one_end() -> None:
    # +8 % then +24 %: commit 2 measures +7.3 % [6.3, 8.3], a quarter of the way and far from 0 in its own
    # precision; calling it like the good commit would lose the first change.
    changes = {1: 8.0, 3: 24.0}
    search = bisect(4, Effect(32, 31, 33), modelled(changes, 1.0, random.Random(1)))
    assert {(f.high, f.clear) for f in search.findings} == {(1, True), (3, True)}


def test_out_of_pairs_the_narrowed_range_is_reported() -> None:
    search = bisect(16, Effect(15, 13, 17), modelled({11: 15.0}, 1.0, random.Random(0)), budget=2)
    (finding,) = search.findings
    assert not finding.clear
    assert finding.low < 11 <= finding.high
    assert finding.high - finding.low == 4
    assert "out of pairs" in finding.why


@pytest.mark.parametrize(
    ("effect", "call"),
    [
        (Effect(1, -1, 3), "before"),
        (Effect(14, 12, 16), "after"),
        (Effect(7, 5, 9), "between"),
        (Effect(7, 1, 13), "unclear"),
        (Effect(-13, -16, -10), "before"),  # a faster commit is not the slower one
    ],
)
def test_classify_reads_the_interval_against_both_ends(effect: Effect, call: str) -> None:
    assert classify(effect, Effect.zero(), Effect(15, 13, 17)) == call


def test_a_drop_is_searched_as_a_rise_is() -> None:
    assert classify(Effect(-14, -16, -12), Effect.zero(), Effect(-15, -17, -13)) == "after"


def test_the_candidate_is_the_middle_then_its_nearest_neighbours() -> None:
    assert nearest_untried(0, 8, set()) == 4
    assert nearest_untried(0, 8, {4}) == 3
    assert nearest_untried(0, 8, {4, 3}) == 5
    assert nearest_untried(0, 2, {1}) is None
    assert default_budget(1) == 0
    assert default_budget(16) == 5


@pytest.mark.parametrize(("sd", "least_named"), [(1.0, 0.99), (2.0, 0.95), (5.0, 0.0)])
def test_normal_noise_names_the_commit_and_never_a_wrong_one_with_a_clear_claim(sd: float, least_named: float) -> None:
    # Unbounded normal errors (a measurement can land anywhere), the interval the usual 95 % one: at SD 1-2 (a
    # quiet pair, and most pairs beside a hog) the commit is named; at SD 5 (a pair a hog ruined, half the
    # effect's size) bisect mostly stops, and still claims no wrong commit.
    rng = random.Random(int(sd * 10))
    runs, named, wrong = 300, 0, 0
    for _ in range(runs):
        n, at = 16, rng.randint(1, 16)

        def measure(index: int, at: int = at) -> Effect:
            centre = rng.gauss(15.0 if index >= at else 0.0, sd)
            return Effect(centre, centre - 1.96 * sd, centre + 1.96 * sd)

        search = bisect(n, measure(n), measure)
        clear = [f.high for f in search.findings if f.clear]
        wrong += any(high != at for high in clear)
        named += clear == [at] and len(search.findings) == 1
    assert wrong == 0
    assert named >= least_named * runs
