# Source of docs/tutorials/07-bisect.ipynb: edit here, then `python scripts/build_tutorials.py`.
# %% [markdown]
# # Bisect: which commit made the canary slower?
#
# The nightly canary failed: step time +30 % against last night. Four commits landed since. Which one did it?
# `canary bisect` answers with [lockstep pairs](06-lockstep.ipynb): it trains the bad commit beside the last
# good one to confirm the regression, then commits in between, each beside the good commit, halving the range
# each time, until one commit is left (docs/bisect.md).
#
# In this notebook (about three minutes on a 2-core CPU, offline) we make a **throwaway git repository** of a
# team's canary — its own `trainer_factory`, as `training_type: custom` runs it — with a short history. One
# commit adds needless work to the team's trainer: a debugging forward pass left in `compute_loss`. Then we
# bisect, read the report and plot each pair's effect.

# %%
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import matplotlib.pyplot as plt
from IPython.display import Markdown, display

WORK = (Path("runs") / "bisect").resolve()  # beside the notebook; runs/ is ignored by git
if WORK.exists():
    shutil.rmtree(WORK)
TEAM = WORK / "team"
TEAM.mkdir(parents=True)
# The commits' author, for this notebook's git alone (your own git settings are not read or changed).
GIT = {
    **os.environ,
    "GIT_AUTHOR_NAME": "Team",
    "GIT_AUTHOR_EMAIL": "team@example.com",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_COMMITTER_NAME": "Team",
    "GIT_COMMITTER_EMAIL": "team@example.com",
    "GIT_CONFIG_NOSYSTEM": "1",
}
started = time.perf_counter()


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=TEAM, env=GIT, check=True, capture_output=True, text=True).stdout


print(f"the team's repository: {TEAM}")

# %% [markdown]
# ## The team's repository
#
# A canary config and a package: `canary.yaml` names the team's factory, `team_pipeline.trainer:build_trainer`,
# which builds a TRL-free `transformers.Trainer` with the team's own `compute_loss` on the model, tokenizer and
# data the canary loads (here the builtin tiny Llama and synthetic text, offline). The canary times every step.

# %%
CONFIG = """\
name: team-sft
training_type: custom
trainer_factory: team_pipeline.trainer:build_trainer
model_name: builtin:tiny-llama
dataset_name: builtin:sft
dataset_size: 256
max_length: 96
max_steps: 40
batch_size: 8
learning_rate: 1.0e-3
use_peft: false
heldout:
  enabled: false  # the bisect follows step time; 04-root-cause shows the held-out evaluation
"""
TRAINER = '''\
"""The team's SFT trainer: its own loss, on the model and data the canary loads."""

from transformers import DataCollatorForLanguageModeling, Trainer, TrainingArguments


class TeamTrainer(Trainer):
    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
{extra}        return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)


def build_trainer(context):
    tokenizer = context.tokenizer

    def tokenize(example):
        return tokenizer(example["text"], truncation=True, max_length=context.config.max_length)

    dataset = context.dataset.map(tokenize, remove_columns=context.dataset.column_names)
    return TeamTrainer(
        model=context.model,
        args=TrainingArguments(**context.trainer_kwargs()),
        train_dataset=dataset,
        data_collator=DataCollatorForLanguageModeling(tokenizer, mlm=False),
    )
'''
#: The needless work: a second forward pass of the whole batch, "to log the loss before the update". About a
#: third of a training step (forward and backward) on any machine: it scales with the model, not the CPU.
DEBUG_FORWARD = """\
        import torch

        with torch.no_grad():  # log the loss before the update (left in after debugging)
            model(**inputs)
"""


def write(path: str, text: str) -> None:
    target = TEAM / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")


def commit(subject: str, files: dict[str, str]) -> str:
    for path, text in files.items():
        write(path, text)
    git("add", "-A")
    git("commit", "-q", "-m", subject)
    return git("rev-parse", "HEAD").strip()


