"""Evidence for the suspects, from measurements: the timing breakdown, profiled ops, memory peaks, stability.

A `Clue` is one piece of evidence with the cause it points at, a weight (how strongly it alone points there,
0-1) and the checks it can explain. Timing clues weigh by the share of the step-time growth they account
for, so a component behind 90 % of a slowdown outweighs one behind 15 %. Clues from recorded changes (a
moved library, a changed config key) live in `effects.py`; `suspects.py` weighs them all together.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from canary_action.compare.breakdown import OUTLIER_RATIO, BreakdownDelta, ComponentDelta
from canary_action.compare.memory import host_peak
from canary_action.compare.op_names import short_op_name
from canary_action.compare.result import Change, Check, Numerics, OpChange, StepSplit, SuspectCategory
from canary_action.compare.runs import RunData
from canary_action.metrics.pair import CodeDiff

# What a clue can explain: check names and check groups (a group covers the algorithm checks' open-ended names).
PERF: Final = frozenset({"step_time", "tokens_per_sec", "gpu_utilization", "data_wait_share"})
FIRST: Final = frozenset({"first_step_time"})
MEMORY: Final = frozenset({"memory"})
TRAINING: Final = frozenset(
    {"nan_steps", "inf_steps", "loss_divergence", "grad_norm_spikes", "learning"}
)  # the loss's range
ANY: Final = frozenset({"perf", "memory", "stability", "learning"})
DIST: Final = frozenset({"rank_imbalance", "communication_time"})  # multi-process runs only

MIN_GROWTH: Final = 0.02  # a growth under 2 % of the step is run-to-run noise, too small to split into parts
MIN_SHARE: Final = 0.15  # a component behind less of the growth than this is noise beside the real cause
MIN_TOKENS_CHANGE: Final = 0.02  # padding varies per batch; the steady mean moves well under 1 % by chance
MIN_OP_GROWTH: Final = 0.05  # profiled op times wobble by a few percent between windows
MIN_MEMORY_MIB: Final = 64.0  # below this, peaks move with allocator rounding
FRAGMENTATION_RATIO: Final = 2.0  # reserved grew > 2x what the tensors grew: the cache holds unusable blocks
TOKENIZER_FIELDS: Final = frozenset(
    {"tokenizers", "transformers", "tokenizer_name", "max_length", "max_prompt_length", "packing", "model_name"}
)
NUMERIC_WEIGHTS: Final = {
    "nan_steps": 0.9, "inf_steps": 0.9, "loss_divergence": 0.7, "grad_norm_spikes": 0.5, "loss_curve": 0.4,
    "tail_loss": 0.4,
}  # fmt: skip
ALGO_WEIGHT: Final = 0.3  # reward/KL checks move with the numerics, but with the data and the algorithm too


@dataclass(frozen=True)
class Clue:
    category: SuspectCategory
    weight: float
    evidence: tuple[str, ...]
    scope: frozenset[str]
    summary: str | None = None
    next_steps: tuple[str, ...] = ()


@dataclass(frozen=True)
class Case:
    """Everything the rules read: the runs, the checks that failed or warned, and the diffs."""

    current: RunData
    baselines: Sequence[RunData]
    flagged: Sequence[Check]
    delta: BreakdownDelta | None
    env: Sequence[Change]
    config: Sequence[Change]
    ops: Sequence[OpChange]
    code: CodeDiff | None = None
    """A lockstep pair's code diff: what the head tree changed against the base tree."""
    split: StepSplit | None = None
    """A CUDA run's step split into host and GPU time, beside its baseline's."""
    numerics: Numerics | None = None
    """A lockstep pair's training math, side against side."""

    @property
    def growth_s(self) -> float | None:
        """How much slower the steady step got (s): from the breakdown, else from the step_time check."""
        if self.delta is not None:
            return self.delta.step.delta_s
        return next((c.delta for c in self.flagged if c.name == "step_time" and c.unit == "s"), None)


def explains(scope: frozenset[str], check: Check) -> bool:
    return check.name in scope or check.group in scope


