# Source of docs/tutorials/08-replay.ipynb: edit here, then `python scripts/build_tutorials.py`.
# %% [markdown]
# # Replay: the step that went NaN, on the model alone, under variants
#
# A canary run stopped at a NaN. Was it the code, or the precision it ran in? Which attention implementation,
# which dtype, would make it go away, and what does each cost? A whole run takes minutes to answer each
# question; `canary replay` answers them in seconds, on the step itself: the batch exactly as the model received
# it, the weights it started from and the RNG state it saw, captured by the run ([docs/replay.md](../replay.md)).
#
# In this notebook (a minute or two on a 2-core CPU, offline):
#
# 1. a bf16 run of the tiny SFT canary with a planted NaN that only a half precision makes: it stops, and
#    captures its NaN step **without any capture config**;
# 2. `canary replay` reproduces the NaN, and `--variant dtype=fp32` says the precision made it;
# 3. a variant table on the builtin model: eager against sdpa attention, fp32 against bf16, gradient
#    checkpointing on and off, each timed, the loss checked against the recording;
# 4. one replay across two code trees: the base commit's and a pull request's, whose loss code got slower.

# %%
import json
import os
import shutil
import sys
import time
from pathlib import Path

import matplotlib.pyplot as plt
from IPython.display import Markdown, display

from canary_action import api
from canary_action.train.replay import Variant, replay


def find_repo() -> Path:
    """The rlhf-canary checkout: $CANARY_REPO, else the first folder from here up that holds configs/tiny."""
    if "CANARY_REPO" in os.environ:
        return Path(os.environ["CANARY_REPO"]).resolve()
    for folder in [Path.cwd(), *Path.cwd().parents]:
        if (folder / "configs" / "tiny").is_dir():
            return folder
    raise FileNotFoundError("open this notebook inside the rlhf-canary checkout, or set CANARY_REPO to it")


REPO = find_repo()
CONFIG = REPO / "configs" / "tiny" / "sft.yaml"
HELDOUT_OFF = "heldout.enabled=false"  # the held-out evaluation is 04-root-cause's subject, not this one's
WORK = (Path("runs") / "replay").resolve()  # beside the notebook; runs/ is ignored by git
if WORK.exists():
    shutil.rmtree(WORK)
# `!canary` below: the command installed beside this kernel's Python, whatever the PATH Jupyter started with.
os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
started = time.perf_counter()

# %% [markdown]
# ## 1. A NaN that only bf16 makes
#
# `fault_injection.precision_loss_at_step: 6` multiplies step 6's loss by `1 + (log(1 - x) - log(1 - x))` with
# `x = 1 - 1e-4` in the dtype the model computes in: exactly 1 in fp32, NaN in bf16, where `x` rounds to 1 — the
# kind of NaN a half precision makes (a `log(1 - p)` of a probability that rounds to 1). The run is in bf16
# (autocast on the CPU) and has **no `capture:` block**.

# %%
nan_run = api.run(
    CONFIG,
    output_dir=WORK / "nan",
    overrides=["max_steps=10", "dtype=bf16", "fault_injection.precision_loss_at_step=6", HELDOUT_OFF],
)
NAN_DIR = nan_run.metrics_path.parent
status = nan_run.metrics.status
print(f"{status.state}: {status.reason} at step {status.step}")
print(*[n for n in nan_run.metrics.notices if n.startswith("capture: ")], sep="\n")

# %% [markdown]
# ## 2. Replay it, in the run's dtype and in fp32
#
# The first row is the run as it was; the second changes one config key. Each builds the run's model and
# trainer, loads the step's starting weights, restores the RNG state, and calls the trainer's own loss on the
# captured batch, then backward.

# %%
# !canary replay {NAN_DIR} --step 6 --variant dtype=fp32 --repeats 1 -o {WORK / "nan-replay"}

# %%
rows = {row.variant: row for row in replay(NAN_DIR, [Variant.parse(""), Variant.parse("dtype=fp32")], repeats=1).rows}
print("as run:", rows["as run"].loss, "| fp32:", rows["dtype=fp32"].loss)
# The same NaN as the run's, reproduced; gone in fp32: the precision made it, not the code.
assert rows["as run"].non_finite, rows["as run"]
assert rows["as run"].bitwise_equal, rows["as run"]
assert not rows["dtype=fp32"].non_finite, rows["dtype=fp32"]

# %% [markdown]
# ## 3. A variant table on the builtin model
#
# A healthy fp32 run, capturing step 4 on purpose (`capture.steps`). Replayed as run, the loss is **bitwise
# equal** to the recording (the CPU, fp32, the run's one thread). Each variant changes one key; its loss moves
# by what the change does to the arithmetic (sdpa and eager compute the same attention in another order).
# A variant that cannot run here is a row with its error, not the end of the replay.

