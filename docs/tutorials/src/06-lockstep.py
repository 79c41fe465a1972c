# Source of docs/tutorials/06-lockstep.ipynb: edit here, then `python scripts/build_tutorials.py`.
# %% [markdown]
# # Lockstep A/B: the same slowdown, judged by separate runs and by a lockstep pair
#
# The [quickstart](01-quickstart.ipynb) judged a pull request's canary against baselines that ran *earlier*, in
# separate processes. On a shared machine (a CI runner, a laptop, a GPU with neighbours) the speed of separate
# runs drifts: other jobs come and go, clocks move, caches are warm or cold. The comparison is honest about it:
# it measures how far the baselines disagree among themselves and **widens its step-time limit** to match, so
# that drift is not called a regression. The price is that a real slowdown smaller than the drift passes.
#
# A **lockstep pair** (`canary pair`) trains the base commit and the pull request in one job, taking turns: in
# each round, one side trains two steps while the other waits, then the other side trains the same two steps.
# Whatever drifts on the machine hits both sides of a round alike, so the pair compares them round by round
# and is judged by the precision it has: its limit is a 3 % minimum effect, raised only to its own noise.
#
# In this notebook (a minute or two on a 2-core CPU, offline) we plant the **same slowdown** — extra compute
# in every step, about 30 % of a step — and judge it both ways:
#
# 1. separate runs: two baselines and the slow pull request, one after the other, with `api.compare`;
# 2. a lockstep pair of a base tree and a head tree, with `canary pair`;
#
# then put the two verdicts side by side and plot what each saw.

# %%
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

import matplotlib.pyplot as plt
from IPython.display import Markdown, display

from canary_action import api
from canary_action.train.instrument import PlantedWork


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
STEPS = "max_steps=100"  # the file's 30 steps, stretched: 50 rounds of two steps for the pair
# The held-out evaluation scores each run in a process of its own (seconds): off here, where this notebook is about
# something else; 04-root-cause shows it.
HELDOUT_OFF = "heldout.enabled=false"
WORK = Path("runs") / "lockstep"  # beside the notebook; runs/ is ignored by git
if WORK.exists():
    shutil.rmtree(WORK)  # a fresh start: the baseline folder must hold this notebook's runs only
# `!canary` below: the command installed beside this kernel's Python, whatever the PATH Jupyter started with.
os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
started = time.perf_counter()
print(f"config {CONFIG}\nwork in {WORK.resolve()}")

# %% [markdown]
# ## Two trees: the base commit and the pull request
#
# `canary pair CONFIG --base BASE_TREE --head HEAD_TREE` reads `CONFIG` inside each tree, since a pull request
# may change it, and trains each side with its own tree as the working directory and on the import path (after the
# installed packages).
# In CI the trees are two checkouts (the action makes the base one a git worktree). Here the pull request changes
# only the config, so a tree is a folder holding one file: the quickstart's tiny SFT canary as `canary.yaml` — the
# base tree gets it as it is, the head tree with a planted slowdown (below). The canary's own code comes from
# this installation on both sides.
#
# First the base tree, and the separate runs' **baselines**: two runs of the base config, one after the other,
# as a default branch would have recorded them (`api.run` trains exactly as `canary run` does).

# %%
BASE_TREE, HEAD_TREE = WORK / "trees" / "base", WORK / "trees" / "head"
BASE_TREE.mkdir(parents=True)
shutil.copy(CONFIG, BASE_TREE / "canary.yaml")
BASELINES = WORK / "baselines"
baselines = [api.run(BASE_TREE / "canary.yaml", output_dir=BASELINES, overrides=[STEPS, HELDOUT_OFF]) for _ in range(2)]
for outcome in baselines:
    print(outcome.metrics_path, f"median step {outcome.metrics.summary.step_time_s.median * 1000:.0f} ms")

# %% [markdown]
# ## The planted slowdown
#
# `fault_injection.extra_matmuls_per_step: N` does N extra 256x256 matrix products inside every training step:
# compute, as a real regression costs (a slower kernel, an extra copy), so on a loaded machine it slows down with
# the rest of the step. We size it as `benchmarks/lockstep.py` does: time one product here, and plant as many as
# make **30 % of a step** (of the quieter baseline's median step, timed with the quietest product; both on one
# thread, as the canary trains). On a quiet machine a pair catches far less (+10 % in every try,
# docs/benchmarks.md); 30 % keeps this notebook's check reliable on a busy CI machine too, where a neighbour's
# bursts make every round noisier and the pair's limit wider.


# %%
def matmul_s() -> float:
    """One 256x256 float32 product on one thread, as fault_injection.extra_matmuls_per_step does it: the
    quickest of 7 rounds of 200 (PlantedWork.timings_s, as benchmarks/lockstep.py times it)."""
    return min(PlantedWork.timings_s(rounds=7))


