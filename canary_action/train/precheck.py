"""What a config can be refused for before the heavy imports: torch, transformers and TRL take 10 s to import
on a warm machine and 30-80 s on a cold runner, and a mistake found after them costs that much each try.

Checked here, in seconds: the modules a config names exist (trainer_factory, reward functions), the installed
TRL still has the trainer the config asks for (PPO), its local paths exist, and what it names on the Hugging
Face Hub can be loaded (hub.py). `canary run` calls this before it makes the run directory, as it validates
the config file: a refusal here writes nothing. Each family's preflight still runs after the imports and
imports what is only looked up here.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import warnings
from collections.abc import Callable
from pathlib import Path

from canary_action.config.schema import CommonConfig, CustomConfig, OnlineRLConfig, PPOConfig, factory_of
from canary_action.errors import ConfigError
from canary_action.train import hub, rewards
from canary_action.train.builtin import catalog


def check(config: CommonConfig, *, announce: Callable[[str], None] | None = None) -> list[str]:
    """Raise the ConfigError the run would raise later, where it can be known without the heavy imports; return
    the notices of what was decided for the run (offline mode, when the Hub does not answer: hub.require).

    The team's modules are looked up on this process's import path, which holds the run's code tree
    (run_canary appends it, as every process of the run does).
    """
    factory = factory_of(config)
    if factory is not None:
        rewards.find_module(factory, key="trainer_factory")
    if isinstance(config, OnlineRLConfig):
        for name in config.reward_funcs:
            if catalog.split(name) is None:
                rewards.find_module(name, key="reward_funcs")
    if isinstance(config, PPOConfig) and not has_value_model_ppo():
        raise no_value_model_ppo()
    if isinstance(config, CustomConfig):
        return []  # its factory decides what it loads: setup.py checks each Hub name when the factory asks for it
    names = loaded_names(config)
    _require_local_paths(names)
    return hub.require(names, announce=announce, before_imports=True)


def loaded_names(config: CommonConfig) -> list[hub.HubName]:
    """Every model, tokenizer and dataset the run of a training family loads, by the key that names it."""
    revision = config.model_revision
    names = [
        hub.HubName(config.model_name, "model", revision, "model_name"),
        hub.HubName(config.dataset_name, "dataset", config.dataset_revision, "dataset_name"),
    ]
    if config.tokenizer_name is not None:
        names.append(hub.HubName(config.tokenizer_name, "tokenizer", revision, "tokenizer_name"))
    elif catalog.split(config.model_name) is None:  # a builtin model comes with the builtin tokenizer
        names.append(hub.HubName(config.model_name, "tokenizer", revision, "model_name"))
    if isinstance(config, OnlineRLConfig) and config.reward_model is not None:  # TRL loads it, at no revision
        names.append(hub.HubName(config.reward_model, "model", None, "reward_model"))
    if isinstance(config, PPOConfig):  # loaded at the model's revision, as setup.load_model does
        models = {"reward_model": config.reward_model, "value_model": config.value_model}
        names += [hub.HubName(name, "model", revision, key) for key, name in models.items() if name is not None]
    if config.heldout.enabled and config.heldout.dataset_name is not None:  # the evaluator's own set (train/data.py)
        names.append(hub.HubName(config.heldout.dataset_name, "dataset", None, "heldout.dataset_name"))
    return names


def has_value_model_ppo() -> bool:
    """Whether the installed TRL ships `trl.experimental.ppo` (looked up, not imported: that takes torch)."""
    try:
        with warnings.catch_warnings():  # "trl.experimental is unstable": known, and the reason for ppo.py
            warnings.simplefilter("ignore")
            return importlib.util.find_spec("trl.experimental.ppo") is not None
    except ImportError:
        return False


def no_value_model_ppo() -> ConfigError:
    try:
        installed = f"trl {importlib.metadata.version('trl')}"
    except importlib.metadata.PackageNotFoundError:
        installed = "no trl"
    return ConfigError(
        f"training_type: ppo needs TRL's value-model PPO, which TRL removed after 1.12 (installed: {installed})",
        fix="use training_type: grpo or rloo (the online RL trainers current TRL keeps), "
        "or install 'trl<=1.12' to canary value-model PPO",
    )


def _require_local_paths(names: list[hub.HubName]) -> None:
    """A name that is neither builtin, nor a Hub id, nor on disk is a path that does not exist."""
    missing = list(
        dict.fromkeys(  # a model and its tokenizer: one line
            str(n)
            for n in names
            if catalog.split(n.name) is None and not Path(n.name).exists() and not hub.on_hub(n.name, n.kind)
        )
    )
    if missing:
        raise ConfigError(
            "these paths do not exist (and are not Hugging Face Hub ids):",
            errors=missing,
            fix="fix the path (relative paths start from the working directory), or use builtin:<name> for offline "
            "runs",
        )
