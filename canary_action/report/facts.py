"""What a report says about how the comparison was made: the Paired A/B line under the verdict, and the facts
at the end of every report (the runs, the pairing or the noise, the host/GPU split, the thresholds)."""

from __future__ import annotations

from canary_action.compare.result import CompareResult, RunRef, StepSplit
from canary_action.metrics.io import counted
from canary_action.report.escape import Md, code, text


def paired_line(result: CompareResult) -> Md | None:
    pairing = result.pairing
    if pairing is None:
        return None
    # The rounds judged, not all the pair trained: the note on the pair (`canary pair`) gives both counts.
    rounds = (
        f"{pairing.rounds} rounds judged, after the warm-up"
        if pairing.rounds is not None
        else "too few rounds after the warm-up to judge speed"
    )
    history = len(result.baselines) - 1
    extra = f"; {history} artifact baseline{'s' if history != 1 else ''} for the learning checks" if history > 0 else ""
    rule = (
        f" Speed is judged by the pair's own precision: a change fails when it is clear and above the "
        f"{pairing.min_effect_pct:g} % minimum effect (raised to the pair's noise when that is larger)."
        if pairing.min_effect_pct is not None
        else ""
    )
    allocator = (
        " Both sides ran with glibc malloc tuned to keep freed memory, for precision: a training run under glibc's "
        "default pays page faults for what it allocates, so a change that allocates host memory can cost it more."
        if pairing.allocator == "tuned"
        else ""
    )
    return Md(
        f"⚖️ **Paired A/B** on this runner: the PR's code ({_side(pairing.head_commit, pairing.head_tree)}) and its "
        f"base commit ({_side(pairing.base_commit, pairing.base_tree)}) took turns, {pairing.chunk_steps} steps at a "
        f"time — {rounds}{extra}.{rule}{allocator}"
    )


def _side(commit: str | None, tree: str) -> str:
    """A side's commit, else its tree's path."""
    return f"`{code(commit[:12])}`" if commit else f"tree {text(tree, 120)}"


def _processes(ref: RunRef) -> str:
    """', 2 processes, ddp, gloo' for a multi-process run; '' for one process."""
    dist = ref.distributed
    if dist is None:
        return ""
    size = f"{dist.world_size} process{'es' if dist.world_size != 1 else ''}"
    parts = [size, text(dist.strategy, 20), *([text(dist.backend, 40)] if dist.backend else [])]
    return ", " + ", ".join(parts)


def facts(result: CompareResult) -> list[Md]:
    cur = result.current
    where = cur.gpu or cur.device or "unknown device"
    facts = [
        Md(f"This run: {text(cur.run_id, 80)} — {cur.state}, {cur.num_steps} steps on {text(where, 60)}"
           + _processes(cur) + (f", commit `{code(cur.git_sha[:12])}`" if cur.git_sha else "")),
    ]  # fmt: skip
    if result.baselines:
        shas = ", ".join(f"`{code(b.git_sha[:12])}`" for b in result.baselines if b.git_sha) or "unknown commits"
        facts.append(Md(f"Baselines: {counted(len(result.baselines), 'run')} — {shas}"))
    if result.pairing is not None:
        pairing = result.pairing
        facts.append(
            Md(f"Paired with: {text(pairing.base_run_id, 80)} (base tree `{code(pairing.base_tree, 60)}`); "
               f"process-level spread {pairing.process_spread_pct:.1f} % in every interval")
        )  # fmt: skip
    elif result.noise is not None:
        spread = result.noise.run_spread_pct
        measured = f"{spread:.1f} %" if spread is not None else "not measured (one baseline)"
        facts.append(Md(f"Run-to-run spread: {measured}; limits widen to {result.noise.run_spread_k:g} × the noise"))
    if result.step_split is not None:
        facts.append(_split_line(result.step_split))
    facts.append(Md(f"Thresholds: {', '.join(text(s, 120) for s in result.threshold_sources) or result.tier}"))
    return facts


def _split_line(split: StepSplit) -> Md:
    """The steady step, host against GPU: where a slower step's time went."""

    def side(step: float, gpu: float, host: float, kernels: float | None) -> str:
        count = f", {kernels:,.0f} kernels" if kernels is not None else ""
        return f"host {_ms(host)} + GPU {_ms(gpu)} ({100 * gpu / step:.0f} % of the step busy{count})"

    line = f"Step split (steady medians): {side(split.step_s, split.gpu_s, split.host_s, split.kernels)}"
    if split.base_step_s and split.base_gpu_s is not None and split.base_host_s is not None:
        line += f" · baseline {side(split.base_step_s, split.base_gpu_s, split.base_host_s, split.base_kernels)}"
    return Md(line)


def _ms(seconds: float) -> str:
    return f"{1000 * seconds:,.1f} ms"
