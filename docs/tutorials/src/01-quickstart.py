# Source of docs/tutorials/01-quickstart.ipynb: edit here, then `python scripts/build_tutorials.py`.
# %% [markdown]
# # Quickstart: a baseline, a pull request, a verdict
#
# rlhf-canary runs a short, fixed training job — the *canary* — on every pull request, and compares what it
# measured (speed, memory, stability, learning) with the same job on the default branch. In this notebook you
# will, on the CPU and offline, in a minute or two:
#
# 1. run the canary three times to make a **baseline**;
# 2. run it for a pull request that changes nothing, and see it **pass**;
# 3. run it for a pull request that makes every step slower, and see it fail as a **regression**, from the
#    command line (its exit code is what fails a CI job) and from Python;
# 4. read the checks, the likely cause, and the **PR comment** the GitHub Action would post;
# 5. plot step time and loss against the baseline.
#
# Everything uses the builtin tiny model (`builtin:tiny-llama`, random weights) and synthetic data, so nothing
# is downloaded. Install with `pip install -e '.[train,dev]'` from the repository root (the `dev` extra brings
# Jupyter's kernel and matplotlib).

# %%
import os
import shutil
import subprocess
import sys
from pathlib import Path

import matplotlib.pyplot as plt
from IPython.display import Markdown, display

from canary_action import api


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
WORK = Path("runs") / "quickstart"  # beside the notebook; runs/ is ignored by git
if WORK.exists():
    shutil.rmtree(WORK)  # a fresh start: the baseline folder must hold this notebook's runs only
# `!canary` below: the command installed beside this kernel's Python, whatever the PATH Jupyter started with.
os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
print(f"config {CONFIG}\nruns in {WORK.resolve()}")

# %% [markdown]
# ## The canary's config
#
# A canary is a YAML file: the training type, the model, the data, the batch shape and the number of steps.
# This one fine-tunes (SFT) the builtin tiny model for 30 steps. `api.load_config` validates it as `canary run`
# does — an unknown key is an error with "did you mean …?".

# %%
print(CONFIG.read_text())
loaded = api.load_config(CONFIG)
print(loaded.config.training_type, loaded.config.model_name, loaded.config.max_steps, "steps")

# %% [markdown]
# ## 1. The baseline
#
# In CI, the baseline is the canary run on the default branch, kept as an artifact. Separate runs on a shared
# machine differ by chance (other processes, clocks, caches), so the comparison judges a change against the
# spread it measures between several baselines: we run three. `api.run` trains exactly as `canary run` does
# (its progress lines go to stderr) and returns where it wrote `metrics.json`.

# %%
BASELINES = WORK / "baselines"
baselines = [api.run(CONFIG, output_dir=BASELINES) for _ in range(3)]
for outcome in baselines:
    print(outcome.metrics_path, f"median step {outcome.metrics.summary.step_time_s.median * 1000:.0f} ms")

# %% [markdown]
# ## 2. A pull request that changes nothing
#
# Say the pull request edits documentation: its canary trains exactly what the baseline trained. From the
# command line, `canary compare CURRENT BASELINE...` prints the report and exits 0 for pass or neutral,
# 1 for a regression.

# %%
unchanged = api.run(CONFIG, output_dir=WORK / "pr-unchanged")
# !canary compare {unchanged.metrics_path} {BASELINES}

# %% [markdown]
# The same comparison from Python: `api.compare` returns the result object that `canary compare --json`
# prints. Its step-time check shows the change against the baselines, its confidence interval, and the limit
# — widened when the baselines disagree among themselves, so that drift on a shared machine is not called a
# regression.

# %%
result_unchanged = api.compare(unchanged.metrics_path, BASELINES)
step_time_unchanged = next(c for c in result_unchanged.checks if c.name == "step_time")
print(result_unchanged.verdict, "-", result_unchanged.reason)
print("step_time:", step_time_unchanged.status, "-", step_time_unchanged.message)

# %%
# Checked when this notebook runs in CI: an unchanged workload is not a regression.
assert result_unchanged.verdict in {"pass", "neutral"}, result_unchanged.reason
assert step_time_unchanged.status != "fail", step_time_unchanged.message

# %% [markdown]
# ## 3. A pull request that makes every step slower
#
# Now a pull request that adds work to every training step. We plant it with the config's fault injection:
# `fault_injection.extra_matmuls_per_step` does that many extra 256x256 matrix products inside each step —
# compute, as a real regression costs (a slower kernel, an extra copy). 2,000 products make a step of 50-100
# ms many times slower on a 2-core CPU: a blunt regression, because separate runs on a busy machine drift by
# tens of percent and the gate widens its limit to match (the step-time check below says by how much; a lockstep
# pair, docs/lockstep.md, catches +10 %). `overrides` are `canary run --set`'s `KEY.PATH=VALUE` strings.

# %%
slow = api.run(CONFIG, output_dir=WORK / "pr-slow", overrides=["fault_injection.extra_matmuls_per_step=2000"])

# %% [markdown]
# This is what a CI step runs. The exit code, 1, is what turns the job red.

# %%
# !canary compare {slow.metrics_path} {BASELINES}
cli = subprocess.run(["canary", "compare", str(slow.metrics_path), str(BASELINES)], capture_output=True, check=False)
print("canary compare exited", cli.returncode)

