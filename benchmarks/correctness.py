"""The correctness gate on real pairs: correctness slips written as team code fail, pure refactors pass.

    python benchmarks/correctness.py collect -o benchmarks/data/correctness-2026-11-27
    python benchmarks/correctness.py replay benchmarks/data/correctness-2026-11-27 --date 2026-11-27 --write-docs
    python benchmarks/correctness.py margins -o /tmp/margins --write-docs

Three team canaries, each a repository of its own (`canary.yaml` and a package), on the builtin tiny models:

- team-sft: a custom Trainer with the team's chat formatting, collator and compute_loss (team_pipeline/trainer.py);
- team-dpo: the team's DPO set-up, TRL's DPOTrainer with a deep-copied frozen reference and its own column mapping
  (team_dpo/, as ../shared/data/team-dpo-canary has it);
- team-grpo: TRL's GRPO with the team's reward function (team_rewards/rewards.py).

A head tree is the base tree with one edit, as a pull request would make it: a slip (the label shift lost, a double
shift, the chat template dropped from the data, a learning rate a tenth, DPO's beta ten times too large, chosen and
rejected swapped, the reward's sign flipped, the reward scored on the prompt) or a refactor that keeps the math (the
loss written another way, the collator rewritten, the package renamed, the reward rewritten). One slip the held-out
figure does not see is kept as `harmless` (padding left in the labels: HEADS says why): it must pass, with its
numerics reported changed. `collect` runs every job of the plan — `canary pair canary.yaml --base BASE --head HEAD`,
as a user does, with the defaults — in one random order; A/A pairs (the base tree on both sides) twice: with the
held-out evaluation and without (`--set heldout.enabled=false`), for its cost. `replay` judges each pair with the
real comparison (`run_compare`, what `canary compare PAIR_DIR` runs) and writes the table in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

REPO: Final = Path(__file__).resolve().parent.parent
CONFIG: Final = Path("canary.yaml")
MANIFEST: Final = "manifest.jsonl"

SFT_CONFIG: Final = """\
# A team's SFT canary: its own chat formatting, collator and loss (team_pipeline/trainer.py) on the builtin model.
name: team-sft
training_type: custom
trainer_factory: team_pipeline.trainer:build_trainer
model_name: builtin:tiny-llama
dataset_name: builtin:sft-messages
dataset_size: 512
max_length: 128
max_prompt_length: 32
max_steps: 60
batch_size: 8
gradient_accumulation_steps: 1
learning_rate: 6.0e-3
warmup_steps: 3
use_peft: false
"""
SFT_TRAINER: Final = '''\
"""Our SFT trainer: the team's chat formatting, collator and loss, on the model and data the canary loads."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from transformers import Trainer, TrainingArguments

IGNORE = -100


def tokenize(tokenizer, max_length):
    def encode(example):
        ids = tokenizer.apply_chat_template(example["messages"], tokenize=True, return_dict=True)["input_ids"]
        return {"input_ids": list(ids)[:max_length]}

    return encode


class TeamCollator:
    def __init__(self, pad_id):
        self.pad_id = pad_id

    def __call__(self, features):
        longest = max(len(f["input_ids"]) for f in features)
        ids = torch.full((len(features), longest), self.pad_id)
        mask = torch.zeros((len(features), longest), dtype=torch.long)
        for i, feature in enumerate(features):
            n = len(feature["input_ids"])
            ids[i, :n] = torch.tensor(feature["input_ids"])
            mask[i, :n] = 1
        labels = ids.masked_fill(mask == 0, IGNORE)
        return {"input_ids": ids, "attention_mask": mask, "labels": labels}


class TeamTrainer(Trainer):
    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        labels = inputs.pop("labels")
        outputs = model(**inputs)
        logits = outputs.logits[:, :-1, :]
        targets = labels[:, 1:]
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)).float(), targets.reshape(-1), ignore_index=IGNORE)
        return (loss, outputs) if return_outputs else loss


def build_trainer(context):
    config, tokenizer = context.config, context.tokenizer
    dataset = context.dataset.map(tokenize(tokenizer, config.max_length), remove_columns=context.dataset.column_names)
    args = TrainingArguments(**context.trainer_kwargs(), remove_unused_columns=False)
    collator = TeamCollator(tokenizer.pad_token_id)
    return TeamTrainer(model=context.model, args=args, train_dataset=dataset, data_collator=collator)
