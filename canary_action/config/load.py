"""Load a canary config: YAML -> `--set` overrides -> the 0.1 flat format's leftovers -> CanaryConfig.

A bad file never gives a traceback: every problem of the file comes back at once in one ConfigError, each
with its dotted path and, where the file has it, its line. Whatever the loader changes on the user's behalf
(an override, a key of another algorithm dropped, the old default training type) becomes a notice.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from pydantic import BaseModel, TypeAdapter, ValidationError
from pydantic_core import ErrorDetails

from canary_action.config import messages
from canary_action.config.overrides import Overrides, apply_overrides
from canary_action.config.sample import write_sample_config
from canary_action.config.schema import FAMILIES, LEGACY_ALGORITHM_KEYS, CanaryConfig, CommonConfig
from canary_action.config.source import line_finder, read_yaml
from canary_action.config.thresholds import ThresholdFile
from canary_action.errors import ConfigError, ThresholdFileError

__all__ = [
    "LoadedConfig",
    "config_hash",
    "load_config",
    "load_threshold_file",
    "parse_config",
    "write_sample_config",  # lives in sample.py; re-exported for `canary init-config`
]

_ADAPTER: Final[TypeAdapter[CanaryConfig]] = TypeAdapter(CanaryConfig)
#: Top-level keys of rlhf-canary 0.1's flat format. A file made only of these and without training_type is
#: an old config, and gets the old default training type (dpo) instead of an error.
OLD_FORMAT_KEYS: Final = frozenset(
    {
        "name", "description", "model_name", "use_peft", "lora_r", "lora_alpha", "lora_dropout",
        "load_in_4bit", "load_in_8bit", "training_type", "max_steps", "batch_size",
        "gradient_accumulation_steps", "learning_rate", "max_length", "warmup_steps", "beta",
        "max_prompt_length", "ppo_epochs", "init_kl_coef", "target_kl", "cliprange", "vf_coef",
        "max_new_tokens", "dataset_name", "dataset_split", "dataset_size", "seed", "output_dir",
        "metrics_warmup_steps", "profiler", "thresholds", "use_synthetic_reward",
    }
)  # fmt: skip
OLD_DEFAULT_TRAINING_TYPE: Final = "dpo"
#: Keys 0.1 configs carried that no longer mean anything: dropped with the reason as a notice.
_RETIRED_KEYS: Final = {
    "use_synthetic_reward": "PPO's reward now comes from `reward_model` (default builtin:tiny-gpt-neox, "
    "a random-weight scorer: the same kind of synthetic signal)",
}


@dataclass(frozen=True)
class LoadedConfig:
    """A validated config and what the loader did to get there."""

    config: CanaryConfig
    #: What was overridden, dropped or defaulted on the user's behalf: show these, never hide them.
    notices: list[str]
    #: The file it came from (None when built from data).
    path: Path | None
    #: The file's text as written (for the run record); "" when built from data.
    source_text: str


def load_config(path: Path, overrides: Sequence[str] = ()) -> LoadedConfig:
    """Read, override and validate a config file; raise ConfigError listing every problem."""
    text, data = read_yaml(path, what="config file")
    return _build(data, source=str(path), overrides=overrides, path=path, text=text)


def parse_config(data: object, *, source: str, overrides: Sequence[str] = ()) -> LoadedConfig:
    """Validate already-parsed data (a dict); `source` names it in messages."""
    return _build(data, source=source, overrides=overrides, path=None, text="")


def load_threshold_file(path: Path) -> ThresholdFile:
    """A thresholds YAML file: an optional `base_tier` plus any threshold keys. ThresholdFileError otherwise."""
    try:
        return _threshold_file(path)
    except ConfigError as e:
        raise ThresholdFileError(e.message, errors=e.errors, fix=e.fix, docs=e.docs) from None


def _threshold_file(path: Path) -> ThresholdFile:
    text, data = read_yaml(path, what="threshold file")
    if not isinstance(data, dict):
        raise _not_a_mapping(str(path), data, example="`base_tier: smoke` then `max_tps_drop_pct: 10`")
    try:
        return ThresholdFile.model_validate(data)
    except ValidationError as exc:
        errors = messages.describe_errors(exc.errors(include_url=False), ThresholdFile, line_of=line_finder(text))
        raise ConfigError(
            f"{path}: {messages.count(errors)}",
            errors=errors,
            fix="a threshold file holds `base_tier` (default, smoke, perf, nightly) and threshold keys only",
        ) from None


def config_hash(config: BaseModel) -> str:
    """sha256 of the config's canonical JSON: equal for equal configs, however the files were written."""
    canonical = json.dumps(config.model_dump(mode="json"), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def _build(data: object, *, source: str, overrides: Sequence[str], path: Path | None, text: str) -> LoadedConfig:
    if not isinstance(data, dict):
        raise _not_a_mapping(source, data, example="`name: my-canary` then `training_type: sft`")
    try:
        data = copy.deepcopy(data)
    except RecursionError:
        raise ConfigError(f"{source}: nested too deeply to be a config") from None
    notices = apply_overrides(data, overrides, origin="file" if path is not None else "config")
    given = Overrides.of(overrides)
    finder: list[messages.LineOf] = []  # composed on the first error only

    def line_of(key_path: messages.KeyPath) -> int | None:
        if not text or given.covers(key_path):
            return None  # the value came from the command line, not from this line of the file
        if not finder:
            finder.append(line_finder(text))
        return finder[0](key_path)

    family, errors = _choose_family(data, notices, line_of, given)
    if family is None:
        raise _invalid(source, errors, given)
    notices += _drop_foreign_keys(data, family)
    try:
        config = _ADAPTER.validate_python(data)
    except ValidationError as exc:
        errors = messages.describe_errors(
            _strip_tag(exc.errors(include_url=False), data["training_type"]),
            family,
            line_of=line_of,
            origin_of=given.origin_of,
            elsewhere=_elsewhere(family),
        )
        raise _invalid(source, errors, given) from None
    if config.distributed is not None and config.num_processes == 1:
        # A notice, not an error: DDP over one process is no DDP at all, so nothing is measured differently,
        # and `--set num_processes=1` must run a multi-process config on one GPU. (fsdp and deepspeed would
        # change what one process does: the schema refuses them with one process.)
        notices.append(
            "distributed is ignored with num_processes 1: one process runs without a launcher and without DDP"
        )
    return LoadedConfig(config=config, notices=notices, path=path, source_text=text)


def _invalid(source: str, errors: list[str], given: Overrides) -> ConfigError:
    subject, fix = given.heading(source, errors)
    return ConfigError(f"{subject}: {messages.count(errors)}", errors=errors, fix=fix)


def _choose_family(
    data: dict[Any, Any], notices: list[str], line_of: messages.LineOf, given: Overrides
) -> tuple[type[CommonConfig] | None, list[str]]:
    """The class for data's training_type (defaulted for 0.1 configs), or None and every error found."""
    valid = ", ".join(FAMILIES)
    if "training_type" not in data and set(data) <= OLD_FORMAT_KEYS:
        data["training_type"] = OLD_DEFAULT_TRAINING_TYPE
        notices.append(
            f"training_type is not set: using {OLD_DEFAULT_TRAINING_TYPE}, the default of rlhf-canary 0.1 "
            f"configs (write `training_type: {OLD_DEFAULT_TRAINING_TYPE}` to make it explicit)"
        )
    kind = data.get("training_type")
    if isinstance(kind, str) and kind in FAMILIES:
        return FAMILIES[kind], []
    if "training_type" not in data:
        errors = [f"training_type: required key is missing — one of {valid}"]
    else:
        match = messages.did_you_mean(kind, list(FAMILIES))
        hint = f" — did you mean `{match}`?" if match is not None else ""
        errors = [f"training_type: {messages.show(kind)} is not a training type{hint} (one of {valid})"]
        errors[0] += _where(("training_type",), errors[0], line_of, given)
    # Without a family, the other values cannot be checked; keys no family knows can.
    known = {key for cls in FAMILIES.values() for key in cls.model_fields} | LEGACY_ALGORITHM_KEYS | set(_RETIRED_KEYS)
    unknown = [key for key in data if key not in known]
    for key in unknown[: messages.MAX_LISTED]:
        error = messages.unknown_key((key,), sorted(known))
        errors.append(error + _where((key,), error, line_of, given))
    return None, errors + messages.more_problems(len(unknown) - messages.MAX_LISTED)


def _where(path: messages.KeyPath, error: str, line_of: messages.LineOf, given: Overrides) -> str:
    """` (line 7)` or ` (from --set KEY=VALUE)`, as describe_errors ends its lines."""
    line = line_of(path)
    if line is not None:
        return f" (line {line})"
    origin = given.origin_of(path, error)
    return f" ({origin})" if origin is not None else ""


def _drop_foreign_keys(data: dict[Any, Any], family: type[CommonConfig]) -> list[str]:
    """0.1 configs carried every algorithm's keys whatever the training type: drop those that do not apply."""
    notices = []
    for key in sorted(LEGACY_ALGORITHM_KEYS & data.keys()):
        if key not in family.model_fields:
            del data[key]
            owners = ", ".join(t for t, cls in FAMILIES.items() if key in cls.model_fields)
            hint = (
                " (your own trainer of one of those types: set that training_type beside trainer_factory)"
                if family is FAMILIES["custom"]
                else ""
            )
            notices.append(f"ignored `{key}`: it applies to training_type {owners} only{hint}")
    for key, reason in _RETIRED_KEYS.items():
        if key in data:
            del data[key]
            notices.append(f"ignored `{key}`: {reason}")
    return notices


def _elsewhere(family: type[CommonConfig]) -> dict[str, list[str]]:
    """Keys of other training types -> those types, for 'it applies to training_type grpo, rloo only'."""
    owners: dict[str, list[str]] = {}
    for kind, cls in FAMILIES.items():
        for key in cls.model_fields.keys() - family.model_fields.keys():
            owners.setdefault(key, []).append(kind)
    return owners


def _strip_tag(errors: list[ErrorDetails], tag: str) -> list[ErrorDetails]:
    """A discriminated union puts the tag first in each loc (('dpo', 'beta')); the user wrote `beta`."""
    stripped = []
    for err in errors:
        own = err.copy()
        if own["loc"][:1] == (tag,):
            own["loc"] = own["loc"][1:]
        stripped.append(own)
    return stripped


def _not_a_mapping(source: str, data: object, *, example: str) -> ConfigError:
    got = "an empty file" if data is None else f"a {type(data).__name__} ({messages.show(data)})"
    return ConfigError(
        f"{source}: expected a mapping of keys, got {got}",
        fix=f"write one `key: value` per line, e.g. {example}",
    )
