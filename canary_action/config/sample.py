"""`canary init-config`: a commented sample config, one per training type and tier, for a real model from the
Hub or (`builtin=True`) for builtin assets that need no download.

Every key of the type's schema is written with its default or the sample's value: the optional blocks
(distributed, thresholds, fault_injection) commented out, since setting one changes what the run does. The
comments are the schema's own field descriptions, so the sample cannot drift from what the loader accepts;
tests load every type x tier x choice back through `load_config` and check that no key of the schema is missing.
"""

from __future__ import annotations

import textwrap
from typing import Any, Final, cast, get_args

import yaml
from pydantic import BaseModel

from canary_action.config import messages
from canary_action.config.blocks import DistributedConfig, FaultInjection, ProfilerConfig
from canary_action.config.schema import FAMILIES, CommonConfig, Device
from canary_action.config.thresholds import TIER_STEPS, TIERS, Tier
from canary_action.errors import ConfigError

_WIDTH: Final = 100
_TIER_PURPOSE: Final[dict[Tier, str]] = {
    "default": "a general-purpose gate",
    "smoke": "a quick gate on every pull request",
    "perf": "a longer run that resolves smaller slowdowns, with a profiler window",
    "nightly": "a soak run that catches slow leaks and late instabilities",
}
_SECTIONS: Final = (
    ("identity", ("name", "description", "training_type")),
    ("model", ("model_name", "model_revision", "tokenizer_name", "dtype", "device", "attn_implementation",
               "gradient_checkpointing", "torch_compile", "use_peft", "lora_r", "lora_alpha", "lora_dropout",
               "lora_target_modules", "load_in_4bit", "load_in_8bit")),
    ("data", ("dataset_name", "dataset_subset", "dataset_revision", "dataset_split", "dataset_size", "max_length",
              "max_prompt_length")),
    ("optimisation", ("max_steps", "batch_size", "gradient_accumulation_steps", "learning_rate",
                      "warmup_steps", "max_grad_norm", "seed")),
    ("processes", ("num_processes", "cpu_threads")),
    ("measurement", ("metrics_warmup_steps", "stop_on_non_finite", "gpu_time", "timeout_minutes", "output_dir",
                     "profiler", "heldout", "capture")),
)  # fmt: skip
#: Optional blocks, written commented out with every key and its default (and what to know before setting
#: one): each changes what a run does once it is there. thresholds, the third, lists a tier's values instead.
_BLOCKS: Final[tuple[tuple[str, type[BaseModel], str], ...]] = (
    ("distributed", DistributedConfig, ""),
    ("fault_injection", FaultInjection, "They prove that the gate catches what they plant: never set them in a "
     "real gate."),
)  # fmt: skip
#: Public datasets in the shape each family trains on.
_DATASETS: Final = {
    "sft": "trl-lib/Capybara",
    "dpo": "Anthropic/hh-rlhf",
    "grpo": "trl-lib/tldr",
    "rloo": "trl-lib/tldr",
    "ppo": "trl-lib/tldr",
    "custom": "Anthropic/hh-rlhf",
}
_VALUES: Final[dict[str, dict[str, Any]]] = {
    "grpo": {"max_prompt_length": 128, "reward_funcs": ["builtin:length"]},
    "rloo": {"max_prompt_length": 128, "reward_funcs": ["builtin:length"]},
    "ppo": {"max_prompt_length": 128, "reward_model": "EleutherAI/pythia-70m"},
    "custom": {"trainer_factory": "my_project.canary:build_trainer"},
}
#: What fails the gate and what only warns, said where a team first meets the config (as the README says it).
_VERDICTS: Final = (
    "What fails and what warns: speed, memory and stability checks fail the gate (a NaN, a slower step, more "
    "memory); so does the held-out evaluation, the trained model scored by the canary's own code on examples it "
    "never trained on. The loss-curve, tail-loss, reward and KL checks only warn, since a changed loss may be the "
    "point of a pull request: `fail_on_learning: true` under thresholds (at the end) makes them fail."
)
_CHEAP_REWARD = "Here: a cheap deterministic reward, so the canary measures the trainer, not a scorer."
#: Why this sample picked a value, where the field's description cannot say it.
_NOTES: Final = {
    ("ppo", "reward_model"): "Here: the policy's own checkpoint with a fresh score head. It shares the "
    "policy's tokenizer (PPO scores the policy's token ids) and costs what a trained reward model of that "
    "size costs.",
    ("grpo", "reward_funcs"): _CHEAP_REWARD,
    ("rloo", "reward_funcs"): _CHEAP_REWARD,
    ("custom", "trainer_factory"): "Replace this with your own function.",
}
#: The offline sample's model and data per family: the pairs configs/tiny/ runs in CI (a tiny model of the
#: family's usual architecture with random weights, synthetic data of the shape the family trains on).
_BUILTIN: Final = {
    "sft": ("tiny-llama", "sft-messages"),
    "dpo": ("tiny-llama", "preference"),
    "grpo": ("tiny-gpt-neox", "prompts"),
    "rloo": ("tiny-llama", "prompts"),
    "ppo": ("tiny-gpt-neox", "prompts"),
    "custom": ("tiny-llama", "sft"),  # the example factory tokenizes a `text` column
}
_BUILTIN_VALUES: Final[dict[str, dict[str, Any]]] = {
    "ppo": {"reward_model": "builtin:tiny-gpt-neox"},
    "custom": {"trainer_factory": "canary_action.train.builtin.example_factory:build_trainer"},
}
_BUILTIN_NOTES: Final = {
    "model_name": "Here: a 2-layer model with random weights, no download: it trains quickly on a CPU and "
    "measures the pipeline (loading, data, trainer, step loop), not a real model's speed. builtin:pythia-70m and "
    "builtin:smollm-135m have a real model's shape and compute; a Hub id (the sample without --builtin) brings "
    "its weights.",
    "dataset_name": "Here: synthetic data in the shape this training type reads, generated from the seed.",
    ("ppo", "reward_model"): "Here: the policy's builtin model with a fresh score head. It shares the policy's "
    "tokenizer (PPO scores the policy's token ids).",
    ("custom", "trainer_factory"): "Here: the example factory shipped with the package (a plain causal-LM "
    "Trainer on the `text` column). Replace it with your own function.",
}


