"""What a recorded change typically does: clues from the environment and config diffs.

A moved library or config key is not a measurement, only a known way for the figures to move, so these
clues carry fixed weights (how often such a change is the culprit when a canary fails) and the checks they
can explain. The tables are the knowledge; the two functions only look changes up in them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Final

from canary_action.compare.clues import ANY, DIST, FIRST, MEMORY, PERF, TRAINING, Case, Clue, moved
from canary_action.compare.diff import SETUP_PREFIX
from canary_action.compare.result import Change, SuspectCategory

PIP_PACKAGES: Final = frozenset(
    {"torch", "transformers", "trl", "peft", "accelerate", "datasets", "tokenizers", "bitsandbytes"}
)

# Field: the causes a moved value points at. A library can move any figure; its kernel, collective or CPU
# reading is narrower.
ENV_RULES: Final[dict[str, tuple[tuple[SuspectCategory, float, frozenset[str]], ...]]] = {
    "torch": (("dependency", 0.55, ANY), ("kernel", 0.25, PERF | FIRST)),
    "cuda": (("dependency", 0.5, ANY), ("kernel", 0.25, PERF | FIRST)),
    "cudnn": (("dependency", 0.4, ANY), ("kernel", 0.25, PERF)),
    "transformers": (("dependency", 0.45, ANY),),
    "trl": (("dependency", 0.45, ANY),),
    "peft": (("dependency", 0.35, ANY),),
    "accelerate": (("dependency", 0.3, ANY),),
    "datasets": (("dependency", 0.25, ANY), ("dataloader", 0.15, PERF)),
    "tokenizers": (("dependency", 0.3, ANY),),
    "bitsandbytes": (("dependency", 0.35, ANY), ("kernel", 0.2, PERF)),
    "nccl": (("dependency", 0.3, ANY), ("communication", 0.4, PERF | DIST)),
    "gpu_count": (("communication", 0.5, PERF | MEMORY | DIST),),
    "gpu": (("kernel", 0.4, PERF | MEMORY),),
    "gpu_driver": (("dependency", 0.25, ANY), ("kernel", 0.15, PERF)),
    "cpu_model": (("dataloader", 0.3, PERF),),
    "cpu_count": (("dataloader", 0.3, PERF),),
    # On a CPU run, every op's parallelism (docs/benchmarks.md#cpu-threads). Read on CPU runs with both counts
    # recorded only (env_clues): a GPU run does not apply cpu_threads, and an older baseline did not record it.
    "torch_threads": (("config", 0.8, PERF | FIRST),),
    "python": (("dependency", 0.2, ANY),),
    "canary": (("dependency", 0.2, ANY),),
    "container_image": (("dependency", 0.1, ANY),),
    "container_image_revision": (("dependency", 0.1, ANY),),
    "container_image_digest": (("dependency", 0.1, ANY),),
}
ENV_SUMMARIES: Final[dict[SuspectCategory, str]] = {
    "dependency": "{field} moved ({b} → {c}): a new release can change kernels, defaults and memory use",
    "kernel": "{field} {b} → {c} brings different compute kernels",
    "communication": "{field} {b} → {c} changes the collectives between GPUs",
    "dataloader": "{field} {b} → {c}: a different CPU feeds the data pipeline",
}
#: Fields whose reading is narrower than their category's summary.
FIELD_SUMMARIES: Final[dict[str, str]] = {
    "torch_threads": "torch's CPU threads per process {b} → {c} (config cpu_threads): every CPU op runs on a "
    "different number of cores, and on a shared machine more threads than free cores stall each other",
}


@dataclass(frozen=True)
class Effect:
    weight: float
    scope: frozenset[str]
    up: str
    """What turning the key on, raising it, or changing it does."""
    down: str = ""
    """What turning it off or lowering it does (empty: the same as `up`)."""
    numerics: float = 0.0
    """Weight as numerics evidence, for keys that move the range of the loss and gradients."""


_BOTH = PERF | MEMORY
_ALL3 = PERF | MEMORY | TRAINING

# Direction-aware: a key turned on and the same key turned off explain different failures.
CONFIG_RULES: Final[dict[str, Effect]] = {
    "gradient_checkpointing": Effect(
        0.75, _BOTH, "recomputes activations in backward, typically +20-35 % step time for much less activation "
        "memory", "keeps activations for backward: faster steps, much more activation memory"),
    "torch_compile": Effect(
        0.7, _BOTH | FIRST, "compiles the model: a slow first step, then faster steps unless varying shapes "
        "recompile", "eager mode: no compile step, slower steady steps"),
    "attn_implementation": Effect(
        0.7, _BOTH, "a different attention kernel: each has its own speed and memory profile (eager is the "
        "slowest and largest; sdpa and flash attention differ by GPU, dtype and sequence length)"),
    "dtype": Effect(
        0.7, ANY, "another precision: fp32 steps take 2-3× the time and twice the memory of bf16/fp16, and fp16 "
        "can overflow to inf/NaN",
        numerics=0.4),
    "batch_size": Effect(
        0.6, _ALL3, "more sequences per micro-batch: longer steps, more activation memory",
        "fewer sequences per micro-batch: lower tokens/s, less memory"),
    "gradient_accumulation_steps": Effect(
        0.6, PERF | TRAINING, "more micro-batches per optimizer step: step time grows in proportion",
        "fewer micro-batches per step: shorter steps, noisier gradients"),
    "max_length": Effect(
        0.55, _ALL3, "longer sequences: more tokens, time and memory per step",
        "shorter sequences: more truncation, fewer tokens per step"),
    "max_prompt_length": Effect(
        0.45, _ALL3, "longer prompts: more tokens per step", "shorter prompts: more truncation"),
    "max_new_tokens": Effect(
        0.55, _ALL3, "longer completions: generation time grows about linearly",
        "shorter completions: less generation, different rewards"),
    "num_generations": Effect(
        0.55, _ALL3, "more completions per prompt: more generation and scoring per step",
        "fewer completions per prompt: noisier advantages"),
    "use_peft": Effect(
        0.7, ANY, "LoRA adapters instead of full training: less memory, different learning",
        "full fine-tuning: optimizer states for every weight, much more memory and slower steps"),
    "lora_r": Effect(0.3, _ALL3, "a higher LoRA rank: more trainable parameters", "a lower LoRA rank"),
    "lora_alpha": Effect(0.35, TRAINING, "the LoRA scale alpha/r acts like a learning-rate change", numerics=0.25),
    "lora_target_modules": Effect(0.4, ANY, "LoRA wraps different modules: different parameters and cost"),
    "packing": Effect(
        0.6, _ALL3, "packs examples into full sequences: more tokens and time per step",
        "one example per sequence: padding returns, fewer tokens per step"),
    "load_in_4bit": Effect(
        0.65, _BOTH, "4-bit base weights: dequantization slows steps, memory drops",
        "unquantized base weights: much more memory"),
    "load_in_8bit": Effect(
        0.65, _BOTH, "8-bit base weights: int8 matmuls slow steps, memory drops",
        "unquantized base weights: much more memory"),
    "learning_rate": Effect(
        0.5, TRAINING, "a larger step size can destabilise training (loss spikes, NaN)",
        "a smaller step size learns more slowly", numerics=0.35),
    "tokenizer_name": Effect(0.6, PERF | TRAINING, "a different tokenizer: different tokens per example"),
    "model_name": Effect(0.6, ANY, "a different model: every figure moves"),
    "dataset_name": Effect(0.5, ANY, "different data: every figure moves"),
    "cpu_threads": Effect(
        0.8, PERF | FIRST, "torch's CPU threads per process: every CPU op runs on a different number of cores, and "
        "on a shared machine more threads than free cores stall each other (docs/benchmarks.md#cpu-threads)"),
    "seed": Effect(0.15, TRAINING, "a different seed: other initial weights (builtin models), data order, dropout"),
    "max_steps": Effect(0.2, ANY, "a different run length: the warm-up cut and the tail figures shift"),
    "profiler.enabled": Effect(0.2, PERF, "profiler overhead can spill into the steps around its window"),
    "fault_injection.sleep_s_per_step": Effect(0.9, PERF, "a planted per-step sleep (fault injection)"),
    "fault_injection.extra_matmuls_per_step": Effect(0.9, PERF, "planted extra compute per step (fault injection)"),
    "fault_injection.gpu_matmuls_per_step": Effect(
        0.9, PERF | frozenset({"gpu_time"}), "planted extra GPU work per step (fault injection)"),
    # Weaker than the dataloader suspect's measured data wait (clues.py), which names the mechanism.
    "fault_injection.slow_data_s_per_step": Effect(0.3, PERF, "a planted slow data pipeline (fault injection)"),
    "fault_injection.nan_loss_at_step": Effect(
        0.9, TRAINING, "a planted NaN loss (fault injection)", numerics=0.9),
    "fault_injection.grad_spike_at_steps": Effect(
        0.3, TRAINING, "planted gradient spikes (fault injection)", numerics=0.9),
    "fault_injection.crash_at_step": Effect(0.9, frozenset({"run_status"}), "a planted crash (fault injection)"),
    # Weaker than the communication suspect's measured straggler, which names the mechanism (rank_clues.py).
    "fault_injection.slow_rank": Effect(0.3, PERF | FIRST | DIST, "a planted straggler on one rank (fault injection)"),
}  # fmt: skip
OTHER_KEY: Final = Effect(0.1, ANY, "may change the run")  # a key without a known effect is weak evidence
FAULTS: Final = "fault_injection."
SETUP_PACKAGE_WEIGHT: Final = 0.45  # like a library of the stack: the PR's requirements file moved it
UNPLANTED: Final = (None, False, 0.0)

# Multi-process runs: libraries that carry the collectives besides NCCL (which ENV_RULES already reads as one).
DISTRIBUTED_ENV: Final[dict[str, tuple[float, str]]] = {
    "torch": (0.35, "torch ships DDP/FSDP and the NCCL it was built with"),
    "accelerate": (0.25, "accelerate launches the ranks and wraps the model for DDP/FSDP/DeepSpeed"),
}
DISTRIBUTED_KEYS: Final = "distributed."  # the config's distributed block: strategy, backend, bucket sizes, sharding
DISTRIBUTED_CONFIG_WEIGHT: Final = 0.55
WORLD_SIZE_WEIGHT: Final = 0.6
# Below a measured straggler (rank_clues.py), so that the measurement leads the evidence.
PLANTED_STRAGGLER_KEY: Final = "fault_injection.slow_rank"
PLANTED_STRAGGLER_WEIGHT: Final = 0.6


def env_clues(case: Case) -> list[Clue]:
    clues = []
    for change in case.env:
        if change.field == "torch_threads" and not _threads_known(case, change):
            continue
        b, c = change.baseline or "none", change.current or "none"
        if change.field.startswith(SETUP_PREFIX):
            clues.append(_setup_package_clue(change, b, c))
            continue
        if change.field in PIP_PACKAGES:
            bisect = f"pin {change.field}=={b} in a branch and rerun the canary to bisect"
        elif change.field == "torch_threads":
            bisect = f"set cpu_threads: {b} in the config (as the baseline ran) and rerun to confirm"
        else:
            bisect = f"rerun with the baseline's {change.field} ({b}) to confirm"
        steps = (bisect, f"read the {change.field} release notes between {b} and {c} for performance changes")
        for category, weight, scope in ENV_RULES.get(change.field, ()):
            template = FIELD_SUMMARIES.get(change.field) or ENV_SUMMARIES[category]
            summary = template.format(field=change.field, b=b, c=c)
            clues.append(Clue(category, weight, (moved(change),), scope, summary, steps))
    return clues


def _setup_package_clue(change: Change, b: str, c: str) -> Clue:
    """A package the setup command installed moved: the pull request's own dependency change."""
    name = change.field.removeprefix(SETUP_PREFIX)
    summary = f"{name} {b} → {c}, installed by the setup command: a dependency the pull request changed"
    steps = (f"pin {name}=={b} in the setup's requirements and rerun the canary to bisect",
             f"read the {name} release notes between {b} and {c} for performance changes")  # fmt: skip
    return Clue("dependency", SETUP_PACKAGE_WEIGHT, (moved(change),), ANY, summary, steps)


