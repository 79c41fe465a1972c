"""Stability checks. Non-finite steps and divergence are judged on the current run alone (no baseline
needed: a NaN is a failure whatever the baseline did); grad-norm spikes against the baselines' count."""

from __future__ import annotations

from collections.abc import Callable

from canary_action.compare.context import NEW_BASELINE, Context, no_baseline, skipped
from canary_action.compare.result import Check
from canary_action.compare.runs import RunData


def stability_checks(ctx: Context) -> list[Check]:
    return [
        run_status(ctx.current),
        _non_finite(ctx, "nan_steps", "NaN", lambda r: r.num_nan_steps, ctx.thresholds.nan_steps_allowed),
        _non_finite(ctx, "inf_steps", "Inf", lambda r: r.num_inf_steps, ctx.thresholds.inf_steps_allowed),
        _divergence(ctx),
        _spikes(ctx),
    ]


def run_status(run: RunData) -> Check:
    status = run.status
    at = f" at step {status.step}" if status.step is not None else ""
    if status.state == "failed":
        what = f"{status.exception_type or 'error'} during {status.stage or 'the run'}{at}"
        detail = f": {status.message}" if status.message else ""
        return Check(name="run_status", group="stability", status="fail", unit="", message=f"crashed: {what}{detail}")
    if status.state == "stopped_early" and status.reason == "non_finite":
        why = f"stopped early{at} by the non-finite guard: judged by nan_steps / inf_steps"
        return skipped("run_status", "stability", "", why)
    if status.state == "stopped_early" and status.reason == "pair_ended":
        why = f"stopped{at} when the other side of its lockstep pair ended first: the steps both trained are judged"
        fix = "read why the other side ended (its metrics.json and error.log beside this run's), then rerun the pair"
        return skipped("run_status", "stability", "", why, fix=fix)
    if status.state == "stopped_early":
        why = f"stopped early{at}: {status.reason or 'unknown reason'}"
        return Check(name="run_status", group="stability", status="fail", unit="", message=why)
    return Check(
        name="run_status", group="stability", status="pass", unit="", message=f"completed {run.num_steps} steps"
    )


def _non_finite(ctx: Context, name: str, kind: str, get: Callable[[RunData], int], allowed: int) -> Check:
    run = ctx.current
    count = get(run)
    worst = max((get(b) for b in ctx.baselines), default=None)
    if count > allowed:
        where = ", ".join(run.non_finite_keys[:4]) or "the logs"
        first = f"first at step {run.first_non_finite_step}" if run.first_non_finite_step is not None else ""
        message = f"{count} step{'s' if count != 1 else ''} with {kind} ({first}, in {where}); {allowed} allowed"
        status = "fail"
    else:
        message = f"{count} {kind} steps ({allowed} allowed)"
        status = "pass"
    return Check(
        name=name,
        group="stability",
        status=status,
        unit="steps",
        baseline=worst,
        current=count,
        delta=count - worst if worst is not None else None,
        threshold=allowed,
        threshold_unit="steps",
        message=message,
    )


def _divergence(ctx: Context) -> Check:
    run = ctx.current
    if sum(1 for v in run.losses if v is not None) < 15:
        return skipped("loss_divergence", "stability", "", "fewer than 15 finite losses: too short to judge")
    if run.divergence_step is None:
        return Check(name="loss_divergence", group="stability", status="pass", unit="", message="no divergence")
    message = f"the loss diverged from step {run.divergence_step}"
    judged = [b for b in ctx.baselines if b.format == "v1" and b.losses]
    if judged and all(b.divergence_step is not None for b in judged):
        # Every baseline "diverged" too: this config's loss rises by design (e.g. GRPO's loss from 0 with KL).
        steps = ", ".join(str(b.divergence_step) for b in judged)
        return Check(
            name="loss_divergence",
            group="stability",
            status="pass",
            unit="",
            message=f"{message}, as every baseline did (steps {steps}): a rise by design, not a regression",
        )
    return Check(name="loss_divergence", group="stability", status="fail", unit="", message=message)


def _spikes(ctx: Context) -> Check:
    count = ctx.current.num_grad_norm_spikes
    name = "grad_norm_spikes"
    if count is None:
        return skipped(name, "stability", "steps", "grad norms were not recorded")
    counts = [c for b in ctx.baselines if (c := b.num_grad_norm_spikes) is not None]
    if not counts and ctx.baselines:
        why = "no baseline recorded grad norms per step"
        return skipped(name, "stability", "steps", why, current=count, fix=NEW_BASELINE)
    if not counts:
        return no_baseline(name, "stability", "steps", count)
    allowed = max(counts) + ctx.thresholds.grad_norm_spikes_allowed
    return Check(
        name=name,
        group="stability",
        status="warn" if count > allowed else "pass",
        unit="steps",
        baseline=max(counts),
        current=count,
        delta=count - max(counts),
        threshold=allowed,
        threshold_unit="steps",
        message=f"{count} grad-norm spikes (> 3x the recent median); the baselines had at most {max(counts)}",
    )
