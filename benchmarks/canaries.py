"""The canary families the lockstep benchmark pairs (benchmarks/lockstep.py --canary): a team's repository each,
with the team's own code where a pull request would slow it.

- team-sft: the team's Trainer (collator and loss) on the builtin tiny model; lockstep.py's TEAM_TRAINER.
- team-dpo: the team's own DPO factory building TRL's DPOTrainer with an explicit, deep-copied frozen reference
  model, builtin tiny-llama and preference data, 60 steps: the canary of the 2026-11-27 false alarms (issue 33).
  A pull request slows it with a dashboard diagnostic left on in a callback (tensor work, each step).
- grpo: GRPO on the builtin prompts with the team's own reward function (module:function); a pull request slows
  it with a validation loop left on in the reward (Python work, each call).

A head tree's slowdown is `count` repetitions of the team's unit of work, sized by lockstep.py's calibration.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Final

from benchmarks import correctness


@dataclass(frozen=True)
class Family:
    name: str
    config: str
    """canary.yaml."""
    steps: int
    unit: tuple[str, str]
    """(the team module's file in the tree, its function) whose time sizes a slowdown."""
    planted: str
    """What `count` repetitions are, in words."""
    files: dict[str, str]
    """The team's files, each formatted with `count` (0: the base tree)."""

    def with_steps(self, steps: int) -> Family:
        """The same canary trained for `steps` steps: a pair's noise falls with the square root of its rounds."""
        config = self.config.replace(f"max_steps: {self.steps}\n", f"max_steps: {steps}\n")
        if config == self.config and steps != self.steps:
            raise ValueError(f"{self.name}: no 'max_steps: {self.steps}' line to change")
        return replace(self, config=config, steps=steps)

    def make_tree(self, root: Path, name: str, count: int = 0) -> Path:
        tree = root / name
        for relative, text in {"canary.yaml": self.config, **self.files}.items():
            path = tree / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text.replace("{count}", str(count)), encoding="utf-8")
        return tree


#: The correctness benchmark's team canaries, longer (the DPO canary's 60 steps, as it ran when it gave the false
#: alarms), without the held-out evaluation (speed is judged here; it would add its own process to every pair).
NO_HELDOUT: Final = "heldout:\n  enabled: false\n"
DPO_CONFIG: Final = correctness.DPO_CONFIG.replace("max_steps: 40", "max_steps: 60") + NO_HELDOUT
DPO_FACTORY: Final = '''\
"""trainer_factory for the canary: our DPO set-up with an explicit frozen reference model."""

from __future__ import annotations

import copy

import torch
from transformers import TrainerCallback
from trl import DPOConfig, DPOTrainer

BETA = 0.1
#: Recompute the dashboard's probe each step (left on after debugging).
DIAGNOSTIC_REPEATS = {count}
_PROBE = torch.randn(256, 256, generator=torch.Generator().manual_seed(0))


def probe_diagnostic() -> torch.Tensor:
    """A random-feature projection of the probe, for the training dashboard."""
    return _PROBE @ _PROBE


class Dashboard(TrainerCallback):
    def on_step_end(self, args, state, control, **kwargs):
        with torch.no_grad():
            for _ in range(DIAGNOSTIC_REPEATS):
                probe_diagnostic()


def to_preference_columns(example):
    return {"prompt": example.get("prompt", ""), "chosen": example["chosen"], "rejected": example["rejected"]}


def build_trainer(context):
    config = context.config
    dataset = context.dataset.map(to_preference_columns, remove_columns=context.dataset.column_names)
    reference = copy.deepcopy(context.model).eval()
    for p in reference.parameters():
        p.requires_grad_(False)
    args = DPOConfig(**context.trainer_kwargs(), beta=BETA, max_length=config.max_length)
    return DPOTrainer(
        model=context.model, ref_model=reference, args=args, train_dataset=dataset,
        processing_class=context.tokenizer, callbacks=[Dashboard()],
    )
'''
GRPO_CONFIG: Final = (
    correctness.GRPO_CONFIG.replace("max_steps: 30", "max_steps: 40").replace("dataset_size: 256", "dataset_size: 128")
    + "beta: 0.04\n"
    + NO_HELDOUT
)
GRPO_REWARDS: Final = '''\
"""Our reward: the share of words starting with a-g."""

from __future__ import annotations

#: Re-validate the token table on every call (a check left on).
VOCAB_CHECKS = {count}
_VOCAB = list(range(4096))


def vocab_check() -> int:
    """Validates the token table: every id unique and in range."""
    return len(set(sorted(_VOCAB, reverse=True)))


def _text(completion):
    return completion if isinstance(completion, str) else " ".join(m.get("content", "") for m in completion)


def early_letters(completions, **kwargs):
    for _ in range(VOCAB_CHECKS):
        vocab_check()
    rewards = []
    for completion in completions:
        words = _text(completion).split()
        rewards.append(sum(w[0].lower() in "abcdefg" for w in words) / len(words) if words else 0.0)
    return rewards
'''
FAMILIES: Final = {
    "team-dpo": Family(
        name="team-dpo", config=DPO_CONFIG, steps=60, unit=("team_dpo/factory.py", "probe_diagnostic"),
        planted="diagnostics per step in the team's callback",
        files={"team_dpo/__init__.py": "", "team_dpo/factory.py": DPO_FACTORY},
    ),
    "grpo": Family(
        name="grpo", config=GRPO_CONFIG, steps=40, unit=("team_rewards/rewards.py", "vocab_check"),
        planted="vocabulary checks per call of the team's reward",
        files={"team_rewards/__init__.py": "", "team_rewards/rewards.py": GRPO_REWARDS},
    ),
}  # fmt: skip
#: label -> nominal size, for the families here (team-sft keeps lockstep.py's labels).
LABELS: Final = {"aa": 0.0, "slow5": 0.05, "slow10": 0.10}