def moved(change: Change) -> str:
    return f"{change.field} {change.baseline or 'none'} → {change.current or 'none'}"


@dataclass(frozen=True)
class _Component:
    get: Callable[[BreakdownDelta], ComponentDelta | None]
    label: str
    category: SuspectCategory
    weight: tuple[float, float]
    """base + slope x the share of the step-time growth."""
    summary: str
    extra: Callable[[BreakdownDelta], str] | None = None
    """A second evidence line."""
    net_of_stalls: bool = False
    """Logging, checkpoint and GC stalls land in compute (the rest of the step): count them once, as io."""


def _outliers(d: BreakdownDelta) -> str:
    # The count tells new stalls from longer ones.
    share = f"{pct(d.baseline_outlier_share)} → {pct(d.current_outlier_share)}"
    return f"steps over {OUTLIER_RATIO:g}× the median: {share} of steady steps"


# Compute is where every cause lands when nothing else moved, so alone it is weak evidence for the kernels.
_COMPONENTS: Final = (
    _Component(lambda d: d.data_wait, "data wait", "dataloader", (0.2, 0.7), "data loading slowed"),
    _Component(lambda d: d.generation, "generation", "kernel", (0.2, 0.6), "generation slowed"),
    _Component(lambda d: d.compute, "compute", "kernel", (0.1, 0.4), "compute (forward, backward, optimizer) slowed",
               net_of_stalls=True),
    _Component(lambda d: d.stall, "stall time", "io", (0.2, 0.6), "periodic stalls (I/O, logging, checkpoints, GC)",
               extra=_outliers),
)  # fmt: skip


def timing_clues(case: Case) -> list[Clue]:
    d = case.delta
    clues: list[Clue] = []
    if d is not None and d.step.delta_s >= MIN_GROWTH * d.step.baseline_s:
        clues = [clue for rule in _COMPONENTS if (clue := _component_clue(rule, d))]
    # Without per-step waits on both sides (an old baseline), the share check is the only measurement.
    if d is None or d.data_wait is None:
        clues += [
            Clue("dataloader", 0.5, (f"data_wait_share: {c.message}",), PERF)
            for c in case.flagged
            if c.name == "data_wait_share"
        ]
    return clues


def _component_clue(rule: _Component, d: BreakdownDelta) -> Clue | None:
    part = rule.get(d)
    if part is None or part.share is None:
        return None
    stalls = max(0.0, d.stall.share or 0.0) if rule.net_of_stalls else 0.0
    share = part.share - stalls
    if share < MIN_SHARE:
        return None
    b, c = ms(part.baseline_s), ms(part.current_s)
    growth = f"the +{ms(d.step.delta_s)} step-time growth" + (" besides the stalls" if stalls else "")
    lines = [f"{rule.label} per step {b} → {c}: explains {pct(share)} of {growth}"]
    if rule.extra is not None:
        lines.append(rule.extra(d))
    weight = rule.weight[0] + rule.weight[1] * min(1.0, share)
    return Clue(rule.category, weight, tuple(lines), PERF, f"{rule.summary}: {b} → {c} per step")


def token_clues(case: Case) -> list[Clue]:
    current = case.current.tokens_per_step
    before = [t for b in case.baselines if (t := b.tokens_per_step) is not None]
    if current is None or not before:
        return []
    base = statistics.fmean(before)
    change = current / base - 1
    if abs(change) < MIN_TOKENS_CHANGE:
        return []
    data = {r.workload.dataset_fingerprint if r.workload else None for r in (case.current, *case.baselines)}
    same = len(data) == 1 and None not in data
    where = "on the same data (dataset fingerprint unchanged)" if same else "(the data differ too)"
    line = f"tokens per step {base:.0f} → {current:.0f} ({pct(change, signed=True, digits=1)}) {where}"
    summary = (
        f"the same data gives {pct(change, signed=True, digits=1)} tokens per step: tokenization or truncation changed"
    )
    other = f"{pct(change, signed=True, digits=1)} tokens per step: longer or shorter sequences reach the model"
    clues = [Clue("tokenization", 0.4 if same else 0.15, (line,), PERF, summary if same else other)]
    changes = [c for c in (*case.env, *case.config) if c.field in TOKENIZER_FIELDS]
    return clues + [Clue("tokenization", 0.3, (moved(c),), PERF) for c in changes]