SHARE = 0.30
step_s = min(b.metrics.summary.step_time_s.median for b in baselines)
product_s = matmul_s()
PRODUCTS = round(SHARE * step_s / product_s)
HEAD_TREE.mkdir(parents=True)
head_config = (BASE_TREE / "canary.yaml").read_text(encoding="utf-8")
head_config += f"fault_injection:\n  extra_matmuls_per_step: {PRODUCTS}  # the pull request's slowdown\n"
(HEAD_TREE / "canary.yaml").write_text(head_config, encoding="utf-8")
print(f"step {step_s * 1000:.0f} ms, one product {product_s * 1000:.3f} ms")
print(f"planted: {PRODUCTS} products per step, {PRODUCTS * product_s * 1000:.0f} ms = {SHARE:.0%} of a step")

# %% [markdown]
# ## 1. Separate runs
#
# The pull request's canary runs now, from the head tree, and is judged against the two baselines, as
# `canary compare` would. Look at the step-time check's **limit**: the tier's 10 %, widened to three times
# the noise of the comparison — the baselines' spread, pooled with a prior from the machine's step-to-step
# noise (two baselines cannot show how far a shared machine drifts).

# %%
head_run = api.run(HEAD_TREE / "canary.yaml", output_dir=WORK / "pr", overrides=[STEPS, HELDOUT_OFF])
separate = api.compare(head_run.metrics_path, BASELINES)
separate_step = next(c for c in separate.checks if c.name == "step_time")
print(separate.verdict, "-", separate.reason)
print("step_time:", separate_step.status, "-", separate_step.message)
print("limit:", separate_step.threshold_note or "the tier's, not widened")

# %% [markdown]
# ## 2. A lockstep pair
#
# The same two trees, trained in one job. Both sides' log lines go to stderr, each prefixed `[tiny-sft base]`
# or `[tiny-sft head]`; the report goes to stdout, as `canary compare` prints it (exit code 1 for a
# regression). Its "Paired A/B" line counts the rounds it judged, after the warm-up. The pair writes
# `base/` and `head/` (each a complete metrics.json), `pair.json` (the rounds and who went first in each),
# `result.json` and `report.md`.

# %%
PAIRS = WORK / "pairs"
# !canary pair canary.yaml --base {BASE_TREE} --head {HEAD_TREE} --set {STEPS} --set {HELDOUT_OFF} -o {PAIRS}

# %% [markdown]
# `api.compare` judges a pair's directory again (no baselines needed): the same result as the command's.

# %%
(pair_dir,) = PAIRS.iterdir()
paired = api.compare(pair_dir, [])
paired_step = next(c for c in paired.checks if c.name == "step_time")
assert paired.pairing is not None, paired.notes
print(paired.verdict, "-", paired.reason)
print("step_time:", paired_step.status, "-", paired_step.message)
print(f"paired over {paired.pairing.rounds} rounds of {paired.pairing.chunk_steps} steps")

# %% [markdown]
# ## Side by side
#
# The same pull request, the same planted products per step, but not the same measured change. The separate
# runs' change is the slowdown plus whatever the machine's load did between the baselines and the pull
# request's run: on a busy machine it can come out far larger, smaller, even negative. The pair's change is the
# slowdown alone, at the price the load of the moment gave it (planted compute slows down with the machine,
# as a real regression does; the pair's steps also differ from single runs', since it tunes glibc's malloc and
# pins both sides to the same CPU, docs/lockstep.md). What decides is the limit: the separate runs' is widened
# to the drift between runs; the pair's is the 3 % minimum effect (`paired_min_effect_pct`), raised to three times
# its own noise, the spread of its rounds (docs/compare.md).


# %%
def amount(value: float | None, unit: str, sign: str = "") -> str:
    return "" if value is None else f"{value:{sign}.1f} {unit}"


table = [
    "| judged by | verdict | step_time | base step | head step | added | change | 95 % interval | limit |",
    "|---|---|---|---|---|---|---|---|---|",
]
for label, result, check in [
    ("separate runs (2 baselines)", separate, separate_step),
    (f"lockstep pair ({paired.pairing.rounds} rounds)", paired, paired_step),
]:
    ms = [None if v is None else 1000 * v for v in (check.baseline, check.current, check.delta)]
    interval = f"[{check.interval.low:+.1f}, {check.interval.high:+.1f}] %" if check.interval else ""
    figures = [amount(ms[0], "ms"), amount(ms[1], "ms"), amount(ms[2], "ms", "+"), amount(check.delta_pct, "%", "+")]
    limit = amount(check.threshold, "%", "+")
    table.append(f"| {label} | **{result.verdict}** | {check.status} | {' | '.join(figures)} | {interval} | {limit} |")
display(Markdown("\n".join(table)))
caught = "caught it" if separate_step.status == "fail" else "did not catch it"
print(f"planted {PRODUCTS} products per step; separate runs {caught} this time, the pair: {paired_step.status}")

