"""The metrics.json schema (versioned). One file per canary run; a baseline is the same file.

Raw per-step series are the record; summaries are derived from them (see `summarize.py`) and kept beside
them for readers, never instead of them. Series are columnar: `series["perf/step_time_s"][i]` belongs to
optimizer step `series["step"][i]`. A non-finite value is stored as null in the series (JSON has no NaN)
and listed with its kind in `stability.non_finite`.
"""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal

from pydantic import Field, model_validator

from canary_action.metrics.heldout import HeldoutEval
from canary_action.metrics.records import FAIL_FAST, Closed, Record

__all__ = ["FAIL_FAST", "Closed", "Record"]  # their home is records.py; many modules read them from here

SCHEMA_VERSION: Final = 4
#: Versions this reader takes: 2 added `pair` (lockstep pairs), 3 the GPU's busy time (summary.gpu_busy_*,
#: series gpu/busy_s and gpu/num_kernels), the pair side's `allocator` and `run.startup_s`, 4 `heldout` and the
#: series numerics/weight_sum; each added fields and nothing else, so an older file is a newer one without them.
READ_VERSIONS: Final = (1, 2, 3, 4)

# Series names: namespaced, with units (STYLE 10). Algorithm metrics keep TRL's own key under "algo/".
STEP = "step"
STEP_TIME_S = "perf/step_time_s"
DATA_WAIT_S = "perf/data_wait_s"
GENERATION_S = "perf/generation_s"
#: The process's CPU time over the step (all its threads; time.process_time): beside the step's wall time it shows
#: a process that was stopped or starved (its CPU time per wall second collapses). Lockstep pairs judge by it.
CPU_S = "perf/cpu_s"
#: What tells a slow process from slow code (train/process_counters.py), each the change over the step: user and
#: system CPU time, minor and major page faults, voluntary and involuntary context switches (the whole process),
#: the training thread's time waiting for a CPU while runnable; and the CPU that thread ran on at the step's end.
USER_CPU_S = "proc/user_cpu_s"
SYSTEM_CPU_S = "proc/system_cpu_s"
MINOR_FAULTS = "proc/minor_faults"
MAJOR_FAULTS = "proc/major_faults"
VOLUNTARY_SWITCHES = "proc/voluntary_switches"
INVOLUNTARY_SWITCHES = "proc/involuntary_switches"
RUNQUEUE_WAIT_S = "proc/runqueue_wait_s"
CPU_NUMBER = "proc/cpu"
NUM_TOKENS = "data/num_tokens"
NUM_SAMPLES = "data/num_samples"
LOSS = "train/loss"
GRAD_NORM = "train/grad_norm"
LEARNING_RATE = "train/learning_rate"
#: A checksum of the trainable weights after each optimizer step: the sum of every trainable tensor's float32 sum,
#: added up in float64. Two sides of a lockstep pair train the same batches from the same weights, so with the
#: same math their losses, gradient norms and this checksum are equal, step for step (compare/numerics.py).
WEIGHT_SUM = "numerics/weight_sum"
PEAK_ALLOCATED_MIB = "memory/peak_allocated_mib"
PEAK_RESERVED_MIB = "memory/peak_reserved_mib"
HOST_RSS_MIB = "memory/host_rss_mib"
#: The process's peak resident memory during the step (Linux: VmHWM, reset at every step start); absent elsewhere.
HOST_PEAK_RSS_MIB = "memory/host_peak_rss_mib"
GPU_UTILIZATION_PCT = "gpu/utilization_pct"
#: CUDA runs: the GPU's own busy time in the step (the union of its kernels', copies' and memsets' intervals, from
#: a CUDA-only profiler session; host time and idle gaps excluded) and how many kernels it ran. train/gpu_time.py.
GPU_BUSY_S = "gpu/busy_s"
NUM_GPU_KERNELS = "gpu/num_kernels"
IN_PROFILER_WINDOW = "perf/in_profiler_window"
ALGO_PREFIX = "algo/"
#: Per-rank columns of a multi-process run: f"{RANK_PREFIX}{rank}/compute_s" and f"{RANK_PREFIX}{rank}/comm_s".
RANK_PREFIX = "dist/rank"
#: Lockstep pairs: the round (0, 1, ...) in which each step ran; the other side's steps of a round ran next to it.
PAIR_ROUND = "pair/round"


class RunIdentity(Record):
    run_id: str
    config_name: str
    config_hash: str = Field(description="sha256 of the resolved config, canonical JSON.")
    canary_version: str
    git_sha: str | None = None
    git_dirty: bool | None = None
    started_at: str = Field(description="UTC, ISO 8601 with Z.")
    finished_at: str | None = None
    duration_s: float | None = None
    startup_s: dict[str, float] = Field(
        default_factory=dict,
        description="Seconds before step 1, by part: process (interpreter, imports, config), preflight, build, "
        "load_model, load_data (each stage's own time), trainer_setup (the trainer's preparation inside train()), "
        "and to_step_1 (from the process's start); empty when the run never reached step 1.",
    )


