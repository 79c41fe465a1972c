"""TrainingSetup: what every family's `build_trainer` receives — the config, and the model, tokenizer and
data, each loaded on first use (a custom trainer may load none of them).

Builtin models are written to a local cache directory and loaded back by path. TRL's DPO, GRPO and RLOO
build their reference model with `from_pretrained(model.config._name_or_path)`: for a model built in memory
that name is empty and TRL would go to the Hub. A local path makes that reload work offline.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import os
from collections.abc import Callable
from functools import cached_property
from pathlib import Path
from types import ModuleType
from typing import Any, Generic, TypeVar

from datasets import Dataset
from transformers import (
    AutoModelForCausalLM,
    AutoModelForSequenceClassification,
    AutoTokenizer,
    BitsAndBytesConfig,
    PreTrainedModel,
    PreTrainedTokenizerBase,
    TrainerCallback,
    TrainingArguments,
)

from canary_action.config.schema import CommonConfig
from canary_action.train import data, distributed, hub
from canary_action.train.builtin import catalog, models, tokenizer
from canary_action.train.placement import Placement
from canary_action.train.stages import stage

ConfigT = TypeVar("ConfigT", bound=CommonConfig)
#: The Trainer's output_dir, inside the run directory. It saves nothing there (save_strategy "no"), but makes
#: the folder when it starts: drop_empty_trainer_dir removes it again at the end of the run.
TRAINER_DIR = "trainer"


def cache_dir() -> Path:
    """Builtin model copies live here; CANARY_CACHE_DIR overrides (the runner image points it at a volume)."""
    return Path(os.environ.get("CANARY_CACHE_DIR", Path.home() / ".cache" / "rlhf-canary"))


def drop_empty_trainer_dir(run_dir: Path) -> None:
    """An empty TRAINER_DIR is only clutter in the run directory; one holding anything (files a custom trainer
    or TRL's completion logging wrote) stays."""
    folder = run_dir / TRAINER_DIR
    with contextlib.suppress(FileNotFoundError):  # another rank of the same run removed it first
        if folder.is_dir() and not folder.is_symlink() and not any(folder.iterdir()):
            folder.rmdir()


class TrainingSetup(Generic[ConfigT]):
    def __init__(
        self,
        config: ConfigT,
        placement: Placement,
        run_dir: Path,
        callbacks: list[TrainerCallback],
        notices: list[str],
    ) -> None:
        self.config = config
        self.placement = placement
        self.run_dir = run_dir
        self.callbacks = callbacks
        self.notices = notices

    @cached_property
    def tokenizer(self) -> PreTrainedTokenizerBase:
        with stage("load_model"):
            name = self.config.tokenizer_name or self.config.model_name
            if catalog.split(name) is not None:
                return tokenizer.build_tokenizer()
            hub.require([hub.HubName(name, "tokenizer", self.config.model_revision)])
            loaded = AutoTokenizer.from_pretrained(name, revision=self.config.model_revision)
            if loaded.pad_token is None:
                loaded.pad_token = loaded.eos_token
                self.notices.append(f"tokenizer {name} has no pad token: using its eos token {loaded.eos_token!r}")
            return loaded

    @cached_property
    def model(self) -> PreTrainedModel:
        with stage("load_model"):
            return self.load_model(self.config.model_name, task="causal-lm")

    @cached_property
    def dataset(self) -> Dataset:
        """The first `dataset_size` examples, as stored (each family reshapes them in prepare_dataset)."""
        with stage("load_data"):
            loaded = data.load(self.config, self.tokenizer)
            if len(loaded) < self.config.dataset_size:
                self.notices.append(
                    f"dataset {self.config.dataset_name} has {len(loaded)} examples, fewer than "
                    f"dataset_size {self.config.dataset_size}: using all of them"
                )
            return loaded

    def dataset_if_loaded(self) -> Dataset | None:
        """The loaded examples, or None when nothing asked for them (a custom trainer with its own data)."""
        loaded: Dataset | None = self.__dict__.get("dataset")  # where functools.cached_property keeps it
        return loaded

    def load_model(self, name: str, *, task: models.Task) -> PreTrainedModel:
        """A causal LM (the policy) or a sequence classifier (reward/value model), by hub id, path or builtin."""
        auto = AutoModelForCausalLM if task == "causal-lm" else AutoModelForSequenceClassification
        kwargs: dict[str, Any] = {"dtype": "float32"}  # fp32 master weights; mixed precision comes from the args
        if self.config.attn_implementation is not None:
            kwargs["attn_implementation"] = self.config.attn_implementation
        if task != "causal-lm":
            kwargs["num_labels"] = 1
        if self.config.load_in_4bit or self.config.load_in_8bit:
            kwargs["quantization_config"] = BitsAndBytesConfig(  # type: ignore[no-untyped-call]
                load_in_4bit=self.config.load_in_4bit,
                load_in_8bit=self.config.load_in_8bit,
                bnb_4bit_compute_dtype=self.placement.torch_dtype,
            )
        builtin = catalog.split(name)
        if builtin is not None:
            path = models.materialize(builtin, seed=self.config.seed, directory=cache_dir() / "builtin", task=task)
            return auto.from_pretrained(path, **kwargs)
        hub.require([hub.HubName(name, "model", self.config.model_revision)])
        return auto.from_pretrained(name, revision=self.config.model_revision, **kwargs)

    def reward_model(self, name: str | None) -> tuple[list[Any], list[Any]]:
        """([reward model], [its tokenizer]) for TRL's reward_funcs lists; ([], []) when there is none.

        Hub ids and paths go to TRL as strings (it loads model and tokenizer itself); builtin ones are loaded
        here, because TRL would look them up on the Hub.
        """
        if name is None:
            return [], []
        if catalog.split(name) is None:
            hub.require([hub.HubName(name, "model")])  # TRL loads it at its default revision
            return [name], [None]
        with stage("load_model"):
            return [self.load_model(name, task="sequence-classification")], [tokenizer.build_tokenizer()]

    @property
    def peft_config(self) -> Any:
        if not self.config.use_peft:
            return None
        from peft import LoraConfig

        return LoraConfig(
            r=self.config.lora_r,
            lora_alpha=self.config.lora_alpha,
            lora_dropout=self.config.lora_dropout,
            target_modules=self.config.lora_target_modules,
            task_type="CAUSAL_LM",
        )

    def training_args(self) -> Any:
        """The training type's arguments as its own trainer gets them, every key of the config applied: TRL's
        SFTConfig, DPOConfig, GRPOConfig or RLOOConfig (TrainingArguments for custom). For a trainer_factory."""
        return self._family().training_args(self)

    def trainer_inputs(self) -> dict[str, Any]:
        """The keyword arguments the training type's own trainer gets besides `args` (model, train_dataset,
        processing_class, peft_config, callbacks; the reward functions for grpo and rloo). For a trainer_factory."""
        inputs: dict[str, Any] = self._family().trainer_inputs(self)
        return inputs

    def shared_inputs(self, prepare: Callable[[Dataset], Dataset]) -> dict[str, Any]:
        """What every TRL trainer of the canary gets besides `args`: the model, the data (`prepare`d for the family),
        the tokenizer, LoRA, the canary's callbacks (each family's trainer_inputs adds its own)."""
        model = self.model  # first: a run loads (and says it loads) the model, then the data
        return {
            "model": model,
            "train_dataset": prepare(self.dataset),
            "processing_class": self.tokenizer,
            "peft_config": self.peft_config,
            "callbacks": self.callbacks,
        }

    def _family(self) -> ModuleType:
        return importlib.import_module(f"canary_action.train.{self.config.training_type}")

    def trainer_kwargs(self) -> dict[str, Any]:
        """TrainingArguments every family shares. The canary owns these: per-step logs, NaN visible, no saving."""
        cfg = self.config
        kwargs: dict[str, Any] = {
            "output_dir": str(self.run_dir / TRAINER_DIR),
            "max_steps": cfg.max_steps,
            "per_device_train_batch_size": cfg.batch_size,
            "gradient_accumulation_steps": cfg.gradient_accumulation_steps,
            "learning_rate": cfg.learning_rate,
            "warmup_steps": cfg.warmup_steps,
            "max_grad_norm": cfg.max_grad_norm,
            "seed": cfg.seed,
            "data_seed": cfg.seed,
            # Per-step data: TRL and transformers default to sparser logging, which hides spikes and NaN.
            "logging_steps": 1,
            # Otherwise the Trainer replaces a NaN/Inf loss with the running mean before it is logged.
            "logging_nan_inf_filter": False,
            # TRL's configs turn bf16 on by default; precision is ours to decide (placement.py).
            "bf16": self.placement.dtype == "bf16",
            "fp16": self.placement.dtype == "fp16",
            "use_cpu": not self.placement.on_cuda,
            "torch_compile": cfg.torch_compile,
            "report_to": "none",
            "save_strategy": "no",
            "eval_strategy": "no",
            "disable_tqdm": True,  # the canary prints its own progress line
            "dataloader_num_workers": 0,
        }
        # transformers 5 renamed gradient_checkpointing; older releases in our range only know the old name.
        names = {f.name for f in dataclasses.fields(TrainingArguments)}
        kwargs["activation_checkpointing" if "activation_checkpointing" in names else "gradient_checkpointing"] = (
            cfg.gradient_checkpointing
        )
        if cfg.num_processes > 1:
            kwargs.update(distributed.trainer_kwargs(cfg, self.placement.on_cuda))
        return kwargs