# %%
# Checked when this notebook runs in CI: the lockstep pair flags the planted slowdown as a regression, by step
# time; the separate runs' limit is wider than the pair's. (Whether the separate runs catch it depends on the
# machine's load while they ran, so their verdict is shown above, not asserted.)
assert paired.verdict == "regression", paired.reason
assert paired_step.status == "fail", paired_step.message
assert separate_step.threshold is not None, separate_step.message
assert paired_step.threshold is not None, paired_step.message
assert separate_step.threshold > paired_step.threshold, (separate_step.threshold, paired_step.threshold)

# %% [markdown]
# ## What each of them saw
#
# Left, the separate runs: every step's time of the two baselines and the pull request. Their levels move with
# the machine's load from one run to the next, and that drift is what the comparison must allow for. Middle,
# the pair: each side's median step per round — the two lines rise and fall together, since whatever slowed a
# round slowed both sides. Right, what the pair judges: head against base per round, in percent, with the
# effect it reports (a trimmed mean of the rounds, its shaded interval) and the limit. The grey area is the
# warm-up the comparison leaves out (left).

# %%
STEP, STEP_TIME, ROUND = "step", "perf/step_time_s", "pair/round"


def per_round(metrics: api.Metrics, warmup: int) -> dict[int, float]:
    """Round -> the median of the side's steady steps in it (seconds)."""
    table: dict[int, list[float]] = {}
    for step, seconds, number in zip(*(metrics.series[k] for k in (STEP, STEP_TIME, ROUND)), strict=True):
        if step > warmup and seconds is not None and number is not None and number >= 0:
            table.setdefault(int(number), []).append(seconds)
    return {number: statistics.median(values) for number, values in table.items()}


warmup_steps = paired.warmup.steps if paired.warmup is not None else 0
base_rounds = per_round(api.load_metrics(pair_dir / "base" / "metrics.json"), warmup_steps)
head_rounds = per_round(api.load_metrics(pair_dir / "head" / "metrics.json"), warmup_steps)
numbers = sorted(base_rounds.keys() & head_rounds.keys())
ratios = [100 * (head_rounds[r] / base_rounds[r] - 1) for r in numbers]

fig, axes = plt.subplots(1, 3, figsize=(16, 4.2))
ax = axes[0]
for index, outcome in enumerate(baselines, 1):
    ax.plot(outcome.metrics.series[STEP], outcome.metrics.series[STEP_TIME], label=f"baseline {index}", alpha=0.8)
ax.plot(head_run.metrics.series[STEP], head_run.metrics.series[STEP_TIME], label="pull request", color="C3")
if separate.warmup is not None and separate.warmup.steps:
    ax.axvspan(0.5, separate.warmup.steps + 0.5, color="grey", alpha=0.15)
ax.set(title="separate runs", xlabel="optimizer step", ylabel="step time (s)", ylim=(0, None))
ax.legend()
ax = axes[1]
ax.plot(numbers, [base_rounds[r] for r in numbers], "o-", label="base side")
ax.plot(numbers, [head_rounds[r] for r in numbers], "o-", label="head side (pull request)", color="C3")
ax.set(title="lockstep pair", xlabel="round (after the warm-up)", ylabel="median step time (s)", ylim=(0, None))
ax.legend()
ax = axes[2]
ax.bar(numbers, ratios, color="C3", alpha=0.6, label="head / base, per round")
ax.axhline(paired_step.delta_pct, color="black", label=f"effect {paired_step.delta_pct:+.1f} %")
if paired_step.interval is not None:
    ax.axhspan(paired_step.interval.low, paired_step.interval.high, color="black", alpha=0.12)
ax.axhline(paired_step.threshold, color="C2", linestyle="--", label=f"limit {paired_step.threshold:+.0f} %")
ax.axhline(0, color="grey", linewidth=0.8)
ax.set(title="what the pair judges", xlabel="round (after the warm-up)", ylabel="head vs base (%)")
ax.legend()
fig.tight_layout()
plt.show()
print(f"this notebook ran for {time.perf_counter() - started:.0f} s")

# %% [markdown]
# ## What to take away
#
# - Separate runs judge a pull request against history; on a shared machine their limit has to be as wide as
#   the drift between runs, so a slowdown of a third of a step can pass. They are still the right record
#   for the learning checks and for drift over weeks, which a pair cannot see.
# - A lockstep pair judges it against its base commit, trained in the same job: drift cancels round by round
#   and its limit is a few percent: the 3 % minimum effect, raised to its own noise. It trains twice the steps of
#   one run, in one job (docs/lockstep.md measured 1.5x the wall time of one `canary run` of a team's canary).
# - In the action, a pull request is paired with its base commit by default (`baseline: auto`: the pair for speed,
#   the artifact baselines for the learning history); `baseline: artifacts` opts out.
#
# ## Where next
#
# - How a pair works, what it writes, its statistics, costs and limits: [docs/lockstep.md](../lockstep.md); the
#   measurements behind it (false alarms, detection of +5 % to +20 %): [docs/benchmarks.md](../benchmarks.md).
# - Run it in CI, with the base commit checked out for you: [docs/action.md](../action.md).
# - Running, comparing and the PR comment: the [quickstart](01-quickstart.ipynb).