def _threads_known(case: Case, change: Change) -> bool:
    return change.baseline is not None and change.current is not None and case.current.device_kind == "cpu"


def config_clues(case: Case) -> list[Clue]:
    clues = []
    for change in case.config:
        if change.field.startswith(FAULTS) and _parse(change.current) in UNPLANTED:
            continue  # the block's defaults (a 0.0 s sleep) plant nothing, so they explain nothing
        effect = CONFIG_RULES.get(change.field, OTHER_KEY)
        verb, up = _direction(change)
        what = effect.down if effect.down and not up else effect.up
        b, c = change.baseline or "none", change.current or "none"
        summary = f"{change.field} {verb} ({b} → {c}): {what}"
        undo = f"set {change.field} back to {change.baseline}" if change.baseline else f"drop {change.field}"
        steps = (
            f"{undo} in a branch and rerun the canary to confirm",
            "if the change is intended, accept its cost: the next default-branch run records new baselines",
        )
        clues.append(Clue("config", effect.weight, (moved(change),), effect.scope, summary, steps))
        if effect.numerics:
            clues.append(Clue("numerics", effect.numerics, (moved(change),), TRAINING))
    return clues


def distributed_clues(case: Case) -> list[Clue]:
    """Communication evidence from recorded changes, when either side ran on several processes: the world size,
    the distributed config block, and the libraries that carry the collectives."""
    newest = case.baselines[0] if case.baselines else None
    if case.current.distributed is None and (newest is None or newest.distributed is None):
        return []
    clues = []
    if newest is not None and newest.world_size != case.current.world_size:
        b, c = newest.world_size, case.current.world_size
        more = "more" if c > b else "fewer"
        summary = f"world size {b} → {c}: every collective spans {more} ranks, and the effective batch changes"
        steps = (f"compare with baselines of world size {c}: run the canary on the default branch with it",)
        clues.append(Clue("communication", WORLD_SIZE_WEIGHT, (f"world size {b} → {c}",), PERF | MEMORY | DIST,
                          summary, steps))  # fmt: skip
    for change in case.config:
        if change.field == PLANTED_STRAGGLER_KEY and change.current is not None:
            summary = f"a planted straggler: rank {change.current} sleeps in every step (fault injection)"
            clues.append(
                Clue("communication", PLANTED_STRAGGLER_WEIGHT, (moved(change),), PERF | FIRST | DIST, summary)
            )
        if change.field.startswith(DISTRIBUTED_KEYS):
            summary = f"{moved(change)}: how the ranks shard the model and exchange gradients changed"
            undo = f"set {change.field} back to {change.baseline}" if change.baseline else f"drop {change.field}"
            clues.append(Clue("communication", DISTRIBUTED_CONFIG_WEIGHT, (moved(change),), PERF | MEMORY | DIST,
                              summary, (f"{undo} in a branch and rerun the canary to confirm",)))  # fmt: skip
    for change in case.env:
        if change.field in DISTRIBUTED_ENV:
            weight, why = DISTRIBUTED_ENV[change.field]
            clues.append(Clue("communication", weight, (moved(change),), PERF | DIST, f"{moved(change)}: {why}"))
    return clues


def _direction(change: Change) -> tuple[str, bool]:
    """How the value moved in words, and whether the key's `up` effect applies."""
    b, c = _parse(change.baseline), _parse(change.current)
    if isinstance(b, bool) and isinstance(c, bool):
        return ("turned on", True) if c else ("turned off", False)
    if isinstance(b, float) and isinstance(c, float):
        return ("raised", True) if c > b else ("lowered", False)
    return "changed", True


def _parse(text: str | None) -> bool | float | str | None:
    """A rendered config value back as a bool or number where it is one (config values render as JSON)."""
    if text is None:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return text
    if isinstance(value, bool):
        return value
    return float(value) if isinstance(value, int | float) else text