# %% [markdown]
# ### The verdict and the checks
#
# Every check has a status (`pass`, `fail`, `warn`, `skip`), the baseline and current figures, the change and
# the limit it was held to. Failures come first. `skip` says why a check did not apply — on a CPU there is no
# CUDA memory to compare.

# %%
result = api.compare(slow.metrics_path, BASELINES)
print(result.verdict, "-", result.reason)


def amount(value: float | None, unit: str, sign: str = "") -> str:
    return "" if value is None else f"{value:{sign}.4g} {unit}".strip()


rows = ["| check | status | baseline | current | change | limit | message |", "|---|---|---|---|---|---|---|"]
for check in result.checks:
    rows.append(
        f"| {check.name} | {check.status} | {amount(check.baseline, check.unit)} | {amount(check.current, check.unit)} "
        f"| {amount(check.delta_pct, '%', '+')} | {amount(check.threshold, check.threshold_unit, '+')} "
        f"| {check.message.replace('|', '/')} |"
    )
display(Markdown("\n".join(rows)))

# %% [markdown]
# ### Why: the ranked suspects
#
# The comparison also ranks the likely causes, each with its evidence and what to try next. Here the config
# itself names the planted work — in a real pull request the evidence would be a changed dependency, a
# profiler op diff, a longer sequence… (the root-cause tutorial goes through them).

# %%
for rank, suspect in enumerate(result.suspects, 1):
    print(f"{rank}. [{suspect.category}, confidence {suspect.confidence:.2f}] {suspect.summary}")
    for line in suspect.evidence:
        print("     evidence:", line)
    for line in suspect.next_steps:
        print("     next:", line)

# %%
# Checked when this notebook runs in CI: the planted slowdown is caught, by step time, with exit code 1.
step_time = next(c for c in result.checks if c.name == "step_time")
assert result.verdict == "regression", result.reason
assert step_time.status == "fail", step_time.message
assert step_time.delta_pct is not None, step_time.message
assert step_time.delta_pct > 50, step_time.message
assert cli.returncode == 1, cli.stderr
assert any("extra_matmuls_per_step" in s.summary for s in result.suspects), [s.summary for s in result.suspects]

# %% [markdown]
# ## 4. The pull request comment
#
# In a workflow, the GitHub Action posts this as one sticky comment on the pull request (and a check run on
# the commit). `api.render` gives every report format: `comment`, `check`, `summary`, `markdown` and
# `terminal`; `canary report result.json --format comment` is the same from the command line. (GitHub draws
# the Mermaid charts inside it; here they show as code.)

# %%
display(Markdown(api.render(result, "comment")))

# %% [markdown]
# ## 5. Step time and loss against the baseline
#
# The comparison works from per-step series recorded in every `metrics.json` (`perf/step_time_s`,
# `train/loss`, …). Plotted, the slowdown is plain: every step of the slow pull request sits above the
# baselines' band, while its loss follows the baseline exactly — same seed, same data: it changed speed, not
# learning. The grey area is the warm-up the comparison leaves out of the timing.

# %%
STEP, STEP_TIME, LOSS = "step", "perf/step_time_s", "train/loss"
runs = {"pull request: unchanged": unchanged.metrics, "pull request: +2,000 matmuls": slow.metrics}
base_series = [b.metrics.series for b in baselines]
fig, axes = plt.subplots(1, 2, figsize=(12, 4))
for ax, name, label in [(axes[0], STEP_TIME, "step time (s)"), (axes[1], LOSS, "loss")]:
    steps = base_series[0][STEP]
    columns = list(zip(*(s[name] for s in base_series), strict=True))
    low = [min(v for v in col if v is not None) for col in columns]
    high = [max(v for v in col if v is not None) for col in columns]
    ax.fill_between(steps, low, high, alpha=0.3, label="baselines (min-max)")
    for run_label, metrics in runs.items():
        style = "--" if "matmuls" in run_label else "-"  # dashed: the loss lines coincide
        ax.plot(metrics.series[STEP], metrics.series[name], style, label=run_label)
    if result.warmup is not None and result.warmup.steps:
        ax.axvspan(0.5, result.warmup.steps + 0.5, color="grey", alpha=0.15)
    ax.set_xlabel("optimizer step")
    ax.set_ylabel(label)
    ax.legend()
axes[0].set_ylim(bottom=0)
fig.tight_layout()
plt.show()

# %% [markdown]
# ## Where next
#
# - Run the same canary in CI: the GitHub Action and its workflows ([docs/action.md](../action.md),
#   [docs/examples/](../examples/README.md)).
# - How the limits and intervals are set, and every check: [docs/compare.md](../compare.md).
# - Separate runs on a busy machine drift; a lockstep pair trains both sides in turns so the drift cancels:
#   [docs/lockstep.md](../lockstep.md), and the tutorial [06-lockstep.ipynb](06-lockstep.ipynb).
# - NaNs, divergence and grad-norm spikes: the next tutorial, [02-stability.ipynb](02-stability.ipynb); then the
#   profiler ([03](03-profiler.ipynb)), root-cause analysis ([04](04-root-cause.ipynb)) and CI
#   ([05](05-ci.ipynb)).
