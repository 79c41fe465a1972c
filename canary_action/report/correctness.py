"""The two lines every report gives, under its verdict, about whether the model still learns what it should: the
pair's numerics (the training math, side against side) and the held-out evaluation (the canary's own metric)."""

from __future__ import annotations

from canary_action.compare.result import CompareResult, HeldoutSummary, Numerics
from canary_action.report.escape import Md, text

_STATES = {"identical": "identical", "within_tolerance": "equal within tolerance", "changed": "changed"}


def correctness_lines(result: CompareResult) -> list[Md]:
    lines = []
    if result.numerics is not None:
        lines.append(_numerics(result.numerics))
    check = next((c for c in result.checks if c.name == "heldout_eval"), None)
    if result.heldout is not None:
        lines.append(_heldout(result.heldout, check.status if check is not None else None))
    elif check is not None and check.status in ("skip", "not-comparable"):
        lines.append(Md(f"🎯 **Held-out evaluation**: not judged — {text(check.message, 300)}"))
    return lines


def _numerics(found: Numerics) -> Md:
    where = f"{found.steps} steps, same batches and starting weights"
    if found.state == "identical":
        said = "identical: loss, gradient norm and weights bitwise equal at every step"
    elif found.state == "within_tolerance":
        largest = f"{found.largest_difference:.1e}" if found.largest_difference is not None else "—"
        said = f"equal within tolerance (largest relative difference {largest}, at step {found.largest_at})"
    else:
        values = ", ".join(
            f"{text(v.name, 40)} {_value(v.base)} → {_value(v.head)}" for v in found.values if v.base != v.head
        )
        said = f"**changed from step {found.first_step}**: {values}"
        if not found.judged:
            said += f" (not judged: no tolerance measured for {text(found.device, 20)} {text(found.dtype, 10)})"
    return Md(f"🧮 **Numerics** (the pair's two sides, {where}): {said}")


def _heldout(summary: HeldoutSummary, status: str | None) -> Md:
    against = "base side" if summary.basis == "paired" else "baselines"
    worse = "worse" if summary.effect > 0 else "better"
    verdict = {"pass": "✅", "fail": "❌"}.get(status or "", "⏭️")
    where = "a fresh process of the canary's own" if summary.evaluated_in == "fresh_process" else "the training process"
    return Md(
        f"🎯 **{text(summary.label, 60).capitalize()}** ({summary.num_examples} examples the training never saw, "
        f"scored in {where}): {_value(summary.start)} at the start → {_value(summary.reference)} {against} · "
        f"{_value(summary.current)} this run — {worse} by {abs(summary.effect):.3g} "
        f"[{summary.interval.low:+.3g}, {summary.interval.high:+.3g}] {text(summary.unit, 20)}; the {against} learned "
        f"{summary.learning:.3g} (± {summary.learning_se:.2g}); a worsening fails beyond {summary.min_effect:.3g} "
        f"{verdict}"
    )


def _value(value: float | None) -> str:
    return "none" if value is None else f"{value:.4g}"
