"""The comparison result: a versioned JSON document that `canary compare --json` writes and the report and
action read. Closed like metrics.json: a field this version does not know is an error; a new field means a
new result_schema_version.

Numbers are raw (seconds, MiB, percent as 7.9 for +7.9 %); formatting belongs to the reports.
"""

from __future__ import annotations

from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field

from canary_action.config.thresholds import Thresholds, Tier
from canary_action.metrics.pair import CodeDiff
from canary_action.metrics.schema import Distributed

RESULT_FILE: Final = "result.json"
RESULT_SCHEMA_VERSION: Final = 4
#: Versions `canary report` reads: 2 added `pairing`; 3 added the pairing's commits, code diff and allocator, the
#: suspect category `code` and the check `gpu_time`; 4 `numerics`, `heldout` and the checks of the same names;
#: nothing an older reader would misread.
READ_RESULT_VERSIONS: Final = (1, 2, 3, 4)

Verdict = Literal["pass", "regression", "neutral", "crashed"]
CheckStatus = Literal["pass", "fail", "warn", "skip", "not-comparable"]
CheckGroup = Literal["perf", "memory", "stability", "learning"]
SuspectCategory = Literal[
    "dataloader", "tokenization", "kernel", "host", "memory", "communication", "io", "numerics", "dependency",
    "config", "code", "unknown",
]  # fmt: skip
RunFormat = Literal["v1", "rlhf-canary-0.1"]


