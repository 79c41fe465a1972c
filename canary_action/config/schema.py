"""CanaryConfig: the closed schema of a canary run, one class per algorithm family.

A superset of the flat format users of rlhf-canary 0.1 already write: every old key keeps its name, default
and meaning; new keys extend it. The docs live on the fields: `canary init-config` writes them as comments.
"""

from __future__ import annotations

import re
from typing import Annotated, Final, Literal, get_args

from pydantic import Field, field_validator, model_validator

from canary_action.config.blocks import (
    MAX_NEW_TOKENS,
    MAX_STEPS,
    MAX_TOKENS,
    CaptureConfig,
    DistributedConfig,
    FaultInjection,
    HeldoutConfig,
    ProfilerConfig,
    StrictModel,
)
from canary_action.config.numbers import Count, Number
from canary_action.config.thresholds import ThresholdFile
from canary_action.train.builtin import catalog

TrainingType = Literal["sft", "dpo", "grpo", "rloo", "ppo", "custom"]
Dtype = Literal["auto", "fp32", "bf16", "fp16"]
Device = Literal["auto", "cuda", "cpu"]
AttnImplementation = Literal["eager", "sdpa", "flash_attention_2", "flash_attention_3", "flex_attention"]
DpoLossType = Literal[
    "sigmoid", "hinge", "ipo", "exo_pair", "nca_pair", "robust", "bco_pair", "sppo_hard", "aot", "aot_pair",
    "apo_zero", "apo_down", "discopop", "sft",
]  # fmt: skip

_IMPORT_PATH = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")