'''
DPO_CONFIG: Final = """\
# A team's DPO canary: its own DPOTrainer set-up (team_dpo) on the builtin model and preference data.
name: team-dpo
training_type: custom
trainer_factory: team_dpo.factory:build_trainer
model_name: builtin:tiny-llama
dataset_name: builtin:preference
dataset_size: 512
max_length: 128
max_steps: 40
batch_size: 8
gradient_accumulation_steps: 1
learning_rate: 5.0e-4
warmup_steps: 5
use_peft: false
"""
DPO_DATA: Final = '''\
"""Map the preference data into the columns DPOTrainer reads."""


def to_preference_columns(example):
    return {"prompt": example.get("prompt", ""), "chosen": example["chosen"], "rejected": example["rejected"]}
'''
DPO_FACTORY: Final = '''\
"""trainer_factory for the canary: our DPO set-up with an explicit frozen reference model."""

import copy

from trl import DPOConfig, DPOTrainer

from team_dpo.data import to_preference_columns

BETA = 0.1


def build_trainer(context):
    config = context.config
    dataset = context.dataset.map(to_preference_columns, remove_columns=context.dataset.column_names)
    reference = copy.deepcopy(context.model).eval()
    for p in reference.parameters():
        p.requires_grad_(False)
    args = DPOConfig(**context.trainer_kwargs(), beta=BETA, max_length=config.max_length)
    return DPOTrainer(model=context.model, ref_model=reference, args=args, train_dataset=dataset,
                      processing_class=context.tokenizer)
'''
GRPO_CONFIG: Final = """\
# A team's GRPO canary: TRL's GRPO with the team's reward (team_rewards/rewards.py) on the builtin model.
name: team-grpo
training_type: grpo
model_name: builtin:tiny-gpt-neox
dataset_name: builtin:prompts
dataset_size: 256
max_length: 64
max_prompt_length: 24
max_new_tokens: 16
num_generations: 8
max_steps: 30
batch_size: 8
gradient_accumulation_steps: 1
learning_rate: 2.0e-2
warmup_steps: 2
use_peft: false
reward_funcs: [team_rewards.rewards:early_letters]
"""
GRPO_REWARDS: Final = '''\
"""Our reward: the share of words starting with a-g."""

EARLY = frozenset("abcdefg")


def early_letters(completions, **kwargs):
    scores = []
    for completion in completions:
        words = completion.split()
        scores.append(sum(word[0] in EARLY for word in words) / len(words) if words else 0.0)
    return scores