def write_sample_config(training_type: str, tier: str, *, builtin: bool = False, device: str | None = None) -> str:
    """The YAML text of a documented sample config for a real model (EleutherAI/pythia-70m) from the Hub, or,
    with `builtin`, for a builtin model and dataset: a config that runs offline.

    `device`: the sample's; default cuda for a Hub model (a gate on a GPU runner, which then refuses to train on
    the CPU), auto for the builtin one (it runs anywhere, a laptop's CPU included)."""
    _check_choice("training type", training_type, list(FAMILIES))
    _check_choice("tier", tier, list(TIERS))
    device = device or ("auto" if builtin else "cuda")
    _check_choice("device", device, list(get_args(Device)))
    return _sample(training_type, cast(Tier, tier), builtin=builtin, device=device)


def _check_choice(what: str, value: str, choices: list[str]) -> None:
    if value not in choices:
        match = messages.did_you_mean(value, choices)
        hint = f" — did you mean `{match}`?" if match is not None else ""
        raise ConfigError(f"unknown {what} {value!r}{hint}", fix=f"use one of {', '.join(choices)}")


def _sample(training_type: str, tier: Tier, *, builtin: bool, device: str) -> str:
    family = FAMILIES[training_type]
    values = {**_values(training_type, tier, builtin=builtin), "device": device}
    own_keys = tuple(key for key in family.model_fields if key not in CommonConfig.model_fields)
    steps = TIER_STEPS[tier]
    assets = "builtin model and data, random weights: no download" if builtin else "a model and data from the Hub"
    out = _comment(
        f"rlhf-canary config: a {training_type} canary, {tier} tier ({steps} steps: {_TIER_PURPOSE[tier]}), on "
        f"{assets}. Written by `canary init-config`; each comment is the key's documentation, each value its "
        "default or this sample's choice. Keys left out take their defaults; unknown keys are errors."
    )
    out += ["", *_comment(_VERDICTS)]
    for title, keys in [*_SECTIONS[:5], (training_type, own_keys), _SECTIONS[5]]:
        out += ["", f"# --- {title} ---"]
        for key in keys:
            out += _entry(family, key, values[key], note=_note(training_type, key, builtin=builtin))
    for key, block, caveat in _BLOCKS:
        doc = " ".join(filter(None, [_description(family, key), caveat]))
        out += ["", *_comment(f"{doc} Below, commented out, are its keys with their defaults."), f"# {key}:"]
        for sub_key, value in block().model_dump().items():
            out += [f"# {line}" for line in _entry(block, sub_key, value, note=None, indent="  ")]
    out += [
        "",
        *_comment(
            _description(family, "thresholds") + f" base_tier replaces the tier chosen at compare time; the values "
            f"below are the {tier} tier's."
        ),
    ]
    out += ["# thresholds:", f"#   base_tier: {tier}"]
    out += [f"#   {key}: {_scalar(value)}" for key, value in TIERS[tier].model_dump().items()]
    return "\n".join(out) + "\n"