class CommonConfig(StrictModel):
    """Keys every training type shares."""

    # identity
    name: str = Field(description="Canary name: names the baseline artifact and the sticky PR comment.")
    description: str = Field("", description="Free text shown in reports.")
    training_type: TrainingType = Field(description="sft, dpo, grpo, rloo, ppo or custom.")
    # model
    model_name: str = Field(
        "EleutherAI/pythia-70m",
        description="Hub id, local directory, or builtin:<name> (random weights, no download: "
        + ", ".join(catalog.MODELS)
        + ").",
    )
    model_revision: str | None = Field(None, description="Hub revision (branch, tag or commit) of the model.")
    tokenizer_name: str | None = Field(
        None,
        description="Tokenizer hub id or path; default: the model's own (builtin models: the builtin tokenizer).",
    )
    dtype: Dtype = Field(
        "auto",
        description="auto = bf16 on a CUDA GPU that supports it, else fp16 on CUDA, fp32 on CPU. "
        "fp16 on CPU is refused.",
    )
    device: Device = Field(
        "auto", description="cuda fails fast when no GPU is visible; auto takes a GPU if there is one."
    )
    attn_implementation: AttnImplementation | None = Field(
        None, description="Attention kernel; default: transformers' choice."
    )
    gradient_checkpointing: bool = Field(False, description="Recompute activations in the backward pass.")
    torch_compile: bool = Field(
        False, description="Compile the model with torch.compile (compile time is reported apart)."
    )
    use_peft: bool = Field(True, description="Train LoRA adapters instead of the full model.")
    lora_r: Count = Field(16, ge=1, le=4096, description="LoRA rank (at most 4,096).")
    lora_alpha: Count = Field(32, ge=1, description="LoRA alpha.")
    lora_dropout: Number = Field(0.05, ge=0, lt=1, description="LoRA dropout.")
    lora_target_modules: list[str] | Literal["all-linear"] | None = Field(
        None, description="Modules LoRA wraps; default: PEFT's choice for the architecture."
    )
    load_in_4bit: bool = Field(False, description="Load the base model in 4 bit (bitsandbytes; CUDA only).")
    load_in_8bit: bool = Field(False, description="Load the base model in 8 bit (bitsandbytes; CUDA only).")
    # data
    dataset_name: str = Field(
        "Anthropic/hh-rlhf",
        description="Hub id, local .jsonl/.json/.parquet file, or builtin:<name> ("
        + ", ".join(catalog.DATASETS)
        + ").",
    )
    dataset_split: str = Field("train", description="Split to read.")
    dataset_subset: str | None = Field(None, description="Hub dataset configuration (subset) name.")
    dataset_revision: str | None = Field(None, description="Hub revision of the dataset.")
    dataset_size: Count = Field(
        1024, ge=1, le=1_000_000, description="Number of examples taken (the first N of the split; at most 1,000,000)."
    )
    max_length: Count = Field(
        256,
        ge=8,
        le=MAX_TOKENS,
        description=f"Maximum tokens per sequence (prompt + completion; at most {MAX_TOKENS:,}).",
    )
    max_prompt_length: Count = Field(64, ge=1, description="Maximum prompt tokens (longer prompts keep their end).")
    # optimisation
    max_steps: Count = Field(
        100, ge=1, le=MAX_STEPS, description=f"Optimizer steps in the canary run (at most {MAX_STEPS:,})."
    )
    batch_size: Count = Field(2, ge=1, le=1024, description="Per-device micro-batch size (at most 1,024).")
    gradient_accumulation_steps: Count = Field(
        4, ge=1, le=1024, description="Micro-batches per optimizer step (at most 1,024)."
    )
    learning_rate: Number = Field(5e-5, gt=0, description="Peak learning rate.")
    warmup_steps: Count = Field(
        10, ge=0, le=MAX_STEPS, description=f"Learning-rate warm-up steps (at most {MAX_STEPS:,})."
    )
    max_grad_norm: Number = Field(1.0, ge=0, description="Gradient clipping norm (0 disables clipping).")
    seed: Count = Field(
        42,
        ge=0,
        le=2**32 - 1,
        description="Seed for weights of builtin models, data order and dropout (0 to 4,294,967,295, numpy's range).",
    )
    output_dir: str = Field(
        "./canary_output",
        description="Where `canary run` writes runs: <output_dir>/<run_id>/metrics.json (the action writes to its "
        "output-dir input instead, and says so when this is set otherwise).",
    )
    # processes
    num_processes: Count = Field(
        1,
        ge=1,
        le=64,
        description="Processes (one per GPU; on the CPU, gloo) launched through accelerate on this machine (at most "
        "64); 1: no launcher.",
    )
    distributed: DistributedConfig | None = Field(
        None, description="Multi-process settings (strategy, backend); default with num_processes > 1: ddp."
    )
    cpu_threads: Annotated[Count, Field(ge=1, le=1024)] | Literal["auto"] = Field(
        1,
        description="torch intra-op threads per process when training on the CPU (torch.set_num_threads; at most "
        "1,024); auto: torch's default (one per core) for one process, cores / num_processes for several. 1 keeps CPU "
        "canaries steady on a shared machine (docs/benchmarks.md); a GPU run keeps torch's default.",
    )
    # measurement
    metrics_warmup_steps: Annotated[Count, Field(ge=0, le=MAX_STEPS)] | Literal["auto"] = Field(
        "auto",
        description=f"Steps excluded from timing summaries: a number (at most {MAX_STEPS:,}), or auto (detected from "
        "the step times).",
    )
    stop_on_non_finite: bool = Field(
        True, description="Stop at the first NaN/Inf loss or gradient (still writes metrics)."
    )
    gpu_time: bool = Field(
        True,
        description="CUDA runs: record the GPU's own busy time per step (kernel records of CUDA-only profiler "
        "sessions, read between steps) and judge it (check gpu_time); false: not measured. No effect on the CPU.",
    )
    timeout_minutes: Number = Field(
        60.0, gt=0, description="Wall-clock limit of the training loop; the run stops early after it."
    )
    profiler: ProfilerConfig = Field(default_factory=ProfilerConfig, description="torch.profiler window.")
    heldout: HeldoutConfig = Field(
        default_factory=HeldoutConfig,
        description="The held-out evaluation of the trained model, by the canary's own code (docs/correctness.md).",
    )
    thresholds: ThresholdFile | None = Field(
        None,
        description="Comparison thresholds for this canary: the keys of a thresholds file, base_tier included, "
        "merged last, over the compare-time tier and file (docs/compare.md).",
    )
    capture: CaptureConfig = Field(
        default_factory=CaptureConfig,
        description="Steps captured for `canary replay` (docs/replay.md); by default only the first NaN/Inf step.",
    )
    fault_injection: FaultInjection | None = Field(None, description="Planted faults for testing the gate itself.")

    @field_validator("name")
    @classmethod
    def _name_is_a_slug(cls, value: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}", value):
            raise ValueError("use 1-100 letters, digits, '.', '_' or '-' (it names files and an artifact)")
        return value

    @field_validator("model_name", "tokenizer_name")
    @classmethod
    def _builtin_model_exists(cls, value: str | None) -> str | None:
        return _known_builtin_model(value)

    @field_validator("dataset_name")
    @classmethod
    def _builtin_dataset_exists(cls, value: str) -> str:
        builtin = catalog.split(value)
        if builtin is not None and builtin not in catalog.DATASETS:
            raise ValueError(f"unknown builtin dataset {builtin!r}; builtin datasets: {', '.join(catalog.DATASETS)}")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> CommonConfig:
        if self.load_in_4bit and self.load_in_8bit:
            raise ValueError("load_in_4bit and load_in_8bit exclude each other: pick one")
        if (self.load_in_4bit or self.load_in_8bit) and not self.use_peft:
            raise ValueError("a quantized base model cannot be trained in full: set use_peft: true")
        if self.max_prompt_length >= self.max_length:
            raise ValueError(
                f"max_prompt_length ({self.max_prompt_length}) must be below max_length ({self.max_length})"
            )
        self._check_processes()
        self._check_profiler_window()
        self._check_heldout()
        builtin = catalog.split(self.dataset_name)
        if builtin is not None and catalog.DATASETS[builtin] not in self.accepted_dataset_kinds():
            raise ValueError(
                f"builtin:{builtin} holds {catalog.DATASETS[builtin]} data; {self.training_type} needs "
                + " or ".join(self.accepted_dataset_kinds())
            )
        return self

    def _check_processes(self) -> None:
        slow_rank = self.fault_injection.slow_rank if self.fault_injection else None
        if slow_rank is not None and self.num_processes == 1:
            raise ValueError(
                "fault_injection.slow_rank plants a straggler among several processes: set num_processes >= 2 "
                "(fault_injection.sleep_s_per_step slows a single process)"
            )
        if slow_rank is not None and slow_rank >= self.num_processes:
            raise ValueError(
                f"fault_injection.slow_rank {slow_rank} does not exist: ranks are 0..{self.num_processes - 1}"
            )
        strategy = self.distributed.strategy if self.distributed else "ddp"
        # One process never wraps the model: a sharded strategy would go unmeasured while its name says otherwise.
        # (distributed.strategy ddp with one process changes nothing: the loader says so in a notice.)
        if strategy != "ddp" and self.num_processes == 1:
            raise ValueError(
                f"distributed.strategy {strategy} needs num_processes >= 2: one process runs without a launcher "
                "and would not shard anything"
            )
        if self.device == "cpu" and strategy != "ddp":
            raise ValueError(f"distributed.strategy {strategy} runs on GPUs only: use ddp on the CPU (gloo)")
        if self.device == "cpu" and self.distributed and self.distributed.backend == "nccl":
            raise ValueError("distributed.backend nccl needs GPUs: use gloo (or leave it unset) on the CPU")

    def _check_profiler_window(self) -> None:
        """A window past max_steps records nothing (or part of what was asked), and would say nothing."""
        window = self.profiler
        if not window.enabled:
            return
        last = window.start_step + window.num_steps - 1
        if last <= self.max_steps:
            return
        if window.start_step > self.max_steps:
            recorded = "it would record nothing"
        elif window.start_step == self.max_steps:
            recorded = f"it would record only step {self.max_steps}"
        else:
            recorded = f"it would record only steps {window.start_step}-{self.max_steps}"
        if window.num_steps <= self.max_steps:
            fits = f"set profiler.start_step to at most {self.max_steps - window.num_steps + 1}"
        elif window.start_step <= self.max_steps:
            fits = f"set profiler.num_steps to at most {self.max_steps - window.start_step + 1}"
        else:
            fits = f"move the window (profiler.start_step, profiler.num_steps) inside steps 1-{self.max_steps}"
        raise ValueError(
            f"the profiler window (profiler.start_step {window.start_step}, profiler.num_steps {window.num_steps}: "
            f"steps {window.start_step}-{last}) ends past max_steps ({self.max_steps}): {recorded}. {fits.capitalize()}"
            f", raise max_steps to {last}, or set profiler.enabled: false"
        )

    def _check_heldout(self) -> None:
        steps = self.heldout.steps
        late = [s for s in steps if s >= self.max_steps] if steps != "auto" else []
        if late:
            raise ValueError(
                f"heldout.steps {late} {'is' if len(late) == 1 else 'are'} not before max_steps ({self.max_steps}): "
                "the end of training is always evaluated; list steps inside the run"
            )
        if self.heldout.metric == "reward" and not self.has_reward():
            raise ValueError(
                "heldout.metric reward scores completions with the config's reward: this training type has none "
                "(use next_token or preference, or auto)"
            )

    def has_reward(self) -> bool:
        """Whether the config names a reward the held-out evaluation can score completions with."""
        return False

    def accepted_dataset_kinds(self) -> tuple[catalog.DatasetKind, ...]:
        """Data shapes this family can train on; custom trainers bring their own data, so all."""
        return ("preference", "sft", "messages", "prompts")


