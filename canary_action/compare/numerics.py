"""Numerics in a lockstep pair: did the pull request change the training math?

Both sides of a pair train the same batches, in the same order, from the same weights and seed, on one machine.
With the same math they log the same losses and gradient norms and reach the same weights (numerics/weight_sum),
step for step: bitwise on a CPU in fp32 (every real A/A pair here was). So the pair says one of:

- identical: every compared step's loss, gradient norm and weight checksum equal to the bit;
- equal within tolerance: not bitwise, but no loss or gradient norm further apart than NUMERICS_TOLERANCE (a sum
  taken in another order, a loss written another way: rounding, not math);
- changed from step k: the first step whose loss or gradient norm is further apart, with both sides' values.

A change is no failure by itself (a pull request may mean to change the math): the held-out evaluation judges
whether the model learns worse (compare/heldout.py), and the check says so beside it. A team that wants every
change of the math acknowledged sets `fail_on_numerics_change`; a maintainer then accepts it for one commit.
Where no tolerance was measured (CUDA, bf16 on the CPU) the pair reports the largest difference and judges
nothing.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal

from canary_action.compare.context import Context, skipped
from canary_action.compare.result import Check, Numerics, NumericsValue
from canary_action.compare.runs import RunData

NAME: Final = "numerics"
#: Largest relative difference of a step's loss or gradient norm that is rounding, by (device, dtype). CPU fp32:
#: A/A pairs are bitwise equal (0); a loss rewritten in an equal form (log_softmax + gather + masked mean, the
#: correctness benchmark's loss_rewrite pairs) differed by at most 1.9e-7 over 60 steps (docs/correctness.md); 1e-5
#: is 50 times that, and 1,000 times below the smallest real change measured at its first step. Not measured
#: elsewhere yet (CUDA: issue 37's GPU check).
NUMERICS_TOLERANCE: Final[dict[tuple[str, str], float]] = {("cpu", "fp32"): 1e-5}
State = Literal["identical", "within_tolerance", "changed"]


#: (RunData's series, its name in words, whether its relative difference is held to the tolerance). The weight
#: checksum is not: a sum near zero has no scale; it tells identical from not, and where the weights first parted.
_COLUMNS: Final = (("losses", "loss", True), ("grad_norms", "gradient norm", True),
                   ("weight_sums", "weight checksum", False))  # fmt: skip


@dataclass(frozen=True)
class _Series:
    label: str
    base: list[float | None]
    head: list[float | None]
    judged: bool


def numerics_check(ctx: Context) -> tuple[Check | None, Numerics | None]:
    """The check, and what it found; (None, None) when the run is no lockstep pair's head side."""
    current, partner = ctx.current, ctx.partner
    own = current.metrics.pair if current.metrics is not None else None
    if own is None or own.side != "head":
        return None, None
    if partner is None:
        why = "the sides are not comparable (see the perf checks): their numerics were not compared"
        return skipped(NAME, "learning", "", why), None
    found = compare_numerics(current, partner)
    if found is None:
        return skipped(NAME, "learning", "", "the sides logged no step in common"), None
    return _check(ctx, found), found


def compare_numerics(head: RunData, base: RunData) -> Numerics | None:
    """Step by step, the two sides' losses, gradient norms and weight checksums; None without a common step."""
    steps = sorted(set(head.loss_steps) & set(base.loss_steps))
    if not steps:
        return None
    h_at = {s: i for i, s in enumerate(head.loss_steps)}
    b_at = {s: i for i, s in enumerate(base.loss_steps)}
    columns = [
        _Series(label, _at(getattr(base, attribute), b_at, steps), _at(getattr(head, attribute), h_at, steps), judged)
        for attribute, label, judged in _COLUMNS
    ]
    columns = [c for c in columns if any(v is not None for v in (*c.base, *c.head))]
    device = head.device_kind or "unknown"
    dtype = head.workload.dtype if head.workload else "unknown"
    tolerance = NUMERICS_TOLERANCE.get((device, dtype))
    first_bits = next((i for i in range(len(steps)) if any(_bits(c, i) for c in columns)), None)
    largest = max(((_relative(c, i), c.label, steps[i]) for c in columns if c.judged for i in range(len(steps))),
                  default=(0.0, "loss", steps[0]))  # fmt: skip
    largest_value = largest[0] if math.isfinite(largest[0]) else None  # a value one side lacks: no ratio
    first_beyond = None
    if tolerance is not None:
        first_beyond = next(
            (i for i in range(len(steps)) if any(c.judged and _relative(c, i) > tolerance for c in columns)), None
        )
    state: State = "identical" if first_bits is None else "changed" if first_beyond is not None else "within_tolerance"
    at = first_beyond if first_beyond is not None else first_bits
    return Numerics(
        state=state if tolerance is not None or state == "identical" else "changed",
        judged=tolerance is not None,
        steps=len(steps),
        device=device,
        dtype=dtype,
        tolerance=tolerance,
        first_step=steps[at] if at is not None else None,
        first_weights_step=steps[first_bits] if first_bits is not None else None,
        largest_difference=largest_value,
        largest_at=largest[2],
        largest_of=largest[1],
        values=[NumericsValue(name=c.label, base=c.base[at], head=c.head[at]) for c in columns]
        if at is not None
        else [],
        note=_ends(head, base),
    )


