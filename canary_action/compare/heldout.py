"""heldout_eval: does the model the pull request trains do worse on examples its training never saw?

The figure comes from the canary's own evaluation (canary_action/evaluate/), not from the pull request's loss.
Every evaluation of one held-out set (equal fingerprints) scores the same examples, so runs are compared example
by example:

- paired (a lockstep pair): the head side's end against the base side's, per example; the interval is the paired
  differences' t interval.
- history (separate runs): against the mean, per example, of the comparable baselines' ends; the interval adds
  the spread between the baselines (on a GPU their training is not deterministic), as step time's does.

How much worse is too much is measured against what the reference learned: from the starting model's figure to
the reference's, example by example. It fails when it is clearly worse (the interval excludes zero) by more than
heldout_min_effect_pct of that learning (raised to run_spread_k x the baselines' spread, for history). A canary
whose reference did not learn measurably (its learning's interval reaches zero) cannot tell a broken learner from
a working one: the check says so, and the verdict is neutral.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal

from canary_action.compare.context import NEW_BASELINE, Context, no_baseline, not_comparable, skipped, spread
from canary_action.compare.perf import held_to_history
from canary_action.compare.result import Check, HeldoutSummary, Interval
from canary_action.compare.runs import RunData
from canary_action.compare.stats import t_quantile
from canary_action.metrics.heldout import METRICS, HeldoutEval, HeldoutPoint

NAME: Final = "heldout_eval"
GROUP: Final = "learning"
_SKIP_FIXES: Final[dict[str, str | None]] = {
    "off": None,  # it does not apply
    "not_trained": None,  # nan_steps / inf_steps, or the crash, judge the run
    "no_snapshot": "let the canary load the model (a custom trainer_factory: build on context.model), or set "
    "heldout.enabled: false to say that this canary's learning is not judged",
    "not_comparable": "the pull request changes the model, its tokenizer or the seed: the held-out figures of the "
    "two models do not compare; judge it on the default branch once merged",
    "stopped": "rerun the pair",
    "own_process": "build the trainer on context.model, so that a process of the canary's own scores it (a "
    "factory's own model is scored in its training process, which in a pair runs the pull request's code)",
}
TOO_SMALL_FIX: Final = (
    "size the canary so that it learns measurably within its steps (more max_steps, a higher learning_rate, more "
    "held-out examples: docs/correctness.md, 'Sizing a canary')"
)


@dataclass(frozen=True)
class _Ends:
    """The current run's evaluation and the references it is judged against (their ends share its examples)."""

    own: HeldoutEval
    start: HeldoutPoint
    end: HeldoutPoint
    references: list[HeldoutEval]
    basis: Literal["paired", "history"]


def heldout_check(ctx: Context, pair_base: RunData | None) -> tuple[Check, HeldoutSummary | None]:
    """The check and its summary; `pair_base`: the lockstep pair's base side, when the current run is its head."""
    own = ctx.current.heldout
    blamed = _head_not_evaluated(ctx, own, pair_base)
    if blamed is not None:
        return blamed, None
    unjudged = _not_evaluated(own)
    if unjudged is not None or own is None:
        return unjudged or skipped(NAME, GROUP, "", "not evaluated"), None
    if pair_base is not None:
        paired = _judge(ctx, own, [pair_base], "paired")
        history = [b for b in ctx.learning.usable if b is not pair_base and _usable(b, own)]
        if history and paired[1] is not None:
            against = _judge(ctx, own, history, "history")[0]
            return held_to_history(paired[0], against), paired[1]
        return paired
    return _judge(ctx, own, ctx.learning.usable, "history")