class GPUInfo(Record):
    index: int
    name: str
    memory_total_mib: float
    uuid: str | None = None


class EnvFingerprint(Record):
    python: str
    platform: str
    cpu_model: str | None = None
    cpu_count: int | None = None
    canary: str
    torch: str | None = None
    cuda: str | None = None
    cudnn: str | None = None
    transformers: str | None = None
    trl: str | None = None
    peft: str | None = None
    accelerate: str | None = None
    datasets: str | None = None
    tokenizers: str | None = None
    bitsandbytes: str | None = None
    nccl: str | None = None
    torch_threads: int | None = Field(
        None, description="torch's intra-op CPU threads per training process (config cpu_threads; None: unrecorded)."
    )
    setup_packages: dict[str, str] = Field(
        default_factory=dict,
        description="What a setup command installed over the image (name: version); empty without one.",
    )
    gpu_driver: str | None = None
    gpu_count: int = 0
    gpus: Annotated[list[GPUInfo], FAIL_FAST] = Field(default_factory=list)
    container_image: str | None = Field(
        None, description="From CANARY_IMAGE, set by the runner image: its reference, ghcr.io/…:<version>."
    )
    container_image_revision: str | None = Field(
        None, description="From CANARY_IMAGE_REVISION, set by the runner image: the commit it was built from."
    )
    container_image_digest: str | None = Field(
        None, description="From CANARY_IMAGE_DIGEST: known only after the push, so the workflow sets it."
    )
    fingerprint_hash: str = Field(description="sha256 over the fields above: equal hashes, equal environments.")


class Workload(Record):
    """What was trained on what: the comparability facts that do not live in the config text."""

    device: str = Field(description="cpu, or cuda:<index>.")
    dtype: Literal["fp32", "bf16", "fp16"] = Field(description="The dtype actually used (auto resolved).")
    model_name: str
    model_fingerprint: str = Field(description="sha256 of the model architecture config.")
    num_parameters: int
    num_trainable_parameters: int
    dataset_name: str
    dataset_fingerprint: str = Field(description="sha256 of the examples actually used, in order.")
    num_examples: int


class StepTimeSummary(Record):
    median: float
    mean: float
    p10: float
    p90: float
    mad: float = Field(description="Median absolute deviation.")
    std: float
    min: float
    max: float


class Summary(Record):
    """Derived from the series over the steady-state steps (warm-up and profiler window excluded)."""

    num_steps: int = Field(description="Optimizer steps completed.")
    warmup_steps: int = Field(description="Leading steps excluded from timing summaries.")
    warmup_method: Literal["auto", "fixed"]
    num_steady_steps: int
    first_step_time_s: float | None = Field(description="Step 1 alone: compile, allocator warm-up, first batch.")
    step_time_s: StepTimeSummary | None
    tokens_per_s: float | None = Field(description="Measured non-padding tokens / measured time, steady steps.")
    samples_per_s: float | None
    peak_allocated_mib: float | None
    peak_reserved_mib: float | None
    host_rss_peak_mib: float | None = Field(description="The largest host RSS sampled at a step's end.")
    host_peak_rss_mib: float | None = Field(
        None,
        description="The process's peak resident memory during the steps outside the profiler window (Linux: the "
        "kernel's high-water mark, reset at every step start, so it sees the peak inside a step); None elsewhere.",
    )
    gpu_utilization_mean_pct: float | None
    gpu_busy_median_s: float | None = Field(
        None, description="CUDA runs: median GPU busy time per steady step (kernels and copies, no idle gaps)."
    )
    gpu_busy_share: float | None = Field(
        None,
        description="CUDA runs: GPU busy time / step time over the steady steps timed on the GPU (the rest "
        "is host time: Python, launches, data, waiting).",
    )
    data_wait_share: float | None = Field(description="Share of steady step time spent waiting for batches.")
    generation_share: float | None = Field(description="Share of steady step time spent generating (online RL).")
    final_loss: float | None
    tail_mean_loss: float | None = Field(description="Mean finite loss over the last 10 % of steps (at least 5).")


class NonFiniteEvent(Record):
    step: int
    source: Literal["loss", "grad", "log"]
    key: str = Field(description="The logged key, or 'gradients'.")
    value: Literal["nan", "inf", "-inf"]
    parameters: Annotated[list[str], FAIL_FAST] = Field(
        default_factory=list, description="Parameters with non-finite gradients (first 20)."
    )


class GradNormSpike(Record):
    step: int
    value: float
    reference: float = Field(description="Median grad norm over the preceding window.")


class Stability(Record):
    non_finite: Annotated[list[NonFiniteEvent], FAIL_FAST] = Field(default_factory=list)
    num_nan_steps: int = 0
    num_inf_steps: int = 0
    loss_diverged: bool = False
    divergence_step: int | None = None
    grad_norm_spikes: Annotated[list[GradNormSpike], FAIL_FAST] = Field(default_factory=list)