def _check(ctx: Context, found: Numerics) -> Check:
    fields = {"name": NAME, "group": "learning", "unit": "", "current": found.largest_difference}
    largest = _ratio(found.largest_difference)
    if found.state == "identical":
        message = f"identical: loss, gradient norm and weights bitwise equal at all {found.steps} steps"
        return Check(status="pass", message=message + _with(found.note), **fields)
    if found.state == "within_tolerance":
        message = (f"equal within tolerance: largest relative difference {largest} "
                   f"({found.largest_of}, step {found.largest_at}); tolerance {found.tolerance:.0e}")  # fmt: skip
        return Check(status="pass", message=message + _with(found.note), threshold=found.tolerance, **fields)
    if not found.judged:
        why = (f"not judged: no tolerance measured for {found.device} {found.dtype} yet; the sides first differ at "
               f"step {found.first_step}, by at most {largest} ({found.largest_of})")  # fmt: skip
        return skipped(NAME, "learning", "", why + _with(found.note))
    message = describe_change(found)
    if not ctx.thresholds.fail_on_numerics_change:
        return Check(status="warn", message=message, threshold=found.tolerance, **fields)
    if ctx.numerics_accepted:
        said = f"{message}; accepted for this commit by a maintainer (accept-numerics-change)"
        return Check(status="pass", message=said, threshold=found.tolerance, **fields)
    said = message + "; fail_on_numerics_change asks for an acknowledgment"
    fix = "if the change is intended, a maintainer accepts it for this commit (accept-numerics-change)"
    return Check(status="fail", message=said, threshold=found.tolerance, fix=fix, **fields)


def describe_change(found: Numerics) -> str:
    """ "changed from step 1: loss 8.3142 → 7.2833, gradient norm 2.31 → 7.42"."""
    values = ", ".join(f"{v.name} {_value(v.base)} → {_value(v.head)}" for v in found.values if v.base != v.head)
    return f"this pull request changes the training numerics from step {found.first_step}: {values}"


def _with(note: str | None) -> str:
    return f" ({note})" if note else ""


def _ends(head: RunData, base: RunData) -> str | None:
    h, b = max(head.loss_steps, default=0), max(base.loss_steps, default=0)
    if h == b:
        return None
    return f"compared up to step {min(h, b)}: the {'head' if h < b else 'base'} side stopped there"


def _at(values: Sequence[float | None], index: dict[int, int], steps: Sequence[int]) -> list[float | None]:
    return [values[index[s]] if index[s] < len(values) else None for s in steps]


def _bits(column: _Series, i: int) -> bool:
    """Whether the sides' values at row i differ at all (one missing where the other is not, included)."""
    return column.base[i] != column.head[i]


def _relative(column: _Series, i: int) -> float:
    a, b = column.base[i], column.head[i]
    if a == b:
        return 0.0
    if a is None or b is None or not (math.isfinite(a) and math.isfinite(b)):
        return math.inf
    return abs(a - b) / max(abs(a), abs(b))


def _ratio(value: float | None) -> str:
    return "a value one side lacks" if value is None else f"{value:.1e}"


def _value(value: float | None) -> str:
    return "none" if value is None else f"{value:.6g}"