def _known_builtin_model(value: str | None) -> str | None:
    builtin = catalog.split(value or "")
    if builtin is not None and builtin not in catalog.MODELS:
        raise ValueError(f"unknown builtin model {builtin!r}; builtin models: {', '.join(catalog.MODELS)}")
    return value


class FactoryConfig(CommonConfig):
    """A family whose trainer a team's own function may build: the type's keys still apply (they reach the
    function through its context), and its samples and tokens count as the type counts them."""

    trainer_factory: str | None = Field(
        None,
        description="Your own module.sub:function that builds this type's trainer (e.g. a subclass of TRL's), "
        "from context.training_args() (the type's TRL config, every key below applied) and "
        "context.trainer_inputs() (model, data, tokenizer, LoRA, rewards); docs/api.md. Empty: TRL's own trainer.",
    )

    @field_validator("trainer_factory")
    @classmethod
    def _import_path(cls, value: str | None) -> str | None:
        if value is not None and not _IMPORT_PATH.match(value):
            raise ValueError(f"{value!r} is not an import path module.sub:function")
        return value


def factory_of(config: CommonConfig) -> str | None:
    """The team's trainer_factory a config names, or None (a type without one, PPO, or none set)."""
    return config.trainer_factory if isinstance(config, FactoryConfig) else None