def op_clues(case: Case) -> list[Clue]:
    top = [o for o in case.ops if o.delta_ms > 0 and (not o.baseline_ms or o.delta_ms >= MIN_OP_GROWTH * o.baseline_ms)]
    if not top:
        return []
    top = top[:3]
    kind = "device" if top[0].device else "CPU"
    total = sum(o.delta_ms for o in top)
    growth = case.growth_s
    weight = 0.25 + 0.6 * min(1.0, total / (growth * 1000)) if growth and growth > 0 else 0.4
    short = {o.name: short_op_name(o.name) for o in top}  # kernels carry their whole C++ signature
    lines = tuple(
        f"{short[o.name]} {kind} time {o.delta_ms:+.2f} ms/step ({pct(o.delta_ms / o.baseline_ms, signed=True)})"
        if o.baseline_ms
        else f"{short[o.name]} {kind} time at least {o.delta_ms:+.2f} ms/step (not in the baseline's top ops)"
        for o in top
    )
    names = ", ".join(short[o.name] for o in top)
    summary = f"slower ops: {names} (+{total:.2f} ms/step {kind} time in the profiler window)"
    first = short[top[0].name]
    steps = (
        f"open both profiler traces and compare {first}: its input shapes and launch count",
        f"check which dependency or config change touches {first}",
    )
    return [Clue("kernel", weight, lines, PERF, summary, steps)]


def memory_clues(case: Case) -> list[Clue]:
    run, clues = case.current, []
    alloc = _with_base(run.peak_allocated_mib, [b.peak_allocated_mib for b in case.baselines])
    reserved = _with_base(run.peak_reserved_mib, [b.peak_reserved_mib for b in case.baselines])
    grown = max(alloc[0] - alloc[1], 0.0) if alloc else 0.0
    held = reserved[0] - reserved[1] if reserved else 0.0
    if reserved and held > MIN_MEMORY_MIB and held > FRAGMENTATION_RATIO * grown:
        line = (f"peak reserved {reserved[1]:.0f} → {reserved[0]:.0f} MiB ({held:+.0f}) while peak allocated grew "
                f"{grown:.0f} MiB: the caching allocator holds {held - grown:.0f} MiB it cannot hand out")  # fmt: skip
        steps = (
            "set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True and rerun",
            "look for shapes that vary per batch (pad sequences to a multiple of 64 or bucket by length)",
        )
        summary = "allocator fragmentation: reserved memory grew far beyond the tensors in use"
        clues.append(Clue("memory", 0.6, (line,), MEMORY, summary, steps))
    if alloc and grown > MIN_MEMORY_MIB:
        growth = f"+{grown:.0f} MiB, {pct(grown / alloc[1], signed=True)}"
        line = f"peak allocated {alloc[1]:.0f} → {alloc[0]:.0f} MiB ({growth})"
        clues.append(Clue("memory", 0.35, (line,), MEMORY, f"tensors need {grown:.0f} MiB more at the peak"))
    clues.extend(_host_memory_clues(case))
    crash = f"{run.status.exception_type or ''}: {run.status.message or ''}"
    if run.status.state == "failed" and "outofmemory" in crash.lower().replace(" ", ""):
        line = f"crashed with {crash[:120]}"
        clues.append(Clue("memory", 0.8, (line,), MEMORY | {"run_status"}, "the run ran out of GPU memory"))
    return clues