plain, slow = TRAINER.format(extra=""), TRAINER.format(extra=DEBUG_FORWARD)
git("init", "-q", "-b", "main")
write(".gitignore", "canary-bisect/\n__pycache__/\n")
history = [
    commit("team pipeline: the SFT canary",
           {"canary.yaml": CONFIG, "team_pipeline/__init__.py": "", "team_pipeline/trainer.py": plain}),
    commit("docs: how to run the canary", {"README.md": "Run `canary run canary.yaml`.\n"}),
    commit("trainer: log the loss before each update", {"team_pipeline/trainer.py": slow}),
    commit("docs: the canary's owners", {"README.md": "Run `canary run canary.yaml`.\nOwners: infra.\n"}),
    commit("config: describe the canary", {"canary.yaml": CONFIG + "description: the team's SFT canary\n"}),
]  # fmt: skip
PLANTED = history[2]
print(git("log", "--oneline"))

# %% [markdown]
# ## Bisect
#
# `canary bisect CONFIG --good GOOD --bad BAD` runs in the repository's checkout. Each commit it trains is
# checked out in a git worktree of its own (your checkout is not touched), and each pair runs exactly as
# `canary pair` would. It prints the pairs as they start on stderr (their sides' progress too, left out here) and
# the report on stdout; it writes `bisect.json`, `bisect.md` and every pair under `-o`.

# %%
OUT = WORK / "bisect"
command = [sys.executable, "-m", "canary_action", "bisect", "canary.yaml", "--good", history[0], "--bad",
           history[-1], "-o", str(OUT)]  # fmt: skip
done = subprocess.run(command, cwd=TEAM, capture_output=True, text=True, check=False)
print("\n".join(line for line in done.stderr.splitlines() if not line.startswith("[team-sft")))
print(done.stdout)
print("exit code", done.returncode)

# %% [markdown]
# The first pair confirms the regression and picks the check to follow (step time here). Each following pair
# places the commit's effect, with its 95 % interval, between the two ends of the range: like the good commit
# (the change comes later), like the bad one (it is in this commit or before), or neither (then bisect says the
# range is not clear rather than name a commit). `bisect.md` is the same report for a GitHub issue or comment:

# %%
result = json.loads((OUT / "bisect.json").read_text(encoding="utf-8"))
display(Markdown((OUT / "bisect.md").read_text(encoding="utf-8")))

# %%
# Checked when this notebook runs in CI: bisect names the planted commit, clearly, within its budget.
assert done.returncode == 0, done.stderr[-3000:]
assert result["status"] == "found", result["summary"]
(finding,) = result["findings"]
assert finding["clear"], finding
assert finding["commits"][0]["sha"] == PLANTED, (finding["commits"][0], PLANTED)
assert result["pairs"] <= 4, result["pairs"]  # 4 commits: log2(4) + 2
print(f"named {PLANTED[:10]} in {result['pairs']} pairs")

# %% [markdown]
# ## Each pair's effect
#
# Every pair measured one commit against the good commit. Before the planted commit the effect is about zero;
# from it on, about the confirmed effect.

# %%
steps = [s for s in result["steps"] if s["effect"]]
fig, ax = plt.subplots(figsize=(7, 3))
for step in steps:
    effect = step["effect"]
    index = step["commit"]["index"]
    colour = "tab:red" if effect["pct"] > finding["after"]["pct"] / 2 else "tab:blue"
    ax.errorbar(index, effect["pct"], yerr=[[effect["pct"] - effect["low"]], [effect["high"] - effect["pct"]]],
                fmt="o", color=colour, capsize=4)  # fmt: skip
ax.axvline(history.index(PLANTED) - 0.5, color="grey", linestyle="--", label="the planted commit")
ax.axhline(0, color="black", linewidth=0.5)
ax.set_xticks(range(len(history)), [sha[:7] for sha in history], rotation=30)
ax.set_ylabel(f"{result['check']} vs good (%)")
ax.legend()
plt.tight_layout()
plt.show()
print(f"notebook ran in {time.perf_counter() - started:.0f} s")

# %% [markdown]
# ## In CI
#
# docs/examples/nightly.yml runs `bisect` when the nightly fails: on the GPU runner with no token, between the
# night it compared against and the failing commit, and a second job that runs no repository code opens one issue
# with `bisect.md` (docs/action.md). By hand: `canary bisect canary.yaml --good <last good> --bad <first bad>`
# in your checkout (docs/bisect.md: how it decides, what it costs, its limits).
