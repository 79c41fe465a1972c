"""One model scored on the held-out set by the config's metric: a point of the evaluation.

The evaluator process (process.py) scores rebuilt models with it; a training process whose model cannot be rebuilt
scores its own live model with it (train/side_evaluation.py). Both score the same examples the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Any

import torch

from canary_action.config.schema import CommonConfig
from canary_action.evaluate import scoring
from canary_action.evaluate.examples import HeldoutSet
from canary_action.metrics.heldout import HeldoutPoint

#: Loads a model by name as training does: (name, task) -> model (TrainingSetup.load_model).
ModelLoader = Callable[..., Any]


class Scorer:
    def __init__(
        self,
        config: CommonConfig,
        tokenizer: Any,
        heldout: HeldoutSet,
        device: torch.device,
        load_model: ModelLoader,
    ) -> None:
        self.config, self.tokenizer, self.set, self.device = config, tokenizer, heldout, device
        self.reward_functions: list[Callable[..., Any]] = []
        self.reward_scorers: list[Callable[[Sequence[str]], list[float]]] = []
        self._reference: dict[Hashable, list[tuple[float, float]]] = {}
        if heldout.metric == "reward":
            self._load_rewards(load_model)

    def point(self, model: Any, step: int, start: Hashable) -> HeldoutPoint:
        """The model's point at `step`. `start` names the starting model it trained from: the first model scored
        under a name is that starting model (step 0), the preference metric's reference."""
        size, device, hset = self.config.heldout.batch_size, self.device, self.set
        if hset.metric == "next_token":
            values, accuracy = scoring.next_token(model, hset.sequences, batch_size=size, device=device)
            return HeldoutPoint(step=step, value=_mean(values), accuracy=accuracy, examples=values)
        if hset.metric == "preference":
            if start not in self._reference:
                self._reference[start] = scoring.answer_logps(model, hset.pairs, batch_size=size, device=device)
            reference = self._reference[start]
            policy = reference if step == 0 else scoring.answer_logps(model, hset.pairs, batch_size=size, device=device)
            margins, share = scoring.preference(policy, reference)
            return HeldoutPoint(step=step, value=_mean(margins), accuracy=share, examples=margins)
        config: Any = self.config
        completion_ids = scoring.generate(
            model, self.tokenizer, hset.prompts, max_new_tokens=getattr(config, "max_new_tokens", 64),
            temperature=getattr(config, "temperature", 1.0), batch_size=size, device=device,
        )  # fmt: skip
        texts = self.tokenizer.batch_decode(completion_ids, skip_special_tokens=True)
        values = scoring.rewards(
            self.reward_functions, hset.prompt_texts, texts, completion_ids, hset.columns, self.reward_scorers
        )
        return HeldoutPoint(step=step, value=_mean(values), examples=values)

    def _load_rewards(self, load_model: ModelLoader) -> None:
        from canary_action.train.rewards import reward_functions

        config: Any = self.config
        self.reward_functions = reward_functions(
            getattr(config, "reward_funcs", []), max_new_tokens=config.max_new_tokens
        )
        if getattr(config, "reward_model", None) is not None:
            self.reward_scorers.append(self._reward_model(config.reward_model, load_model))

    def _reward_model(self, name: str, load_model: ModelLoader) -> Callable[[Sequence[str]], list[float]]:
        from canary_action.train.builtin import catalog, tokenizer

        model = load_model(name, task="sequence-classification").to(self.device).eval()
        its_tokenizer: Any
        if catalog.split(name) is not None:
            its_tokenizer = tokenizer.build_tokenizer()
        else:
            from transformers import AutoTokenizer

            its_tokenizer = AutoTokenizer.from_pretrained(name)
        if its_tokenizer.pad_token is None:
            its_tokenizer.pad_token = its_tokenizer.eos_token

        @torch.no_grad()
        def score(texts: Sequence[str]) -> list[float]:
            batch = its_tokenizer(list(texts), return_tensors="pt", padding=True, truncation=True, max_length=1024)
            return [float(v) for v in model(**batch.to(self.device)).logits[:, 0]]

        return score


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0