def _host_memory_clues(case: Case) -> list[Clue]:
    """A CPU run's peak host RSS against its baselines', none of them profiled (memory.py's host_memory)."""
    run = case.current
    host = _with_base(host_peak(run), [host_peak(b) for b in case.baselines])
    if run.device_kind != "cpu" or host is None or (grown := host[0] - host[1]) <= MIN_MEMORY_MIB:
        return []
    line = f"peak host RSS {host[1]:.0f} → {host[0]:.0f} MiB ({grown:+.0f} MiB, {pct(grown / host[1], signed=True)})"
    steps = (
        "compare the tokens per step and the batch shapes with the baseline's: activations grow with both",
        "rerun both with profiler.enabled: true and profiler.profile_memory: true to see which ops allocate more",
    )
    summary = f"the process holds {grown:.0f} MiB more at its peak (host RSS)"
    return [Clue("memory", 0.35, (line,), MEMORY, summary, steps)]


def numerics_clues(case: Case) -> list[Clue]:
    run = case.current
    scope = TRAINING | ({"run_status"} if run.status.reason == "non_finite" else set())
    steps = _replay_steps(run)
    clues = []
    for check in case.flagged:
        weight = NUMERIC_WEIGHTS.get(check.name, ALGO_WEIGHT if check.group == "learning" else 0.0)
        if weight:
            line, summary = _numeric_finding(run, check)
            clues.append(Clue("numerics", weight, (line,), frozenset(scope), summary, steps))
    return clues


_CAPTURED: Final = re.compile(r"step (\d{1,7}) \(")


def captured_steps(run: RunData) -> list[int]:
    """The steps the run captured for `canary replay`, from its capture notice (train/capture.py)."""
    notices = run.metrics.notices if run.metrics is not None else []
    summaries = [n for n in notices if n.startswith("capture: ") and " MiB under captures/" in n]
    return [int(m.group(1)) for n in summaries for m in _CAPTURED.finditer(n.partition(" in ")[0])][:100]


def _replay_steps(run: RunData) -> tuple[str, ...]:
    """How to reproduce the first NaN/Inf step on the model alone: the run captured it unless told not to."""
    first = run.first_non_finite_step
    if first is None:
        return ()
    if first in captured_steps(run):
        return (
            f"canary replay RUN_DIR --step {first} --variant dtype=fp32 reproduces step {first} on the model alone "
            "(RUN_DIR: this run's folder or its artifact, captures/ inside): NaN under both rows is the code, under "
            "the run's dtype only its precision (docs/replay.md)",
        )
    return (
        f"step {first} was not captured (its loss finite and the NaN in the gradients, capture.on_non_finite off, "
        f"or the capture over its limits): with capture.steps: [{first}], canary replay RUN_DIR --step {first} "
        "reproduces it on the model alone (docs/replay.md)",
    )


def _numeric_finding(run: RunData, check: Check) -> tuple[str, str | None]:
    """The evidence line for a numerics check, from the run's own record where it has one, and a summary."""
    keys = ", ".join(run.non_finite_keys[:4]) or "the loss"
    first = run.first_non_finite_step
    counts = {"nan_steps": (run.num_nan_steps, "NaN"), "inf_steps": (run.num_inf_steps, "Inf")}
    if check.name in counts and first is not None:
        n, kind = counts[check.name]
        return f"{n} {kind} step(s), the first at step {first}, in {keys}", f"{kind} from step {first} in {keys}"
    if check.name == "loss_divergence" and run.divergence_step is not None:
        step = run.divergence_step
        return f"the loss diverged from step {step}", f"training diverged from step {step}"
    return f"{check.name}: {check.message}", None


def ms(seconds: float) -> str:
    value = seconds * 1000
    return f"{value:.0f} ms" if abs(value) >= 10 else f"{value:.1f} ms"


def pct(fraction: float, *, signed: bool = False, digits: int = 0) -> str:
    """0.62 as '62 %' (the reports' spelling); signed: '+62 %'."""
    return f"{fraction * 100:{'+' if signed else ''}.{digits}f} %"


def _with_base(current: float | None, baselines: Sequence[float | None]) -> tuple[float, float] | None:
    values = [v for v in baselines if v is not None]
    return (current, statistics.fmean(values)) if current is not None and values else None