class SFTConfig(FactoryConfig):
    training_type: Literal["sft"]
    packing: bool = Field(False, description="Pack several examples into each sequence (SFT).")
    completion_only_loss: bool | None = Field(None, description="Loss on completions only (prompt/completion data).")

    def accepted_dataset_kinds(self) -> tuple[catalog.DatasetKind, ...]:
        return ("sft", "messages", "preference")  # preference data: the chosen answer is the target


class DPOConfig(FactoryConfig):
    training_type: Literal["dpo"]
    beta: Number = Field(0.1, gt=0, description="DPO temperature: strength of the pull towards the reference model.")
    loss_type: DpoLossType = Field("sigmoid", description="DPO loss variant (TRL's names).")
    precompute_ref_log_probs: bool = Field(False, description="Compute reference log-probs once before training.")

    def accepted_dataset_kinds(self) -> tuple[catalog.DatasetKind, ...]:
        return ("preference",)


class OnlineRLConfig(FactoryConfig):
    """Fields GRPO and RLOO share: they generate completions and score them."""

    num_generations: Count = Field(
        4, ge=2, le=1024, description="Completions sampled per prompt (the group; at most 1,024)."
    )
    max_new_tokens: Count = Field(
        64,
        ge=1,
        le=MAX_NEW_TOKENS,
        description=f"Maximum tokens generated per completion (at most {MAX_NEW_TOKENS:,}).",
    )
    temperature: Number = Field(1.0, gt=0, description="Sampling temperature.")
    reward_funcs: list[str] = Field(
        default_factory=list,
        description="Reward functions: builtin:<name> (" + ", ".join(catalog.REWARDS) + ") or module:function.",
    )
    reward_model: str | None = Field(
        None, description="Reward model (sequence classifier): hub id, path or builtin:<name>."
    )

    @field_validator("reward_model")
    @classmethod
    def _builtin_reward_model_exists(cls, value: str | None) -> str | None:
        return _known_builtin_model(value)

    @field_validator("reward_funcs")
    @classmethod
    def _reward_names(cls, value: list[str]) -> list[str]:
        for name in value:
            builtin = catalog.split(name)
            if builtin is not None and builtin not in catalog.REWARDS:
                raise ValueError(f"unknown builtin reward {builtin!r}; builtin rewards: {', '.join(catalog.REWARDS)}")
            if builtin is None and not _IMPORT_PATH.match(name):
                raise ValueError(f"{name!r} is neither builtin:<name> nor an import path module.sub:function")
        return value

    @model_validator(mode="after")
    def _has_a_reward(self) -> OnlineRLConfig:
        if not self.reward_funcs and self.reward_model is None:
            raise ValueError(
                f"{self.training_type} needs a reward: set reward_funcs (e.g. [builtin:length]) or reward_model"
            )
        if self.batch_size * self.gradient_accumulation_steps % self.num_generations:
            raise ValueError(
                f"batch_size x gradient_accumulation_steps ({self.batch_size * self.gradient_accumulation_steps}) "
                f"must be a multiple of num_generations ({self.num_generations})"
            )
        return self

    def has_reward(self) -> bool:
        return True

    def accepted_dataset_kinds(self) -> tuple[catalog.DatasetKind, ...]:
        return ("prompts", "preference")  # preference data: the prompt column