def _head_not_evaluated(ctx: Context, own: HeldoutEval | None, pair_base: RunData | None) -> Check | None:
    """A pair whose base side was evaluated and whose head side was not: the head's doing (a snapshot it left
    unreadable or never wrote, its own figure left instead of snapshots, a refusal, a status that claims it never
    trained, an evaluation it ran out of time) fails, since a neutral verdict passes a required check. Not its
    doing (the pair interrupted, the head training another model — a config change, which the publishing job fails
    unless a maintainer accepts it —, both sides' models a factory's own) stays unjudged, with the fix; a head
    stopped by a real NaN, or crashed, is judged by those checks."""
    theirs = pair_base.heldout if pair_base is not None else None
    if own is None or theirs is None or theirs.status != "evaluated" or own.status == "evaluated":
        return None
    if own.status == "skipped" and own.reason in ("off", "not_comparable", "stopped"):
        return None
    # Its own process is the only one that could score it when the base side's model, too, is a factory's own;
    # beside a base side scored from its snapshots, a head that left its own figure instead of snapshots did so.
    if own.reason == "own_process" and theirs.evaluated_in == "side_process":
        return None
    current = ctx.current
    if own.reason == "not_trained" and (current.status.state == "failed" or current.first_non_finite_step is not None):
        return None
    return Check(
        name=NAME, group=GROUP, status="fail", unit="",
        message=f"the pull request's side could not be evaluated on held-out data ({own.message}), and its base "
        "side was: a pull request that cannot be judged on what it learned does not pass",
    )  # fmt: skip


def _not_evaluated(own: HeldoutEval | None) -> Check | None:
    if own is None:
        why = "this run has no held-out evaluation (written before rlhf-canary recorded one, or turned off)"
        return skipped(NAME, GROUP, "", why)
    if own.status == "failed":
        return skipped(
            NAME, GROUP, "", f"the held-out evaluation failed: {own.message}",
            fix="read heldout.log in the run's (or pair's) folder; a rerun evaluates again",
        )  # fmt: skip
    if own.status == "skipped":
        why = own.message or "not evaluated"
        return skipped(NAME, GROUP, "", why, fix=_SKIP_FIXES.get(own.reason or "", "rerun the canary"))
    if own.start is None or own.end is None or not own.start.examples or not own.end.examples:
        return skipped(NAME, GROUP, "", "the held-out evaluation kept no start and end to compare", fix=NEW_BASELINE)
    return None


def _usable(run: RunData, own: HeldoutEval) -> bool:
    theirs = run.heldout
    return (
        theirs is not None
        and theirs.status == "evaluated"
        and theirs.fingerprint == own.fingerprint
        and theirs.end is not None
        and len(theirs.end.examples) == len(own.end.examples if own.end else [])
    )


