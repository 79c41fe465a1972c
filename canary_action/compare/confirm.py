"""Confirm before failing: a lockstep pair that fails a speed check is run again, as fresh processes with a new
seed, and the check fails only when the second pair fails it too, or finds the change clearly and of the same
size.

One process can be slow for its whole life while running the same code (docs/lockstep.md, "A slow process"); a
second pair draws new processes, so a slow process rarely repeats, while a slower pull request always does.
`canary pair`, `canary bisect`'s confirming pair and the action all run the second pair (train/launch/confirm_pair.py,
`run_confirmed`); the comparison of a pair whose record names one judges both (compare/command.py), so the
verdict can be recomputed from the files alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from canary_action.compare.result import Check, CompareResult

#: The checks a slow process can fail: the paired speed figures. Confirmed; everything else is judged on the first
#: pair alone (memory, stability, learning and numerics do not depend on how fast a process ran).
SPEED_CHECKS: Final = ("step_time", "tokens_per_sec", "gpu_time")
#: The longest a confirming pair may take, and the longest first pair that is confirmed (seconds). A slow runner
#: pays one more pair per failing pull request at most, never more than this.
CONFIRM_CAP_S: Final = 30 * 60
#: How a warning for a failure that a second pair did not find again starts (bisect does not follow one).
NOT_CONFIRMED: Final = "not confirmed: "
#: Where a pair's confirming pair is written: a folder of its own directory.
CONFIRMATION_DIR: Final = "confirmation"


@dataclass(frozen=True)
class Confirmation:
    """What confirms a pair's speed failures: the second pair's comparison (None when there is none) and its folder,
    or why there is none."""

    second: CompareResult | None
    where: str
    why_not: str | None = None


def failed_speed_checks(result: CompareResult) -> list[str]:
    """The speed checks `result` failed: what a second pair must confirm."""
    return [c.name for c in result.checks if c.name in SPEED_CHECKS and c.status == "fail"]


def confirmed(checks: Sequence[Check], second: Sequence[Check] | None, where: str, why_not: str | None) -> list[Check]:
    """The first pair's checks with each failed speed check confirmed by `second` (the confirming pair's
    checks, both after one cause's restatements; its folder is `where`): it fails when the second pair failed it
    too (saying so when the two sizes disagree), or measured it clearly worse (its interval clear of zero) and of
    the same size (the intervals overlap) while only its own raised limit kept it from failing; it warns, naming
    both pairs' effects, when the second pair judged it and found less. Without a second pair (`why_not` says
    why), or one that did not judge the check, a failure stands, saying it was not confirmed: an unconfirmed
    failure is still a failure, never a pass."""
    out = []
    for check in checks:
        if check.name not in SPEED_CHECKS or check.status != "fail":
            out.append(check)
            continue
        other = next((c for c in second or () if c.name == check.name), None)
        if other is None or other.status not in ("pass", "warn", "fail"):
            why = why_not or (
                f"the confirming pair {where} did not judge it" + (f": {other.message}" if other is not None else "")
            )
            out.append(check.model_copy(update={"message": f"{check.message}; not confirmed by a second pair ({why})"}))
        else:
            out.append(_judged_twice(check, other, where))
    return out


def unconfirmed(check: Check) -> bool:
    """A failure a second pair did not find again: a warning, for a slow process rather than the code."""
    return check.status == "warn" and check.message.startswith(NOT_CONFIRMED)


def _judged_twice(first: Check, second: Check, where: str) -> Check:
    if second.status == "fail":
        # Slower in two sets of processes is slower code. Two failures that differ in size (a large slowdown
        # measured under load varies by more than its intervals say) still fail: a green gate before a broken run
        # is the worst outcome, and a slow process twice in a row, each beyond the limit, is rarer than that.
        said = f"{first.message}; confirmed by a second pair: {effect_text(second)}"
        if not agree(first, second):
            said += " (the two pairs differ in its size: their intervals do not overlap)"
        return first.model_copy(update={"message": said})
    if second.status == "warn" and clearly_worse(first, second) and agree(first, second):
        # A clear change past the minimum effect that the pair's own noise raised limit kept from failing (what a
        # warning with a clear interval is): the second pair answers whether the change is real, and it is.
        said = (
            f"{first.message}; confirmed by a second pair: {effect_text(second)}, clearly worse and of the same "
            "size (under the limit its own noise raised it to)"
        )
        return first.model_copy(update={"message": said})
    said = (
        f"{NOT_CONFIRMED}the first pair measured {effect_text(first)}, a second pair of fresh processes ({where}) "
        f"measured {effect_text(second)} ({second.status}); a process that ran slow, not the code, is the likelier "
        "cause"
    )
    return first.model_copy(update={"status": "warn", "message": said})


def clearly_worse(first: Check, second: Check) -> bool:
    """The second pair's interval lies wholly on the side the first pair failed on (worse, away from zero)."""
    if first.delta_pct is None or second.interval is None:
        return False
    return second.interval.low > 0 if first.delta_pct > 0 else second.interval.high < 0


def agree(first: Check, second: Check) -> bool:
    """The two effects' intervals overlap (either without an interval: they agree when both are worse)."""
    a, b = first.interval, second.interval
    if a is None or b is None:
        return True
    return a.low <= b.high and b.low <= a.high


def effect_text(check: Check) -> str:
    """`+14.2 % [+13.0, +15.5]`, or the change alone without an interval."""
    if check.delta_pct is None:
        return check.message
    text = f"{check.delta_pct:+.1f} %"
    if check.interval is not None:
        text += f" [{check.interval.low:+.1f}, {check.interval.high:+.1f}]"
    return text