'''
#: family -> (config, {path in the tree: source})
FAMILIES: Final[dict[str, tuple[str, dict[str, str]]]] = {
    "team-sft": (SFT_CONFIG, {"team_pipeline/__init__.py": "", "team_pipeline/trainer.py": SFT_TRAINER}),
    "team-dpo": (DPO_CONFIG, {"team_dpo/__init__.py": "", "team_dpo/data.py": DPO_DATA,
                              "team_dpo/factory.py": DPO_FACTORY}),
    "team-grpo": (GRPO_CONFIG, {"team_rewards/__init__.py": "", "team_rewards/rewards.py": GRPO_REWARDS}),
}  # fmt: skip
Edit = tuple[str, str, str]  # (file, old text, new text)
#: (family, label) -> (kind, what it does, the edits). kind: slip (must fail), refactor (must pass), or harmless: a
#: slip that leaves the held-out figure where it was, so it must pass with its numerics changed (padding in the
#: labels of right-padded batches: the pad positions are learned at once and, under Adam, the real tokens' smaller
#: share of the loss changes no update's size; measured: held-out loss 5.064 on both sides of a 60-step pair).
HEADS: Final[dict[tuple[str, str], tuple[str, str, list[Edit]]]] = {
    ("team-sft", "no_shift"): ("slip", "the label shift lost in compute_loss", [
        ("team_pipeline/trainer.py", "logits = outputs.logits[:, :-1, :]", "logits = outputs.logits"),
        ("team_pipeline/trainer.py", "targets = labels[:, 1:]", "targets = labels")]),
    ("team-sft", "double_shift"): ("slip", "the labels shifted twice (the model predicts two tokens ahead)", [
        ("team_pipeline/trainer.py", "logits = outputs.logits[:, :-1, :]", "logits = outputs.logits[:, :-2, :]"),
        ("team_pipeline/trainer.py", "targets = labels[:, 1:]", "targets = labels[:, 2:]")]),
    ("team-sft", "pad_in_labels"): ("harmless", "the collator leaves padding in the labels", [
        ("team_pipeline/trainer.py", "labels = ids.masked_fill(mask == 0, IGNORE)", "labels = ids.clone()")]),
    ("team-sft", "template_dropped"): ("slip", "the chat template dropped: the turns joined as plain text", [
        ("team_pipeline/trainer.py",
         'ids = tokenizer.apply_chat_template(example["messages"], tokenize=True, return_dict=True)["input_ids"]',
         'text = " ".join(turn["content"] for turn in example["messages"])\n'
         '        ids = tokenizer(text, add_special_tokens=False)["input_ids"]')]),
    ("team-sft", "lr_tenth"): ("slip", "the trainer's learning rate a tenth of the config's (a typo)", [
        ("team_pipeline/trainer.py",
         "args = TrainingArguments(**context.trainer_kwargs(), remove_unused_columns=False)",
         "args = TrainingArguments(**{**context.trainer_kwargs(), 'learning_rate': config.learning_rate / 10}, "
         "remove_unused_columns=False)")]),
    ("team-sft", "loss_rewrite"): ("refactor", "the loss written as log_softmax + gather + masked mean", [
        ("team_pipeline/trainer.py",
         "        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)).float(), targets.reshape(-1), "
         "ignore_index=IGNORE)\n",
         "        logp = torch.log_softmax(logits.float(), dim=-1)\n"
         "        keep = targets != IGNORE\n"
         "        picked = logp.gather(-1, targets.clamp(min=0).unsqueeze(-1)).squeeze(-1)\n"
         "        loss = -(picked * keep).sum() / keep.sum()\n")]),
    ("team-sft", "collator_rewrite"): ("refactor", "the collator rewritten with pad_sequence", [
        ("team_pipeline/trainer.py",
         "        longest = max(len(f[\"input_ids\"]) for f in features)\n"
         "        ids = torch.full((len(features), longest), self.pad_id)\n"
         "        mask = torch.zeros((len(features), longest), dtype=torch.long)\n"
         "        for i, feature in enumerate(features):\n"
         "            n = len(feature[\"input_ids\"])\n"
         "            ids[i, :n] = torch.tensor(feature[\"input_ids\"])\n"
         "            mask[i, :n] = 1\n",
         "        rows = [torch.tensor(f[\"input_ids\"]) for f in features]\n"
         "        ids = torch.nn.utils.rnn.pad_sequence(rows, batch_first=True, padding_value=self.pad_id)\n"
         "        ones = [torch.ones(len(r), dtype=torch.long) for r in rows]\n"
         "        mask = torch.nn.utils.rnn.pad_sequence(ones, batch_first=True, padding_value=0)\n")]),
    ("team-sft", "renamed"): ("refactor", "the package renamed (team_pipeline -> team_training)", [
        ("RENAME", "team_pipeline", "team_training")]),
    ("team-dpo", "beta_x10"): ("slip", "DPO's beta ten times too large", [
        ("team_dpo/factory.py", "BETA = 0.1", "BETA = 1.0")]),
    ("team-dpo", "swapped"): ("slip", "the column mapping swaps chosen and rejected", [
        ("team_dpo/data.py", '"chosen": example["chosen"], "rejected": example["rejected"]',
         '"chosen": example["rejected"], "rejected": example["chosen"]')]),
    ("team-dpo", "factory_rewrite"): ("refactor", "the factory rewritten (a helper for the reference model)", [
        ("team_dpo/factory.py",
         "    reference = copy.deepcopy(context.model).eval()\n    for p in reference.parameters():\n"
         "        p.requires_grad_(False)\n",
         "    reference = frozen_copy(context.model)\n"),
        ("team_dpo/factory.py", "def build_trainer(context):",
         "def frozen_copy(model):\n    copied = copy.deepcopy(model).eval()\n    copied.requires_grad_(False)\n"
         "    return copied\n\n\ndef build_trainer(context):")]),
    ("team-dpo", "renamed"): ("refactor", "the package renamed (team_dpo -> team_prefs)", [
        ("RENAME", "team_dpo", "team_prefs")]),
    ("team-grpo", "reward_sign"): ("slip", "the reward's sign flipped", [
        ("team_rewards/rewards.py", "scores.append(sum(", "scores.append(-sum(")]),
    ("team-grpo", "reward_on_prompt"): ("slip", "the reward scored on the prompt, not the completion", [
        ("team_rewards/rewards.py", "    for completion in completions:\n",
         "    for completion in kwargs[\"prompts\"]:\n")]),
    ("team-grpo", "reward_rewrite"): ("refactor", "the reward rewritten (a helper per completion)", [
        ("team_rewards/rewards.py",
         "    scores = []\n    for completion in completions:\n        words = completion.split()\n"
         "        scores.append(sum(word[0] in EARLY for word in words) / len(words) if words else 0.0)\n"
         "    return scores\n",
         "    return [share(completion.split()) for completion in completions]\n\n\n"
         "def share(words):\n    if not words:\n        return 0.0\n"
         "    return sum(1 for word in words if word[0] in EARLY) / len(words)\n")]),
}  # fmt: skip
#: What `collect` runs by default: every slip twice, every refactor three (4 for SFT's), A/A pairs with and without
#: the held-out evaluation (its cost) for each family.
PLAN: Final = ",".join(
    [f"{f}/{label}:2" for (f, label), (kind, _, _) in HEADS.items() if kind in ("slip", "harmless")]
    + [f"{f}/{label}:{4 if f == 'team-sft' else 3}" for (f, label), (kind, _, _) in HEADS.items() if kind == "refactor"]
    + [f"{f}/aa:3" for f in FAMILIES]
    + [f"{f}/aa-off:3" for f in FAMILIES]
)


def make_tree(root: Path, family: str, label: str = "aa") -> Path:
    """The family's repository, with the head `label`'s edits (aa: none)."""
    config, files = FAMILIES[family]
    tree = root / family / label
    sources = dict(files)
    edits = HEADS[(family, label)][2] if (family, label) in HEADS else []
    for path, old, new in edits:
        if path == "RENAME":
            sources = {p.replace(old, new, 1): s.replace(f"{old}.", f"{new}.") for p, s in sources.items()}
            config = config.replace(f"{old}.", f"{new}.")
            continue
        if old not in sources[path]:
            raise ValueError(f"{family}/{label}: {old!r} is not in {path}")
        sources[path] = sources[path].replace(old, new)
    for path, source in {"canary.yaml": config, **sources}.items():
        (tree / path).parent.mkdir(parents=True, exist_ok=True)
        (tree / path).write_text(source, encoding="utf-8")
    return tree


def run_pair(base: Path, head: Path, out: Path, *extra: str) -> tuple[Path, float, int]:
    """`canary pair` with the defaults (plus `extra`), as a user runs it: (its folder, wall seconds, exit code)."""
    out.mkdir(parents=True, exist_ok=True)
    before = set(out.iterdir())
    command = [sys.executable, "-m", "canary_action", "pair", str(CONFIG), "--base", str(base), "--head", str(head),
               "-o", str(out), "--json", *extra]  # fmt: skip
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False, cwd=REPO)
    wall = time.perf_counter() - start
    if done.returncode not in (0, 1):
        raise RuntimeError(f"canary pair failed ({done.returncode}): {done.stderr[-3000:]}")
    (new,) = set(out.iterdir()) - before
    return new, wall, done.returncode


def parse_plan(plan: str) -> list[tuple[str, str]]:
    jobs = []
    for item in filter(None, plan.split(",")):
        name, _, count = item.partition(":")
        family, _, label = name.partition("/")
        if family not in FAMILIES or (label not in ("aa", "aa-off") and (family, label) not in HEADS):
            raise SystemExit(f"unknown job {name!r} in the plan")
        jobs += [(family, label)] * int(count)
    return jobs


def collect(out: Path, *, plan: str, seed: int) -> None:
    out.mkdir(parents=True, exist_ok=True)
    trees = out / "trees"
    jobs = parse_plan(plan)
    random.Random(seed).shuffle(jobs)
    with (out / MANIFEST).open("a", encoding="utf-8") as manifest:
        for number, (family, label) in enumerate(jobs, 1):
            base = make_tree(trees, family)
            head = base if label in ("aa", "aa-off") else make_tree(trees, family, label)
            extra = ("--set", "heldout.enabled=false") if label == "aa-off" else ()
            started = time.strftime("%H:%M:%S")
            pair, wall, code = run_pair(base, head, out / "pairs" / family, *extra)
            row = {"family": family, "label": label, "pair": str(pair.relative_to(out)), "wall_s": wall,
                   "exit_code": code, "started": started}  # fmt: skip
            manifest.write(json.dumps(row) + "\n")
            manifest.flush()
            print(f"[{number}/{len(jobs)}] {family} {label} {wall:.0f} s exit {code}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Judged:
    family: str
    label: str
    kind: str
    """slip, refactor, aa (A/A with the held-out evaluation) or aa-off (without)."""
    wall_s: float
    verdict: str
    heldout: str
    """The heldout_eval check's status."""
    heldout_share: float | None
    """How much worse the head's held-out figure is, in % of what the base side learned."""
    learned_se: float | None
    """What the base side learned, in standard errors of that learning: how measurably the canary learns."""
    numerics: str
    """identical, within_tolerance, changed, or none."""
    first_step: int | None
    eval_s: float | None
    """The evaluation's own seconds after training (both sides)."""
    failed: tuple[str, ...] = ()
    """The checks that failed."""


def judge_all(data: Path, rows: Sequence[dict[str, Any]]) -> list[Judged]:
    from canary_action.compare.command import pair_members, run_compare

    judged = []
    for row in rows:
        pair = data / row["pair"]
        result = run_compare(pair, [])
        check = next(c for c in result.checks if c.name == "heldout_eval")
        members = pair_members(pair)
        evaluations = members[2].heldout if members is not None else None
        seconds = [e.wall_s for e in (evaluations or {}).values() if e.wall_s is not None]
        summary = result.heldout
        kind = row["label"] if row["label"] in ("aa", "aa-off") else HEADS[(row["family"], row["label"])][0]
        judged.append(Judged(
            family=row["family"], label=row["label"], kind=kind, wall_s=row["wall_s"], verdict=result.verdict,
            heldout=check.status, heldout_share=check.delta_pct,
            learned_se=summary.learning / summary.learning_se if summary and summary.learning_se else None,
            numerics=result.numerics.state if result.numerics else "none",
            first_step=result.numerics.first_step if result.numerics else None,
            eval_s=sum(seconds) if seconds else None,
            failed=tuple(c.name for c in result.checks if c.status == "fail"),
        ))  # fmt: skip
    return judged


def render(judged: Sequence[Judged], when: str) -> str:
    lines = [
        f"Collected {when} on this 2-core shared VM, one thread per side, with the defaults (no threshold file); "
        "`python benchmarks/correctness.py collect -o DIR`, then `replay DIR --write-docs`. A slip must fail "
        "(verdict regression, heldout_eval failed); a refactor must pass.",
        "",
        "| canary | head | kind | pairs | verdict | heldout_eval | held-out change (% of the base's learning) | "
        "numerics |",
        "|---|---|---|---|---|---|---|---|",
    ]
    order = [(f, label) for f in FAMILIES for label in ("aa", "aa-off", *(lb for (ff, lb) in HEADS if ff == f))]
    for family, label in order:
        group = [j for j in judged if j.family == family and j.label == label]
        if not group:
            continue
        kind = group[0].kind
        what = (
            HEADS[(family, label)][1]
            if (family, label) in HEADS
            else "the base tree on both sides" + (", the held-out evaluation off" if label == "aa-off" else "")
        )
        shares = [j.heldout_share for j in group if j.heldout_share is not None]
        share = f"{min(shares):+.1f} … {max(shares):+.1f}" if shares else "—"
        numerics = ", ".join(sorted({_numerics(j) for j in group}))
        lines.append(
            f"| {family} | {label}: {what} | {kind} | {len(group)} | {_count(group, 'verdict')} | "
            f"{_count(group, 'heldout')} | {share} | {numerics} |"
        )
    lines += ["", _rates(judged), "", _cost(judged), "", _learning(judged)]
    return "\n".join(lines)


def _numerics(j: Judged) -> str:
    return f"changed from step {j.first_step}" if j.numerics == "changed" else j.numerics.replace("_", " ")


def _count(group: Sequence[Judged], field: str) -> str:
    values = [getattr(j, field) for j in group]
    return ", ".join(f"{v} {values.count(v)}" for v in sorted(set(values)))


def _rates(judged: Sequence[Judged]) -> str:
    slips = [j for j in judged if j.kind == "slip"]
    harmless = [j for j in judged if j.kind == "harmless"]
    refactors = [j for j in judged if j.kind == "refactor"]
    aa = [j for j in judged if j.kind in ("aa", "aa-off")]
    parts = []
    if slips:
        kinds = len({(j.family, j.label) for j in slips})
        caught = sum(j.verdict == "regression" for j in slips)
        parts.append(f"Slips: {caught} of {len(slips)} pairs failed ({kinds} kinds)")
    if harmless:
        said = sum(j.verdict == "pass" and j.numerics == "changed" for j in harmless)
        parts.append(f"harmless slips: {said} of {len(harmless)} passed with their numerics reported changed")
    if refactors:
        parts.append(f"refactors: {sum(j.verdict != 'pass' for j in refactors)} of {len(refactors)} pairs did not pass")
    if aa:
        identical = sum(j.numerics == "identical" for j in aa if j.kind == "aa")
        evaluated = sum(j.kind == "aa" for j in aa)
        alarms = [j for j in aa if j.verdict != "pass"]
        said = "; ".join(f"{j.family} {j.label} {j.verdict} ({', '.join(j.failed) or 'none failed'})" for j in alarms)
        parts.append(
            f"A/A pairs: numerics identical in {identical} of {evaluated} with the evaluation, "
            f"{len(aa) - len(alarms)} of {len(aa)} passed" + (f" — not: {said}" if alarms else "")
        )
    return "; ".join(parts) + "."


def _cost(judged: Sequence[Judged]) -> str:
    parts = []
    for family in FAMILIES:
        on = [j.wall_s for j in judged if j.family == family and j.kind == "aa"]
        off = [j.wall_s for j in judged if j.family == family and j.kind == "aa-off"]
        evals = [j.eval_s for j in judged if j.family == family and j.kind == "aa" and j.eval_s is not None]
        if not (on and off):
            continue
        without, with_ = statistics.median(off), statistics.median(on)
        said = (
            f"{family} {without:.1f} s without ({min(off):.1f}-{max(off):.1f}), {with_:.1f} s with "
            f"({min(on):.1f}-{max(on):.1f}): {100 * (with_ - without) / without:+.0f} %"
        )
        if evals:
            after = statistics.median(evals)
            said += f", of which the evaluation after training {after:.1f} s ({100 * after / with_:.0f} % of the pair)"
        parts.append(said)
    return (
        "Cost of the held-out evaluation (wall time of an A/A pair, median and range, interleaved with and "
        "without it): " + "; ".join(parts) + "."
    )


def _learning(judged: Sequence[Judged]) -> str:
    parts = []
    for family in FAMILIES:
        margins = [j.learned_se for j in judged if j.family == family and j.kind == "aa" and j.learned_se]
        if margins:
            parts.append(f"{family} {min(margins):.0f}-{max(margins):.0f}×")
    return "How measurably each canary learns (the base side's held-out learning in standard errors of it): " + (
        "; ".join(parts) + "."
    )


TINY_CONFIGS: Final = ("sft", "dpo", "dpo-lora", "grpo", "rloo", "ppo", "custom")


def margins(out: Path, configs: Sequence[str]) -> str:
    """Train each builtin tiny canary once, as `canary run` does, and say how measurably it learns: its held-out
    learning from the starting model to its end, in standard errors of that learning."""
    from canary_action.metrics.heldout import METRICS
    from canary_action.metrics.io import read_metrics

    lines = [
        "| config | steps | held-out metric | start → end | learned (± SE) | margin | the run's wall time |",
        "|---|---|---|---|---|---|---|",
    ]
    for name in configs:
        before = set(out.iterdir()) if out.exists() else set()
        command = [sys.executable, "-m", "canary_action", "run", f"configs/tiny/{name}.yaml", "-o", str(out)]
        started = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True, check=False, cwd=REPO)
        wall = time.perf_counter() - started
        if done.returncode != 0:  # ppo with a TRL that dropped it: the reason, in its row
            why = next((line for line in done.stderr.splitlines() if line.strip()), "?").replace("|", "/")
            lines.append(f"| {name} | | not run (exit {done.returncode}): {why} | | | | |")
            continue
        (run,) = set(out.iterdir()) - before
        metrics = read_metrics(run / "metrics.json")
        held, steps = metrics.heldout, metrics.summary.num_steps if metrics.summary else "?"
        learned = held.learning() if held is not None else None
        if held is None or held.metric is None or held.start is None or held.end is None or learned is None:
            said = held.message if held is not None else "no evaluation"
            lines.append(f"| {name} | {steps} | {said} | | | | {wall:.0f} s |")
            continue
        label, unit, _ = METRICS[held.metric]
        mean, se = learned
        lines.append(
            f"| {name} | {steps} | {label} ({unit}) | {held.start.value:.4g} → "
            f"{held.end.value:.4g} | {mean:.3g} ± {se:.2g} | {mean / se:.0f}× | {wall:.0f} s |"
        )
    return "\n".join(lines)


def cmd_margins(args: argparse.Namespace) -> None:
    text = margins(args.output, args.configs)
    print(text)
    if args.write_docs:
        _write_docs(text, "tiny-margins")


def _write_docs(text: str, section: str) -> None:
    docs = REPO / "docs" / "benchmarks.md"
    page = docs.read_text(encoding="utf-8")
    begin, end = f"<!-- {section}:begin -->", f"<!-- {section}:end -->"
    start, stop = page.index(begin) + len(begin), page.index(end)
    docs.write_text(page[:start] + "\n" + text + "\n" + page[stop:], encoding="utf-8")


def cmd_collect(args: argparse.Namespace) -> None:
    collect(args.output, plan=args.plan, seed=args.seed)


def cmd_replay(args: argparse.Namespace) -> None:
    rows = [json.loads(line) for line in (args.data / MANIFEST).read_text(encoding="utf-8").splitlines() if line]
    text = render(judge_all(args.data, rows), args.date)
    print(text)
    if args.write_docs:
        _write_docs(text, args.section)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python benchmarks/correctness.py", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(required=True)
    p = sub.add_parser("collect", help="real pairs: slips and refactors as team code, A/A with and without held-out")
    p.add_argument("-o", "--output", type=Path, required=True)
    p.add_argument("--plan", default=PLAN, help="family/label:count,... (default: every head, see PLAN)")
    p.add_argument("--seed", type=int, default=0, help="seed of the job order")
    p.set_defaults(func=cmd_collect)
    p = sub.add_parser("replay", help="judge the collected pairs with the real comparison; the docs table")
    p.add_argument("data", type=Path)
    p.add_argument("--date", default=time.strftime("%Y-%m-%d"))
    p.add_argument("--write-docs", action="store_true", help="replace the table in docs/benchmarks.md")
    p.add_argument("--section", default="correctness", help="the docs section's markers: <!-- NAME:begin/end -->")
    p.set_defaults(func=cmd_replay)
    p = sub.add_parser("margins", help="how measurably each builtin tiny canary learns (one `canary run` each)")
    p.add_argument("-o", "--output", type=Path, required=True)
    p.add_argument("--configs", nargs="+", default=list(TINY_CONFIGS), choices=TINY_CONFIGS)
    p.add_argument("--write-docs", action="store_true", help="replace the tiny-margins table in docs/benchmarks.md")
    p.set_defaults(func=cmd_margins)
    args = parser.parse_args(argv)
    args.func(args)


if __name__ == "__main__":
    main()