def _judge(
    ctx: Context, own: HeldoutEval, candidates: Sequence[RunData], basis: Literal["paired", "history"]
) -> tuple[Check, HeldoutSummary | None]:
    # _not_evaluated checked these
    assert own.start is not None
    assert own.end is not None
    assert own.metric is not None
    label, unit, better = METRICS[own.metric]
    references = [r.heldout for r in candidates if _usable(r, own) and r.heldout is not None]
    if not references:
        return _no_reference(ctx, own, candidates, basis), None
    sign = 1.0 if better == "lower" else -1.0
    n = len(own.end.examples)
    ref_examples = [statistics.fmean(values) for values in zip(*(r.end.examples for r in references if r.end),
                                                                  strict=True)]  # fmt: skip
    worse = [sign * (c - r) for c, r in zip(own.end.examples, ref_examples, strict=True)]
    learned = [sign * (s - r) for s, r in zip(own.start.examples, ref_examples, strict=True)]
    effect, se = statistics.fmean(worse), _se(worse)
    learning, learning_se = statistics.fmean(learned), _se(learned)
    ref_means = [r.end.value for r in references if r.end is not None]
    between = spread(ref_means) if basis == "history" and len(ref_means) >= 2 else 0.0
    noise = between * math.sqrt(1 + 1 / len(ref_means))
    t = t_quantile(0.5 + ctx.level / 2, max(n - 1, 1))
    half = t * math.sqrt(se**2 + noise**2)
    reference = statistics.fmean(ref_means)
    current = own.end.value
    t_pct = ctx.thresholds.heldout_min_effect_pct
    limit = max(t_pct / 100 * learning, ctx.thresholds.run_spread_k * noise)
    summary = HeldoutSummary(
        metric=own.metric, label=label, unit=unit, better=better, basis=basis, num_examples=n,
        start=own.start.value, reference=reference, current=current, effect=effect,
        interval=Interval(low=effect - half, high=effect + half, level=ctx.level), learning=learning,
        learning_se=learning_se, min_effect=limit, evaluated_in=own.evaluated_in, **_curves(own, references[0]),
    )  # fmt: skip
    against = "the base side" if basis == "paired" else f"{len(references)} baseline{'s' * (len(references) > 1)}"
    if learning - t * learning_se <= 0:
        why = (f"{against} did not learn measurably on held-out examples: {label} {own.start.value:.4g} → "
               f"{reference:.4g} ({_signed(-sign * learning)} ± {t * learning_se:.2g} {unit}): a canary this "
               "small cannot tell a broken learner from a working one")  # fmt: skip
        return skipped(NAME, GROUP, unit, why, baseline=reference, current=current, fix=TOO_SMALL_FIX), summary
    share = 100 * effect / learning
    interval = Interval(low=100 * (effect - half) / learning, high=100 * (effect + half) / learning, level=ctx.level)
    failed = effect > limit and effect - half > 0
    margin = learning / learning_se if learning_se > 0 else math.inf
    bounds = f"[{_signed(effect - half)}, {_signed(effect + half)}]"
    message = (
        f"{label} {own.start.value:.4g} at the start → {reference:.4g} ({against}) · {current:.4g} (this run): "
        f"{'worse' if effect > 0 else 'better'} by {abs(effect):.3g} {bounds} {unit}, {share:+.1f} % of what "
        f"{against} learned ({learning:.3g}, {_margin(margin)} its standard error)"
    )
    check = Check(
        name=NAME, group=GROUP, status="fail" if failed else "pass", unit=unit, baseline=reference, current=current,
        delta=current - reference, delta_pct=share, interval=interval, threshold=t_pct, threshold_unit="% of learning",
        threshold_note=f"{own.num_examples} held-out examples, {basis}: fails when clearly worse by more than "
        f"{t_pct:g} % of what {against} learned from the starting model ({own.dataset})",
        message=message,
    )  # fmt: skip
    return check, summary


def _no_reference(
    ctx: Context, own: HeldoutEval, candidates: Sequence[RunData], basis: Literal["paired", "history"]
) -> Check:
    if basis == "paired":
        theirs = candidates[0].heldout if candidates else None
        why = theirs.message if theirs is not None and theirs.status != "evaluated" else "it was not evaluated"
        return skipped(NAME, GROUP, "", f"the base side has no held-out figure to compare: {why}",
                       fix="read heldout.log in the pair's folder; rerun the pair")  # fmt: skip
    if not ctx.learning.usable:
        if ctx.learning.differences:
            return not_comparable(NAME, GROUP, "", ctx.learning)
        return no_baseline(NAME, GROUP, "", own.end.value if own.end else None)
    return skipped(
        NAME, GROUP, "", "no baseline evaluated the same held-out examples (recorded before the held-out "
        "evaluation, or with another heldout block)", fix=NEW_BASELINE,
    )  # fmt: skip


def _curves(own: HeldoutEval, reference: HeldoutEval) -> dict[str, list[int] | list[float | None]]:
    steps = sorted({p.step for p in own.points} | {p.step for p in reference.points})
    mine, theirs = {p.step: p.value for p in own.points}, {p.step: p.value for p in reference.points}
    return {"steps": steps, "current_curve": [mine.get(s) for s in steps],
            "reference_curve": [theirs.get(s) for s in steps]}  # fmt: skip


def _se(values: Sequence[float]) -> float:
    return spread(values) / math.sqrt(len(values)) if values else 0.0


def _signed(value: float) -> str:
    return f"{value:+.3g}"


def _margin(ratio: float) -> str:
    return "far beyond" if math.isinf(ratio) else f"{ratio:.0f}×"
