"""The comparison, end to end: comparability, checks, suspects, the verdict. Pure data in, data out.

Verdicts: `crashed` when the current run failed (the measured part is still judged and reported);
`regression` when any check fails; `neutral` when nothing failed but a check that was asked for could not be
judged (no baseline yet, not comparable, too few steady steps for the tier...: each such check carries a `fix`);
`pass` only when every check that applies to the run was judged and none failed.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import replace
from typing import Final

from canary_action.compare import curves, gpu, heldout, numerics, paired, slow_process, window
from canary_action.compare.comparability import LEARNING_FIELDS, PERF_FIELDS, describe, split
from canary_action.compare.confirm import Confirmation, confirmed
from canary_action.compare.context import Context
from canary_action.compare.diff import config_changes, env_changes, op_changes
from canary_action.compare.distributed import distributed_checks
from canary_action.compare.learning import curve_baselines, learning_checks, loss_band
from canary_action.compare.memory import memory_checks
from canary_action.compare.perf import perf_checks
from canary_action.compare.result import Check, Comparability, CompareResult, Noise, Numerics, Pairing, Verdict
from canary_action.compare.runs import RunData
from canary_action.compare.stability import stability_checks
from canary_action.compare.stats import Effect
from canary_action.compare.suspects import rank_suspects
from canary_action.config.thresholds import Thresholds, Tier
from canary_action.metrics.pair import CodeDiff

#: check -> the checks whose failure it restates, the more specific first. Slower steps slow the tokens; a
#: straggler rank or slower collectives slow the step (and name the mechanism); the allocator reserves what the
#: tensors need; a NaN after a blow-up is the same instability.
RESTATES: Final[dict[str, tuple[str, ...]]] = {
    "tokens_per_sec": ("step_time",),
    "step_time": ("rank_imbalance", "communication_time"),
    "max_memory_reserved": ("max_memory",),
    "loss_divergence": ("nan_steps", "inf_steps"),
    # A model that learns worse on held-out data moves its loss and its rewards too; a changed math is how it got
    # there (fail_on_numerics_change).
    **dict.fromkeys(
        ("numerics", "loss_curve", "tail_loss", "reward_accuracy", "reward_margin", "mean_reward", "kl"),
        ("heldout_eval",),
    ),
}  # fmt: skip
_ORDER = {"fail": 0, "warn": 1, "not-comparable": 2, "pass": 3, "skip": 4}
NO_BASELINE = "no baseline yet: run the canary on the default branch and keep its metrics.json as the baseline"


def compare(
    current: RunData,
    baselines: Sequence[RunData],
    thresholds: Thresholds,
    *,
    tier: Tier = "default",
    threshold_sources: Sequence[str] = (),
    allowed: Collection[str] = (),
    notes: Sequence[str] = (),
    code: CodeDiff | None = None,
    trusted_pair: bool = True,
    numerics_accepted: bool = False,
    confirmation: Confirmation | None = None,
) -> CompareResult:
    """Judge `current` against `baselines` (newest first; may be empty: stability is judged alone). `code`: what a
    lockstep pair's head tree changed against its base tree (pair.json), the first suspect when nothing else
    differs. `trusted_pair` False (report mode: the pair came from the job that ran the pull request's code): its
    base side is the partner of the paired checks only, never one of the baselines the other checks, the warm-up
    cut and the history that holds the paired checks (perf.held_to_history) are taken from. `numerics_accepted`: a
    maintainer accepted this commit's change of the training numerics (fail_on_numerics_change). `confirmation`: a
    lockstep pair's confirming pair (compare/confirm.py), which a failed speed check needs to stay failed."""
    untrusted = None if trusted_pair else paired.partner(current, baselines)
    pair_base = untrusted or paired.partner(current, baselines)  # held-out figures compare whatever else differs
    baselines = [b for b in baselines if b is not untrusted]
    perf = split(PERF_FIELDS, baselines, current, allowed)
    learning = split(LEARNING_FIELDS, baselines, current, allowed)
    own_pair = split(PERF_FIELDS, [untrusted], current, allowed).usable if untrusted is not None else []
    warmup = window.common_warmup([current, *perf.usable], thresholds.min_step_count)
    current, *usable = window.apply([current, *perf.usable, *own_pair], warmup)
    history = usable[: len(perf.usable)]
    perf = replace(perf, usable=history)
    partner = usable[-1] if own_pair else paired.partner(current, history)
    ctx = Context(
        current=current, baselines=baselines, perf=perf, learning=learning, thresholds=thresholds, tier=tier,
        partner=partner, numerics_accepted=numerics_accepted,
    )  # fmt: skip
    perf_results, effect = perf_checks(ctx)
    t = thresholds
    band = loss_band(current, curve_baselines(ctx), t.loss_curve_tolerance_pct, t.run_spread_k)
    gpu_time = gpu.gpu_time_check(ctx)
    numerics_check, numerics_found = numerics.numerics_check(ctx)
    heldout_check, heldout_found = heldout.heldout_check(ctx, pair_base)
    checks = [
        *stability_checks(ctx), *perf_results, *([gpu_time] if gpu_time else []), *distributed_checks(ctx),
        *memory_checks(ctx), heldout_check, *([numerics_check] if numerics_check else []),
        *learning_checks(ctx, band),
    ]  # fmt: skip
    checks = gpu.one_cause(one_cause(checks))
    if confirmation is not None:  # after one cause's restatements, as the confirming pair's own checks are
        second = confirmation.second.checks if confirmation.second is not None else None
        checks = confirmed(checks, second, confirmation.where, confirmation.why_not)
    checks.sort(key=lambda c: _ORDER[c.status])  # stable: within a status, the groups keep their order
    newest = baselines[0] if baselines else None
    profiled = next((b for b in baselines if b.profiler is not None and b.profiler_steps), None)
    env = env_changes(newest.env, current.env) if newest else []
    config = config_changes(newest.config, current.config) if newest else []
    ops = op_changes(
        profiled.profiler if profiled else None,
        profiled.profiler_steps if profiled else None,
        current.profiler,
        current.profiler_steps,
    )
    verdict, reason = _verdict(current, baselines, checks, describe(perf.differences), numerics_found)
    host_gpu = gpu.step_split(current, perf.usable, partner)
    all_notes = [f"measurement quality: {w}" for w in current.measurement_warnings] + list(notes)
    stalls = paired.stall_report(current, partner)[0] if partner is not None else None
    all_notes += [stalls] if stalls else []
    process = slow_process.process_note(current, partner, code) if partner is not None else None
    all_notes += [process] if process else []
    if any(b.format == "rlhf-canary-0.1" for b in baselines):
        all_notes.append(
            "an rlhf-canary 0.1 baseline has no per-step samples or fingerprints: its model, dataset and dtype and "
            "the config keys it lacks were taken as this run's (its device was not): see docs/baselines.md"
        )
    return CompareResult(
        verdict=verdict,
        reason=reason,
        tier=tier,
        thresholds=thresholds,
        threshold_sources=list(threshold_sources),
        current=current.ref(),
        baselines=[b.ref() for b in baselines],
        checks=checks,
        suspects=rank_suspects(
            current,
            perf.usable or baselines,
            checks,
            env,
            config,
            ops,
            code=code,
            split=host_gpu,
            numerics=numerics_found,
        ),
        comparability=Comparability(
            comparable=bool(perf.usable) or not baselines,
            differences=perf.differences,
            allowed=sorted(allowed),
            excluded_baselines=perf.excluded,
        ),
        noise=_noise(effect, thresholds, paired.running_time(current, partner) if partner is not None else None),
        warmup=warmup,
        pairing=_pairing(current, partner, effect, code, thresholds),
        step_split=host_gpu,
        env_changes=env,
        config_changes=config,
        op_changes=ops,
        curves=[
            curves.step_time_curve(current, perf.usable),
            curves.loss_curve(current, band),
            *([curves.pair_loss_curve(current, pair_base)] if pair_base is not None else []),
            *([curves.heldout_curve(heldout_found)] if heldout_found is not None else []),
        ],
        numerics=numerics_found,
        heldout=heldout_found,
        notes=all_notes,
    )


def one_cause(checks: Sequence[Check]) -> list[Check]:
    """A failure that restates another check's failure warns instead: one cause never fails two checks."""
    failed = {c.name for c in checks if c.status == "fail"}
    return [_restated(c, first) if c.status == "fail" and (first := _first_failed(c, failed)) else c for c in checks]


def _first_failed(check: Check, failed: set[str]) -> str | None:
    return next((name for name in RESTATES.get(check.name, ()) if name in failed), None)


def _restated(check: Check, primary: str) -> Check:
    message = f"{check.message}; the same cause as the {primary} failure, so a warning here"
    return check.model_copy(update={"status": "warn", "message": message})


def _verdict(
    current: RunData, baselines: Sequence[RunData], checks: Sequence[Check], differs: str, found: Numerics | None
) -> tuple[Verdict, str]:
    failed = [c for c in checks if c.status == "fail"]
    if current.status.state == "failed":
        crash = next(c for c in checks if c.name == "run_status")
        return "crashed", f"the canary run {crash.message}"
    if failed:
        names = ", ".join(c.name for c in failed)
        return (
            "regression",
            f"{len(failed)} check{'s' if len(failed) > 1 else ''} failed ({names}): {failed[0].message}",
        )
    if not baselines:
        return "neutral", NO_BASELINE
    if differs:
        return "neutral", f"not comparable with the baseline ({differs}): perf and memory were not judged"
    unjudged = [c for c in checks if c.fix is not None and c.status in ("skip", "not-comparable")]
    if unjudged:
        names = ", ".join(c.name for c in unjudged)
        first = unjudged[0]
        return "neutral", f"not judged, so no pass: {names} ({first.message}; {first.fix})"
    return "pass", _numerics_changed(checks, found) or _passed(checks)


def _passed(checks: Sequence[Check]) -> str:
    warned = [c.name for c in checks if c.status == "warn"]
    idle = [c.name for c in checks if c.status == "skip"]
    does_not_apply = f"; {len(idle)} did not apply to this run ({', '.join(idle)})" if idle else ""
    if warned:
        return f"no check failed ({len(warned)} warning{'s' if len(warned) != 1 else ''}: {', '.join(warned)})" + (
            does_not_apply
        )
    return "every check that applies passed" + does_not_apply


def _numerics_changed(checks: Sequence[Check], found: Numerics | None) -> str | None:
    """The verdict's reason when a pair passes with its training math changed: said first, with the held-out
    figure that let it pass."""
    numerics_check = next((c for c in checks if c.name == "numerics"), None)
    if found is None or numerics_check is None or numerics_check.status != "warn":
        return None
    held = next((c for c in checks if c.name == "heldout_eval" and c.status == "pass"), None)
    if held is None or held.baseline is None or held.current is None or held.interval is None:
        return None
    low, high = held.interval.low, held.interval.high
    return (
        f"{numerics.describe_change(found)}; the held-out evaluation finds no worse learning: {held.message}"
        f" (within the limit of {held.threshold:g} % of learning; interval {low:+.1f} to {high:+.1f} %)"
    )


def _pairing(
    current: RunData, partner: RunData | None, effect: Effect | None, code: CodeDiff | None, thresholds: Thresholds
) -> Pairing | None:
    head = current.metrics.pair if current.metrics is not None else None
    base = partner.metrics.pair if partner is not None and partner.metrics is not None else None
    if partner is None or head is None or base is None:
        return None
    return Pairing(
        pair_id=head.pair_id, base_run_id=partner.run_id, chunk_steps=head.chunk_steps,
        rounds=effect.paired_rounds if effect is not None else None,
        process_spread_pct=100 * paired.process_sd(current), base_tree=base.tree, head_tree=head.tree,
        base_commit=partner.git_sha, head_commit=current.git_sha, code=code, allocator=head.allocator,
        min_effect_pct=thresholds.paired_min_effect_pct,
    )  # fmt: skip


def _noise(effect: Effect | None, thresholds: Thresholds, timing: paired.Timing | None) -> Noise | None:
    if effect is None:
        return None
    if effect.paired_rounds is not None:
        basis = "" if timing is None or timing is paired.WALL else f" ({timing.basis})"
        return Noise(
            baseline_runs=1,
            run_spread_pct=None,
            run_spread_k=thresholds.run_spread_k,
            method=(
                f"paired A/B: the head and base sides took turns on this runner; per round, the log ratio of their "
                f"median step times{basis}; mean over {effect.paired_rounds} rounds (rounds spread "
                f"{effect.run_spread_pct or 0:.1f} %), interval from that spread plus a process-level spread of "
                f"{effect.prior_spread_pct:.1f} %; {_percent(effect.level)} t interval, {effect.dof} d.o.f."
            ),
        )
    method = (
        "step time: median of steady-state steps on a log scale; within-run error by batch medians "
        "(autocorrelation-safe); run-to-run spread "
        + (f"measured over {effect.num_baselines} baselines" if effect.run_spread_pct is not None else "assumed")
        + f", pooled with a prior of {effect.prior_spread_pct:.1f} %; {_percent(effect.level)} t interval, "
        f"{effect.dof} d.o.f."
    )
    return Noise(
        baseline_runs=effect.num_baselines,
        run_spread_pct=effect.run_spread_pct,
        run_spread_k=thresholds.run_spread_k,
        method=method,
    )


def _percent(level: float) -> str:
    """0.95 -> '95 %', 0.995 -> '99.5 %'."""
    return f"{100 * level:.4g} %"