# %%
clean = api.run(CONFIG, output_dir=WORK / "clean", overrides=["max_steps=5", "capture.steps=[4]", HELDOUT_OFF])
CLEAN_DIR = clean.metrics_path.parent
VARIANTS = ["", "attn_implementation=eager", "attn_implementation=sdpa", "dtype=bf16", "gradient_checkpointing=true",
            "attn_implementation=flash_attention_2"]  # fmt: skip
table = replay(CLEAN_DIR, [Variant.parse(v) for v in VARIANTS], repeats=3)
lines = ["| variant | forward ms | backward ms | loss | vs recorded |", "|---|---|---|---|---|"]
for row in table.rows:
    if row.status == "fails":
        lines.append(f"| {row.variant} | | | | fails: {row.error} |")
        continue
    versus = "bitwise equal" if row.bitwise_equal else f"differs by {row.largest_difference:.2g}"
    lines.append(f"| {row.variant} | {row.forward_ms:.1f} | {row.backward_ms:.1f} | {row.loss:.6f} | {versus} |")
display(Markdown("\n".join(lines)))

# %%
timed = [row for row in table.rows if row.status == "ok"]
figure, axis = plt.subplots(figsize=(8, 3))
axis.barh([r.variant for r in timed], [r.forward_ms for r in timed], label="forward (the trainer's loss)")
axis.barh([r.variant for r in timed], [r.backward_ms for r in timed], left=[r.forward_ms for r in timed],
          label="backward")  # fmt: skip
axis.set_xlabel("ms, median of 3")
axis.legend()
plt.tight_layout()
plt.show()

# %%
by_variant = {row.variant: row for row in table.rows}
assert by_variant["as run"].bitwise_equal, by_variant["as run"]
assert by_variant["attn_implementation=flash_attention_2"].status == "fails"  # not installable on a CPU
assert all(row.status == "ok" for row in table.rows if "flash" not in row.variant), table.rows

# %% [markdown]
# ## 4. The same batch with two commits' code
#
# Two code trees, as a pull request's lockstep pair has them: the base commit's and the pull request's. Both use
# their own trainer (`trainer_factory`), and the pull request's loss code now blocks for a quarter of a second
# each call — a host-side loop, a sync — without changing the loss. `--tree` replays the captured step with each
# tree's code on the import path: the model's own forward and backward, base against head, separated from the
# rest of the step.

# %%
SLOW = """
import time

from canary_action.train.builtin.example_factory import build_trainer as plain


def build_trainer(context):
    trainer = plain(context)
    loss = trainer.compute_loss

    def slower(model, inputs, *args, **kwargs):
        time.sleep(0.25)  # the pull request's new per-call work
        return loss(model, inputs, *args, **kwargs)

    trainer.compute_loss = slower
    return trainer
"""
custom = (REPO / "configs" / "tiny" / "custom.yaml").read_text(encoding="utf-8")
custom = custom.replace("canary_action.train.builtin.example_factory", "team_model")
TREES = {"base": WORK / "base", "head": WORK / "head"}
for side, code in (("base", "from canary_action.train.builtin.example_factory import build_trainer\n"),
                   ("head", SLOW)):  # fmt: skip
    TREES[side].mkdir(parents=True)
    (TREES[side] / "canary.yaml").write_text(custom, encoding="utf-8")
    (TREES[side] / "team_model.py").write_text(code, encoding="utf-8")
os.chdir(TREES["base"])  # the run trains the base tree's code, as the default branch's canary does
base_run = api.run("canary.yaml", output_dir=WORK / "trees-run", overrides=["max_steps=3", "capture.steps=[2]",
                                                                            HELDOUT_OFF])  # fmt: skip
BASE_RUN = base_run.metrics_path.parent

# %%
REPLAYED = WORK / "trees-replay"
# !canary replay {BASE_RUN} --tree {TREES["base"]} --tree {TREES["head"]} --repeats 1 -o {REPLAYED}

# %%
rows = {r["variant"]: r for r in json.loads((REPLAYED / "replay.json").read_text())["rows"]}
base_row, head_row = rows[f"tree {TREES['base']}"], rows[f"tree {TREES['head']}"]
print(f"forward: base {base_row['forward_ms']:.0f} ms, head {head_row['forward_ms']:.0f} ms; loss equal: "
      f"{head_row['bitwise_equal']}")  # fmt: skip
assert head_row["bitwise_equal"], head_row  # the same loss: only the time moved
assert head_row["forward_ms"] >= 250, head_row
assert head_row["forward_ms"] > base_row["forward_ms"], (base_row, head_row)
print(f"notebook: {time.perf_counter() - started:.0f} s")