class GRPOConfig(OnlineRLConfig):
    training_type: Literal["grpo"]
    beta: Number = Field(0.0, ge=0, description="KL coefficient against the reference model (0: no reference model).")


class RLOOConfig(OnlineRLConfig):
    training_type: Literal["rloo"]
    beta: Number = Field(0.05, ge=0, description="KL coefficient against the reference model.")


class PPOConfig(CommonConfig):
    training_type: Literal["ppo"]
    ppo_epochs: Count = Field(4, ge=1, le=100, description="PPO epochs over each batch of rollouts (at most 100).")
    init_kl_coef: Number = Field(0.2, ge=0, description="KL penalty coefficient.")
    target_kl: Number = Field(
        6.0, gt=0, description="Target KL (recorded; TRL >= 0.12 PPO uses a fixed KL coefficient)."
    )
    cliprange: Number = Field(0.2, gt=0, description="Policy ratio clip range.")
    vf_coef: Number = Field(0.1, ge=0, description="Value-loss coefficient.")
    max_new_tokens: Count = Field(
        64, ge=1, le=MAX_NEW_TOKENS, description=f"Maximum tokens generated per rollout (at most {MAX_NEW_TOKENS:,})."
    )
    temperature: Number = Field(1.0, gt=0, description="Sampling temperature.")
    reward_model: str | None = Field(
        None,
        description="Reward model: hub id, path or builtin:<name>; default: the policy's model with a new score head.",
    )
    value_model: str | None = Field(None, description="Value model; default: initialised from the reward model.")

    @field_validator("reward_model", "value_model")
    @classmethod
    def _builtin_models_exist(cls, value: str | None) -> str | None:
        return _known_builtin_model(value)

    def has_reward(self) -> bool:
        return self.reward_model is not None  # without one, TRL's PPO scores with a new, untrained head

    def accepted_dataset_kinds(self) -> tuple[catalog.DatasetKind, ...]:
        return ("prompts", "preference")


class CustomConfig(FactoryConfig):
    training_type: Literal["custom"]
    trainer_factory: str = Field(
        description="module.sub:function returning a transformers Trainer built on your own code, from "
        "context.training_args() (TrainingArguments) and context.trainer_inputs() (docs/api.md); for a trainer of "
        "one of the other types, set that training_type with trainer_factory instead."
    )


CanaryConfig = Annotated[
    SFTConfig | DPOConfig | GRPOConfig | RLOOConfig | PPOConfig | CustomConfig,
    Field(discriminator="training_type"),
]

#: training_type -> its class, read off the union above so that the names have one source.
FAMILIES: Final[dict[str, type[CommonConfig]]] = {
    get_args(cls.model_fields["training_type"].annotation)[0]: cls for cls in get_args(get_args(CanaryConfig)[0])
}

#: Keys of the old flat format that it accepted under any training_type. Where they do not apply to this
#: family they are dropped with a notice (never an error: old configs must run unchanged).
LEGACY_ALGORITHM_KEYS = frozenset(
    {"beta", "ppo_epochs", "init_kl_coef", "target_kl", "cliprange", "vf_coef", "max_new_tokens"}
)