def _note(training_type: str, key: str, *, builtin: bool) -> str | None:
    if builtin:
        return _BUILTIN_NOTES.get((training_type, key)) or _BUILTIN_NOTES.get(key)
    return _NOTES.get((training_type, key))


def _values(training_type: str, tier: Tier, *, builtin: bool) -> dict[str, Any]:
    """The family's defaults, then this sample's choices."""
    family = FAMILIES[training_type]
    values: dict[str, Any] = {
        key: field.get_default(call_default_factory=True) for key, field in family.model_fields.items()
    }
    values.update(
        name=f"{training_type}-{tier}",
        description=f"{training_type} canary on pythia-70m with LoRA, {tier} tier",
        training_type=training_type,
        model_name="EleutherAI/pythia-70m",
        dataset_name=_DATASETS[training_type],
        dataset_size=1024 if tier in ("default", "smoke") else 4096,
        max_steps=TIER_STEPS[tier],
        timeout_minutes={"default": 30, "smoke": 30, "perf": 60, "nightly": 180}[tier],
        profiler=ProfilerConfig.model_validate(
            {"enabled": tier in ("perf", "nightly"), "start_step": max(50, TIER_STEPS[tier] // 5)}
        ),
    )
    values.update(_VALUES.get(training_type, {}))
    if builtin:
        model, data = _BUILTIN[training_type]
        values.update(
            name=f"{training_type}-{tier}-builtin",
            description=f"{training_type} canary on builtin:{model} (random weights) with LoRA and builtin:{data} "
            f"data, {tier} tier (offline)",
            model_name=f"builtin:{model}",
            dataset_name=f"builtin:{data}",
        )
        values.update(_BUILTIN_VALUES.get(training_type, {}))
    return values


def _entry(model: type[BaseModel], key: str, value: Any, *, note: str | None, indent: str = "") -> list[str]:
    lines = _comment(_description(model, key), indent) + (_comment(note, indent) if note else [])
    if isinstance(value, BaseModel):
        lines.append(f"{indent}{key}:")
        for sub_key in type(value).model_fields:
            lines += _entry(type(value), sub_key, getattr(value, sub_key), note=None, indent=indent + "  ")
        return lines
    return [*lines, f"{indent}{key}: {_scalar(value)}"]


def _description(model: type[BaseModel], key: str) -> str:
    # A family redeclares training_type as its own Literal, without the shared description.
    field = model.model_fields.get(key) or CommonConfig.model_fields[key]
    return field.description or CommonConfig.model_fields[key].description or ""


def _comment(text: str, indent: str = "") -> list[str]:
    return [f"{indent}# {line}" for line in textwrap.wrap(text, _WIDTH - len(indent) - 2)]


def _scalar(value: Any) -> str:
    """A value as YAML on one line: lists in flow style, strings quoted only where YAML needs it."""
    dumped: str = yaml.safe_dump(value, default_flow_style=True, width=1_000_000)
    return dumped.removesuffix("\n...\n").strip()