class ProfiledOp(Record):
    name: str
    count: int
    cpu_self_time_ms: float
    device_self_time_ms: float


class ProfilerSummary(Record):
    trace_path: str | None
    start_step: int
    end_step: int
    cpu_time_total_ms: float
    device_time_total_ms: float
    top_ops: Annotated[list[ProfiledOp], FAIL_FAST]


class RankSummary(Record):
    """One process of a multi-process run, over the steady-state steps."""

    rank: int
    step_time_median_s: float | None = Field(None, description="Median wall time of an optimizer step on this rank.")
    compute_median_s: float | None = Field(
        None, description="Median step time minus the time spent in gradient collectives: the rank's own work."
    )
    comm_median_s: float | None = Field(
        None,
        description="Median time per step in gradient collectives (all-reduce, timed by a DDP communication hook, "
        "waiting for slower ranks included); None where not measured (FSDP, DeepSpeed).",
    )
    peak_allocated_mib: float | None = None
    host_rss_peak_mib: float | None = None


class Distributed(Record):
    """A run over several processes (accelerate's launcher): who was slow, and how long the collectives took.

    Derived by `metrics/merge.py` from each rank's own series over the run summary's steady steps. "The median
    rank" is a rank: the lower median of the ranks' compute medians when their number is even, so with two
    ranks the imbalance is the slow rank against the other one. Per-step figures are in the series columns
    f"{RANK_PREFIX}<k>/compute_s" and f"{RANK_PREFIX}<k>/comm_s" (None where not measured).
    """

    world_size: int = Field(ge=1)
    strategy: Literal["ddp", "fsdp", "deepspeed"]
    backend: str | None = Field(None, description="torch.distributed backend: nccl on GPUs, gloo on CPUs.")
    ranks: Annotated[list[RankSummary], FAIL_FAST]
    slowest_rank: int | None = Field(None, description="The rank with the largest median compute time.")
    rank_imbalance_pct: float | None = Field(
        None, description="(slowest rank's compute - the median rank's compute) / the median rank's, in %."
    )
    comm_share: float | None = Field(
        None, description="Median over ranks of comm_median_s / step_time_median_s: the step's share in collectives."
    )


class PairSide(Record):
    """One side of a lockstep pair: two canaries trained side by side, taking turns every chunk_steps steps."""

    pair_id: str = Field(description="Shared by both sides' metrics.json and the pair's pair.json.")
    side: Literal["base", "head"] = Field(description="base: the base commit's code tree; head: the PR's.")
    chunk_steps: int = Field(
        ge=1, description="Optimizer steps per turn; the series column pair/round has each step's round."
    )
    tree: str = Field(description="The code tree this side ran from.")
    allocator: Literal["tuned", "default"] | None = Field(
        None,
        description="tuned: glibc malloc kept freed memory (the pair's default, for precision); default: glibc as "
        "the environment left it (CANARY_PAIR_MALLOC=default, or MALLOC_* variables already set); None: unrecorded.",
    )


class Status(Record):
    state: Literal["completed", "stopped_early", "failed"]
    reason: str | None = Field(
        None, description="stopped_early: non_finite | timeout | trainer | pair_ended; failed: the error."
    )
    step: int | None = Field(None, description="The optimizer step where the run stopped or failed.")
    stage: str | None = Field(None, description="failed: config | preflight | load_model | load_data | build | train.")
    exception_type: str | None = None
    message: str | None = None


class Metrics(Record):
    schema_version: Literal[1, 2, 3, 4] = SCHEMA_VERSION
    run: RunIdentity
    env: EnvFingerprint
    workload: Workload | None = Field(description="None when the run failed before the model and data were loaded.")
    config: dict[str, Any] = Field(description="The resolved config, every default filled in.")
    series: dict[str, Annotated[list[float | None], FAIL_FAST]]
    summary: Summary | None
    stability: Stability
    profiler: ProfilerSummary | None = None
    distributed: Distributed | None = Field(None, description="Multi-process runs only (num_processes > 1).")
    pair: PairSide | None = Field(None, description="Lockstep pairs only: which side of which pair this run is.")
    heldout: HeldoutEval | None = Field(
        None,
        description="The held-out evaluation of the trained model (a run on its own; a lockstep pair's is in "
        "pair.json); None: not evaluated (heldout.enabled false, a pair's side, or before schema version 4).",
    )
    status: Status
    notices: Annotated[list[str], FAIL_FAST] = Field(
        default_factory=list, description="Config overrides and ignored keys, said aloud."
    )
    measurement_warnings: Annotated[list[str], FAIL_FAST] = Field(
        default_factory=list,
        description="Why the figures may be less trustworthy (throttled GPU, shared host...).",
    )

    @model_validator(mode="after")
    def _columns_align(self) -> Metrics:
        lengths = {name: len(values) for name, values in self.series.items()}
        if len(set(lengths.values())) > 1:
            raise ValueError(f"series columns differ in length: {lengths}")
        if self.series and STEP not in self.series:
            raise ValueError("series has no 'step' column")
        return self
