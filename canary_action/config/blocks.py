"""The nested blocks of a canary config: `profiler`, `heldout`, `capture`, `fault_injection` and `distributed`, and the
strictness every part of the config shares (config/schema.py puts them together)."""

from __future__ import annotations

from typing import Annotated, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from canary_action.config.numbers import NOT_A_BOOL, Count, Number

# Upper limits of what a canary may ask for. A canary is a short run on a sample, and a config may come from a
# pull request: `dataset_size: 10**12` or `max_length: 10**9` would start a run that only ends in running out of
# memory. Each limit is far beyond the ready configs (2,000 steps, 16,000 examples, 1,024 tokens).
MAX_STEPS: Final = 100_000
MAX_TOKENS: Final = 131_072  # the longest context windows in use (128 Ki tokens)
MAX_NEW_TOKENS: Final = 32_768

Strategy = Literal["ddp", "fsdp", "deepspeed"]
Backend = Literal["nccl", "gloo"]
FsdpShardingStrategy = Literal["FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD", "HYBRID_SHARD"]
FsdpAutoWrapPolicy = Literal["TRANSFORMER_BASED_WRAP", "SIZE_BASED_WRAP", "NO_WRAP"]


class StrictModel(BaseModel):
    """Closed: an unknown key is an error (with a "did you mean" from the loader), never ignored.

    No inf/NaN either: YAML spells them `.inf`/`.nan`, and `learning_rate: .inf` would pass `gt=0`."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True, allow_inf_nan=False)


class ProfilerConfig(StrictModel):
    enabled: bool = Field(False, description="Record a torch.profiler window (its steps leave the timing summaries).")
    start_step: Count = Field(
        50, ge=1, le=MAX_STEPS, description=f"First optimizer step inside the profiler window (at most {MAX_STEPS:,})."
    )
    num_steps: Count = Field(
        20, ge=1, le=1000, description="Number of optimizer steps recorded (at most 1,000: a trace per step)."
    )
    output_dir: str = Field(
        "./profiler_traces", description="Where the chrome trace is written (relative: to the run)."
    )
    record_shapes: bool = Field(True, description="Record input shapes of each op.")
    profile_memory: bool = Field(True, description="Record tensor allocations.")
    with_stack: bool = Field(False, description="Record Python stacks (slow; for a closer look only).")
    top_k: Count = Field(
        20, ge=1, le=500, description="How many ops the metrics.json top-ops summary keeps (at most 500)."
    )


HeldoutMetric = Literal["auto", "next_token", "preference", "reward"]


class HeldoutConfig(StrictModel):
    """The held-out evaluation: the trained model, evaluated by the canary's own code on examples the training never
    saw, with a metric fixed by the training type (docs/correctness.md). In a lockstep pair the base side's config
    (the default branch's) decides this block for both sides."""

    enabled: bool = Field(
        True,
        description="Evaluate the trained model on held-out examples and judge it (check heldout_eval); false: "
        "not evaluated, and the check does not apply.",
    )
    metric: HeldoutMetric = Field(
        "auto",
        description="next_token: loss and accuracy of the next token, with the canary's own tokenization (lower "
        "loss is better); preference: how much more the model prefers each chosen answer over the rejected one than "
        "the starting model did (margin of the log-probability ratios, and accuracy; higher is better); reward: mean "
        "reward, by the config's reward, of completions of held-out prompts sampled from a fixed seed (higher is "
        "better). auto: sft -> "
        "next_token, dpo -> preference, grpo/rloo/ppo -> reward, custom -> by the held-out data's columns.",
    )
    num_examples: Count = Field(
        64, ge=8, le=4096, description="Held-out examples evaluated (8 to 4,096; more: a tighter interval, slower)."
    )
    dataset_name: str | None = Field(
        None,
        description="Your own evaluation set: a Hub id or a local .jsonl/.json/.parquet file, its first num_examples "
        "rows; default: the training data's held-out part (builtin data: a held-out split drawn apart from the "
        "training examples; other data: the num_examples rows after the first dataset_size).",
    )
    dataset_split: str | None = Field(None, description="Split of dataset_name to read; default: dataset_split.")
    steps: list[Annotated[Count, Field(ge=1, le=MAX_STEPS)]] | Literal["auto"] = Field(
        "auto",
        max_length=20,
        description="Optimizer steps after which the model is evaluated too (at most 20), besides the start and the "
        "end of training; auto: halfway in runs of 100 steps or more. Only the end is judged; the others show how it "
        "learned.",
    )
    batch_size: Count = Field(16, ge=1, le=1024, description="Examples per evaluation batch (at most 1,024).")


class CaptureConfig(StrictModel):
    """What `canary replay` replays: chosen steps' batches, exactly as the model received them (docs/replay.md).
    Without this block a run still captures its first NaN/Inf step."""

    steps: list[Annotated[Count, Field(ge=1, le=MAX_STEPS)]] = Field(
        default_factory=list,
        max_length=100,
        description=f"Capture these optimizer steps (at most 100 steps, each at most {MAX_STEPS:,}).",
    )
    on_non_finite: bool = Field(
        True, description="Capture the first step whose loss is NaN or Inf (before its update: replayable)."
    )
    on_grad_spike: Number | None = Field(
        None,
        gt=1,
        le=1_000_000,
        description="Capture a step whose gradient norm is more than this many times the median of the steps "
        "before it (from step 5; costs one gradient norm and a synchronisation a step); null: off.",
    )
    on_slow_step: Number | None = Field(
        None,
        gt=1,
        le=1_000,
        description="Capture a step that took more than this many times the median step before it (from step 5; "
        "known only when the step ends, so its weights are those after the update: replayed for time, not for its "
        "loss); null: off.",
    )
    max_captures: Count = Field(8, ge=1, le=1000, description="At most this many steps captured per process.")
    max_step_bytes: Count = Field(
        16 * 2**20,
        ge=2**16,
        le=2**32,
        description="At most this many bytes for one step's batches and weights (16 MiB, at most 4 GiB; weights "
        "past it are left out, and the replay starts from the run's initial weights: timed, its loss not "
        "comparable). In the action the captures travel in the run's artifact, which a publish job downloads only "
        "up to 64 MiB.",
    )


class FaultInjection(StrictModel):
    """Planted faults, to prove the gate catches them (a canary for the canary). Never set in a real gate."""

    nan_loss_at_step: Count | None = Field(
        None,
        ge=1,
        le=MAX_STEPS,
        description=f"Multiply the loss by NaN at this optimizer step (at most {MAX_STEPS:,}).",
    )
    precision_loss_at_step: Count | None = Field(
        None,
        ge=1,
        le=MAX_STEPS,
        description=f"At this optimizer step (at most {MAX_STEPS:,}), multiply the loss by 1 + (log(1 - x) - "
        "log(1 - x)) with x = 1 - 1e-4 in the model's dtype: exactly 1 in fp32, NaN in bf16 and fp16 (x rounds to "
        "1): a planted precision fault, for `canary replay --variant dtype=fp32` to tell apart (docs/replay.md).",
    )
    crash_at_step: Count | None = Field(
        None, ge=1, le=MAX_STEPS, description=f"Raise an exception during this optimizer step (at most {MAX_STEPS:,})."
    )
    grad_spike_at_steps: list[Annotated[Count, Field(ge=1, le=MAX_STEPS)]] = Field(
        default_factory=list,
        max_length=100,
        description=f"Multiply the loss, and so every gradient, by grad_spike_factor at these optimizer steps (at "
        f"most 100 steps, each at most {MAX_STEPS:,}): planted grad-norm spikes, on any machine (grad_norm_spikes "
        "warns; the update is clipped as max_grad_norm says).",
    )
    grad_spike_factor: Number = Field(
        20.0,
        gt=1,
        le=1_000_000,
        description="The factor of the planted gradient spikes (more than 1, at most 1,000,000).",
    )
    sleep_s_per_step: Number = Field(
        0.0,
        ge=0,
        le=60,
        description="Sleep this long inside every step's loss computation (at most 60 s): a planted blocking wait, "
        "timed as compute. On a GPU the sleep starts once the device has finished the work enqueued so far, so the GPU "
        "waits for it even when the step is GPU-bound (a host slowdown that the GPU's work cannot hide). A sleeping "
        "process hands the CPU back, so the rest of its step may run at another speed: "
        "for a slowdown that costs compute as a real regression does, use extra_matmuls_per_step; for a slow data "
        "pipeline, slow_data_s_per_step.",
    )
    slow_data_s_per_step: Number = Field(
        0.0,
        ge=0,
        le=60,
        description="Sleep this long while fetching each step's batches (at most 60 s): a planted slow data pipeline "
        "(a slow disk or network share, per-batch decoding), timed as data wait.",
    )
    extra_matmuls_per_step: Count = Field(
        0,
        ge=0,
        le=10_000,
        description="Do this many extra 256x256 float32 matrix products (at most 10,000) on the run's device inside "
        "every step: a planted compute slowdown (benchmarks/lockstep.py sizes it as a share of the step).",
    )
    gpu_matmuls_per_step: Count = Field(
        0,
        ge=0,
        le=10_000,
        description="CUDA runs: enqueue this many extra 4096x4096 bf16 matrix products on the GPU inside every step, "
        "without waiting for them (at most 10,000): work only the GPU does, a planted kernel slowdown that a "
        "host-bound step hides from step time (the gpu_time check sees it). Refused on the CPU.",
    )
    slow_rank: Count | None = Field(
        None,
        ge=0,
        description="Multi-process runs: this rank sleeps slow_rank_sleep_s inside every step (a planted straggler; "
        "the other ranks wait for it in the gradient all-reduce).",
    )
    slow_rank_sleep_s: Number = Field(
        0.05, ge=0, le=60, description="The planted straggler's sleep per step, in seconds (at most 60)."
    )


#: Settings that belong to one strategy only: set under another, they would be silently ignored.
_STRATEGY_KEYS: Final[dict[str, tuple[str, ...]]] = {
    "ddp": ("find_unused_parameters", "bucket_cap_mb"),
    "fsdp": ("fsdp_sharding_strategy", "fsdp_auto_wrap_policy"),
    "deepspeed": ("zero_stage", "offload_optimizer"),
}


class DistributedConfig(StrictModel):
    """How num_processes > 1 processes share the work (accelerate's launcher starts them)."""

    strategy: Strategy = Field(
        "ddp", description="ddp (replicated model, gradients all-reduced), fsdp or deepspeed (sharded; GPUs only)."
    )
    backend: Backend | None = Field(
        None, description="torch.distributed backend; default: nccl on GPUs, gloo on the CPU."
    )
    find_unused_parameters: bool = Field(
        False, description="ddp: search the graph for parameters without gradients every step (slower)."
    )
    bucket_cap_mb: Count | None = Field(
        None,
        ge=1,
        le=4096,
        description="ddp: gradient bucket size in MiB for the all-reduce (at most 4,096); default: torch's (25).",
    )
    fsdp_sharding_strategy: FsdpShardingStrategy = Field(
        "FULL_SHARD", description="fsdp: what is sharded (FULL_SHARD, SHARD_GRAD_OP, NO_SHARD, HYBRID_SHARD)."
    )
    fsdp_auto_wrap_policy: FsdpAutoWrapPolicy = Field(
        "TRANSFORMER_BASED_WRAP",
        description="fsdp: how modules are wrapped (TRANSFORMER_BASED_WRAP: each decoder layer; SIZE_BASED_WRAP; "
        "NO_WRAP).",
    )
    zero_stage: Annotated[Literal[0, 1, 2, 3], NOT_A_BOOL] = Field(2, description="deepspeed: ZeRO stage (0-3).")
    offload_optimizer: bool = Field(False, description="deepspeed: keep optimizer states in CPU memory (ZeRO-Offload).")

    @model_validator(mode="after")
    def _settings_of_this_strategy(self) -> DistributedConfig:
        # Away from its default only: a resolved config (metrics.json's `config`) lists every key and must load.
        foreign = [
            key
            for strategy, keys in _STRATEGY_KEYS.items()
            if strategy != self.strategy
            for key in keys
            if getattr(self, key) != type(self).model_fields[key].default
        ]
        if foreign:
            raise ValueError(
                f"{', '.join(foreign)} {'does' if len(foreign) == 1 else 'do'} not apply to strategy "
                f"{self.strategy}: remove {'it' if len(foreign) == 1 else 'them'} or change the strategy"
            )
        return self