class Record(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Interval(Record):
    """A confidence interval for a change in percent: [low, high] at `level` (0.95 = 95 %)."""

    low: float
    high: float
    level: float = 0.95


class Check(Record):
    name: str = Field(description="Stable identifier, e.g. step_time, max_memory, nan_steps, loss_curve.")
    group: CheckGroup
    status: CheckStatus
    unit: str = Field(description="Unit of baseline/current/delta: s, tok/s, MiB, %, steps, loss, or ''.")
    baseline: float | None = Field(None, description="The baseline figure (the centre of several baselines).")
    current: float | None = None
    delta: float | None = Field(None, description="current - baseline, in `unit`.")
    delta_pct: float | None = Field(None, description="Relative change in percent (+7.9 = 7.9 % higher).")
    interval: Interval | None = Field(None, description="Confidence interval of delta_pct, for statistical checks.")
    threshold: float | None = Field(
        None,
        description="The limit applied (after widening), in threshold_unit, signed like the change it bounds: "
        "+10 for a 10 % growth limit, -5 for a 5 % drop limit.",
    )
    threshold_unit: str = Field("", description="%, MiB, pp (percentage points), steps...")
    threshold_note: str | None = Field(None, description="Why the limit differs from the tier's (widening).")
    message: str = Field(description="One line: what was found, in words.")
    fix: str | None = Field(
        None,
        description="Set when the check was asked for but not judged (skip, not-comparable): what to change so "
        "that it can be. Such a check makes a verdict neutral at best, never pass.",
    )


class Suspect(Record):
    category: SuspectCategory
    confidence: float = Field(ge=0, le=1, description="0-1, from the weight of the evidence below.")
    summary: str = Field(description="One line naming the likely cause.")
    evidence: list[str] = Field(description="Measurements that point here, most telling first.")
    next_steps: list[str] = Field(description="Concrete things to try or inspect.")
    explains: list[str] = Field(default_factory=list, description="Names of the failing/warning checks it explains.")


class Change(Record):
    """One field that differs between the baseline and the current run (env or config)."""

    field: str
    baseline: str | None
    current: str | None


class OpChange(Record):
    """One profiled op whose self time moved between the baseline and the current profiler window."""

    name: str
    baseline_ms: float | None = Field(description="Self time per profiled step; None: absent in the baseline.")
    current_ms: float | None
    delta_ms: float
    device: bool = Field(description="True when the times are device (CUDA) times, else CPU times.")


class Comparability(Record):
    comparable: bool = Field(description="False when perf/memory checks could not be judged.")
    differences: list[Change] = Field(default_factory=list, description="Workload/hardware fields that differ.")
    allowed: list[str] = Field(default_factory=list, description="Differing fields the user allowed (--allow-change).")
    excluded_baselines: list[str] = Field(default_factory=list, description="Baseline run ids left out, with why.")


class Warmup(Record):
    """The leading steps left out of every run's step times: one cut for all, so that the runs compare the same
    steps (each run's own detected warm-up differs by chance)."""

    steps: int = Field(description="Steps 1..steps of every run were left out of the steady-state figures.")
    method: Literal["auto", "fixed"]
    note: str = Field(description="How the cut was chosen, in words.")


class Noise(Record):
    baseline_runs: int = Field(description="Baselines whose samples entered the statistics.")
    run_spread_pct: float | None = Field(
        None, description="Between-run spread of the baselines' steady step time (SD of log medians, %)."
    )
    run_spread_k: float = Field(description="Perf thresholds are widened to k x run spread when that is larger.")
    method: str = Field(description="How intervals were computed, in words.")


class Pairing(Record):
    """A lockstep comparison: the current run is the head side of a pair, the base side trained beside it."""

    pair_id: str
    base_run_id: str = Field(description="The base side's run (the base commit's code tree).")
    chunk_steps: int = Field(description="Optimizer steps each side trained per turn.")
    rounds: int | None = Field(description="Rounds both sides trained steady steps in (None: step time unjudged).")
    process_spread_pct: float = Field(description="Process-level spread added to the paired interval (%).")
    base_tree: str
    head_tree: str
    base_commit: str | None = Field(None, description="The base side's git commit, when its tree is a checkout.")
    head_commit: str | None = Field(None, description="The head side's git commit, when its tree is a checkout.")
    code: CodeDiff | None = Field(None, description="What the head tree changed against the base tree (pair.json).")
    allocator: Literal["tuned", "default"] | None = Field(
        None, description="The sides' glibc malloc: tuned to keep freed memory (for precision), or as set."
    )
    min_effect_pct: float | None = Field(
        None, description="The paired rule's minimum effect (paired_min_effect_pct) the speed checks were judged by."
    )


class StepSplit(Record):
    """A CUDA run's steady step, split into the GPU's busy time and the rest (host: Python, data, launches, syncs,
    waiting), medians per step, for the current run and its baseline (a pair's base side, else the baselines'
    mean)."""

    step_s: float
    gpu_s: float
    host_s: float
    base_step_s: float | None = None
    base_gpu_s: float | None = None
    base_host_s: float | None = None
    kernels: float | None = Field(None, description="Median kernels per step on the GPU.")
    base_kernels: float | None = None


class NumericsValue(Record):
    name: str = Field(description="loss, gradient norm or weight checksum.")
    base: float | None
    head: float | None


class Numerics(Record):
    """A lockstep pair's training math, side against side, step by step (compare/numerics.py)."""

    state: Literal["identical", "within_tolerance", "changed"]
    judged: bool = Field(description="False where no tolerance was measured: differences are reported, not judged.")
    steps: int = Field(description="Steps compared (both sides logged them).")
    device: str
    dtype: str
    tolerance: float | None = Field(description="Largest relative difference counted as rounding.")
    first_step: int | None = Field(description="changed: the first step beyond the tolerance (else the first unequal).")
    first_weights_step: int | None = Field(description="The first step after which anything differed at all.")
    largest_difference: float | None = Field(
        description="The largest relative difference of a loss or gradient norm (None: one side lacks a value)."
    )
    largest_at: int
    largest_of: str
    values: list[NumericsValue] = Field(description="Both sides' values at first_step.")
    note: str | None = None


class HeldoutSummary(Record):
    """The held-out evaluation as judged (compare/heldout.py): the starting model, the reference and this run."""

    metric: str = Field(description="next_token, preference or reward.")
    label: str = Field(description="In words: held-out loss, held-out preference margin, held-out reward.")
    unit: str
    better: Literal["lower", "higher"]
    basis: Literal["paired", "history"] = Field(
        description="paired: against the lockstep pair's base side, example by example on the same set; history: "
        "against the artifact baselines' evaluations of the same set."
    )
    num_examples: int
    start: float = Field(description="The starting model's figure.")
    reference: float = Field(description="The base side's (paired) or the baselines' mean (history) at the end.")
    current: float
    effect: float = Field(description="How much worse the current run is than the reference (negative: better).")
    interval: Interval = Field(description="Of `effect`, in the metric's unit (low, high; not percent).")
    learning: float = Field(description="How much the reference learned from the start (in the better direction).")
    learning_se: float = Field(description="Standard error of `learning`, over the examples.")
    min_effect: float = Field(description="The smallest worsening that fails (heldout_min_effect_pct of learning).")
    steps: list[int] = Field(default_factory=list, description="Evaluated steps, for the chart.")
    reference_curve: list[float | None] = Field(default_factory=list)
    current_curve: list[float | None] = Field(default_factory=list)
    evaluated_in: str | None = None


class RunRef(Record):
    run_id: str
    source: str = Field(description="The file it was read from.")
    format: RunFormat
    config_name: str
    git_sha: str | None = None
    started_at: str | None = None
    state: Literal["completed", "stopped_early", "failed"]
    num_steps: int
    device: str | None = None
    gpu: str | None = None
    # metrics.json's own block, so that the figures have one definition: world size, strategy, backend, ranks.
    distributed: Distributed | None = Field(None, description="Multi-process runs: world size, strategy, ranks.")


class Curve(Record):
    """A per-step series for charts: the current run against the baseline band, downsampled."""

    name: str = Field(description="The series, e.g. perf/step_time_s or train/loss.")
    steps: list[int]
    current: list[float | None]
    baseline_low: list[float | None]
    baseline_mid: list[float | None]
    baseline_high: list[float | None]


class CompareResult(Record):
    result_schema_version: Literal[1, 2, 3, 4] = RESULT_SCHEMA_VERSION
    verdict: Verdict
    reason: str = Field(description="One line: why this verdict.")
    tier: Tier
    thresholds: Thresholds = Field(description="The thresholds applied, after merging tier, file and config.")
    threshold_sources: list[str] = Field(description="What was merged, in order (tier, file, inline config).")
    current: RunRef
    baselines: list[RunRef]
    checks: list[Check]
    suspects: list[Suspect]
    comparability: Comparability
    noise: Noise | None
    warmup: Warmup | None = Field(None, description="The warm-up cut applied to every run (None: no step times).")
    pairing: Pairing | None = Field(None, description="Set when perf was judged round by round in a lockstep pair.")
    step_split: StepSplit | None = Field(None, description="CUDA runs timed on the GPU: host time against GPU time.")
    env_changes: list[Change] = Field(default_factory=list)
    config_changes: list[Change] = Field(default_factory=list)
    op_changes: list[OpChange] = Field(default_factory=list)
    curves: list[Curve] = Field(default_factory=list)
    numerics: Numerics | None = Field(None, description="A lockstep pair's training math, side against side.")
    heldout: HeldoutSummary | None = Field(None, description="The held-out evaluation, as judged.")
    notes: list[str] = Field(default_factory=list, description="Things the reader should know (fallbacks, exclusions).")
