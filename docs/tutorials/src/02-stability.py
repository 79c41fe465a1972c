# Source of docs/tutorials/02-stability.ipynb: edit here, then `python scripts/build_tutorials.py`.
# %% [markdown]
# # Stability: a NaN at step k, a diverging loss, grad-norm spikes
#
# A pull request can break training without slowing it: a loss that turns NaN, a learning rate that makes the
# loss run away, gradients that jump. The canary records the loss, the pre-clip gradient norm and every
# non-finite value at the step it happens, and judges them:
#
# | check | fails / warns when | needs a baseline |
# |---|---|---|
# | `nan_steps`, `inf_steps` | a step has a NaN / Inf loss, gradient or logged value (fail) | no |
# | `loss_divergence` | the loss runs away: its rolling median rises far above its best and its noise (fail) | no |
# | `grad_norm_spikes` | more steps with a grad norm > 3x the recent median than the baselines had (warn) | yes |
#
# In this notebook (about a minute on a 2-core CPU, offline) we plant each of the three in a 50-step run of the
# builtin tiny SFT canary, and read the check that catches it and the suspect the comparison ranks first.
# The [quickstart](01-quickstart.ipynb) covers running, comparing and the report.

# %%
import os
import shutil
from pathlib import Path

import matplotlib.pyplot as plt

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
# The file's 30 steps, stretched: divergence is judged from the 15th finite loss on. The held-out evaluation scores
# each run in a process of its own (seconds): off here, where this notebook is about stability; 04-root-cause shows it.
STEPS = ["max_steps=50", "heldout.enabled=false"]
WORK = Path("runs") / "stability"  # beside the notebook; runs/ is ignored by git
if WORK.exists():
    shutil.rmtree(WORK)  # a fresh start: the baseline folder must hold this notebook's runs only
BASELINES = WORK / "baselines"


def show(result: api.CompareResult, *names: str) -> None:
    """The verdict, the named checks and the ranked suspects of a comparison."""
    print(f"verdict: {result.verdict} - {result.reason}\n")
    for check in result.checks:
        if check.name in names:
            print(f"{check.name}: {check.status} - {check.message}")
    for rank, suspect in enumerate(result.suspects, 1):
        print(f"\nsuspect {rank} [{suspect.category}, confidence {suspect.confidence:.2f}] {suspect.summary}")
        for line in suspect.evidence[:3]:
            print("    evidence:", line)
        for line in suspect.next_steps[:2]:
            print("    next:", line)


def check(result: api.CompareResult, name: str):
    """The named check of a comparison."""
    return next(c for c in result.checks if c.name == name)


# %% [markdown]
# ## The baseline
#
# Two runs of the unchanged config. NaN, Inf and divergence are judged on the run alone — a NaN is a failure
# whatever the baseline did — but grad-norm spikes and the learning checks compare with the baselines.

# %%
baselines = [api.run(CONFIG, output_dir=BASELINES, overrides=STEPS) for _ in range(2)]
for outcome in baselines:
    stability = outcome.metrics.stability
    print(outcome.metrics_path, "- NaN steps:", stability.num_nan_steps, "- spikes:", len(stability.grad_norm_spikes))

# %% [markdown]
# ## 1. A NaN at step 10
#
# `fault_injection.nan_loss_at_step` multiplies the loss by NaN at that optimizer step — the stand-in for a
# `log(0)`, a division by a zero-length mask, an fp16 overflow. The non-finite guard stops the run at that
# step (by default: training on NaN weights measures nothing), and `canary run` still exits 0: the run was
# *measured*, with status `stopped_early`; the verdict belongs to the comparison. The metrics record where the
# NaN appeared: the loss, the logged values, the gradients with the parameters' names.

# %%
nan_run = api.run(CONFIG, output_dir=WORK / "nan", overrides=[*STEPS, "fault_injection.nan_loss_at_step=10"])
status = nan_run.metrics.status
print(f"status: {status.state} ({status.reason} at step {status.step})")
for event in nan_run.metrics.stability.non_finite:
    print(f"  step {event.step}: {event.value} in {event.source} {event.key} {event.parameters[:3]}")

# %%
nan_result = api.compare(nan_run.metrics_path, BASELINES)
show(nan_result, "nan_steps", "run_status", "step_time")

# %% [markdown]
# One failure, one cause: `nan_steps` fails; `run_status` is not a second failure (the guard stopped the run on
# purpose), and the checks that need 20 steady steps or a full loss curve say why they were not judged. The top
# suspect is **numerics**, with the first non-finite step as evidence; the config suspect below it names the
# planted fault.

# %%
# Checked when this notebook runs in CI: the run stopped at the planted step and the NaN is what failed it.
assert status.state == "stopped_early", status
assert status.reason == "non_finite", status
assert status.step == 10, status
assert nan_result.verdict == "regression", nan_result.reason
assert check(nan_result, "nan_steps").status == "fail"
assert [c.name for c in nan_result.checks if c.status == "fail"] == ["nan_steps"]
assert nan_result.suspects[0].category == "numerics", nan_result.suspects

# %% [markdown]
# ## 2. A loss that runs away
#
# A learning rate three thousand times the config's (3.0 instead of 1e-3), reached by a linear warm-up over the
# whole run: the loss falls for a few steps while the rate is small, then climbs from about 8 past 100 —
# without ever becoming NaN, so only the divergence check can catch it. It compares the rolling median of the
# loss with its best so far, against both the loss's own step-to-step noise and its size, and needs the rise
# at two consecutive steps.

# %%
diverged = api.run(CONFIG, output_dir=WORK / "diverged", overrides=[*STEPS, "learning_rate=3.0", "warmup_steps=50"])
print("divergence found at step", diverged.metrics.stability.divergence_step)
diverged_result = api.compare(diverged.metrics_path, BASELINES)
show(diverged_result, "loss_divergence", "nan_steps", "loss_curve", "tail_loss")

# %% [markdown]
# `loss_divergence` fails. The learning checks (`loss_curve`, `tail_loss`) warn — by default they never fail
# on their own, because a changed loss may be the point of a pull request — and the top suspect, numerics, lists
# them among what it explains. The config suspect names the raised learning rate: the config diff is evidence.

# %%
# Checked when this notebook runs in CI: the run completed, without a NaN, and divergence failed it.
assert diverged.metrics.status.state == "completed"
assert diverged.metrics.stability.num_nan_steps == 0
assert diverged_result.verdict == "regression", diverged_result.reason
assert check(diverged_result, "loss_divergence").status == "fail"
assert diverged_result.suspects[0].category == "numerics", diverged_result.suspects
assert any("learning_rate" in s.summary for s in diverged_result.suspects), diverged_result.suspects

# %% [markdown]
# ## 3. Grad-norm spikes
#
# Gradient spikes are planted here so that they show on any machine: `fault_injection.grad_spike_at_steps`
# multiplies the loss, and so every gradient, by 20 (`grad_spike_factor`) at steps 15, 25 and 35. (An earlier
# version of this notebook raised the learning rate to 0.05 instead: that spiked on one CPU build and not on
# another, a fault planted so that it could miss.) The update is clipped (`max_grad_norm`), so the run trains on.
# A spike is a step whose pre-clip grad norm exceeds 3x the median of the 10 before it, and that median by 6
# robust sigmas. `grad_norm_spikes` is a warning, not a failure: it is judged against the baselines' count plus
# an allowance (`grad_norm_spikes_allowed`, 2 by default). We judge it as a team that wants to hear of every
# spike would: a threshold file with an allowance of 0 (`canary compare --threshold-file`; the file takes the
# keys of docs/compare.md's thresholds table).

# %%
SPIKES = [15, 25, 35]
spiky = api.run(CONFIG, output_dir=WORK / "spiky", overrides=[*STEPS, f"fault_injection.grad_spike_at_steps={SPIKES}"])
spikes = spiky.metrics.stability.grad_norm_spikes
print("spikes:", [(s.step, round(s.value, 2), round(s.reference, 2)) for s in spikes])
thresholds = WORK / "thresholds.yaml"
thresholds.write_text("grad_norm_spikes_allowed: 0\n")
spiky_result = api.compare(spiky.metrics_path, BASELINES, threshold_file=thresholds)
show(spiky_result, "grad_norm_spikes", "loss_divergence", "loss_curve", "tail_loss")

# %%
# Checked when this notebook runs in CI: spikes are found and warned about; nothing fails.
baseline_spikes = max(len(b.metrics.stability.grad_norm_spikes) for b in baselines)
assert len(spikes) > baseline_spikes, (spikes, baseline_spikes)
assert {s.step for s in spikes} >= set(SPIKES), spikes  # each planted step is found
assert check(spiky_result, "grad_norm_spikes").status == "warn"
assert check(spiky_result, "loss_divergence").status == "pass"
assert spiky_result.verdict == "pass", spiky_result.reason  # warnings are listed in the reason
assert spiky_result.suspects[0].category == "numerics", spiky_result.suspects

# %% [markdown]
# ## The three runs against the baseline
#
# Loss (log scale) and pre-clip grad norm per step. The NaN run's loss ends at step 10 (its last value is NaN,
# stored as null); the diverged run's loss climbs two orders of magnitude while its gradient norm grows with it;
# the spiky run's loss and gradient norm jump twenty-fold at the three planted steps (the loss itself was scaled there),
# and between them it trains like the baseline.

# %%
STEP, LOSS, GRAD_NORM = "step", "train/loss", "train/grad_norm"
runs = {
    "baseline": baselines[0].metrics,
    "NaN at step 10": nan_run.metrics,
    "learning rate 3.0": diverged.metrics,
    "spikes planted at 15, 25, 35": spiky.metrics,
}
fig, axes = plt.subplots(1, 2, figsize=(12, 4))
for ax, name, label in [(axes[0], LOSS, "loss"), (axes[1], GRAD_NORM, "grad norm (pre-clip)")]:
    for run_label, metrics in runs.items():
        ax.plot(metrics.series[STEP], [float("nan") if v is None else v for v in metrics.series[name]], label=run_label)
    ax.set_yscale("log")
    ax.set_xlabel("optimizer step")
    ax.set_ylabel(label)
axes[1].scatter([s.step for s in spikes], [s.value for s in spikes], color="red", zorder=3, label="spikes")
axes[0].axvline(diverged.metrics.stability.divergence_step, color="grey", linestyle=":", label="divergence found")
for ax in axes:
    ax.legend()
fig.tight_layout()
plt.show()

# %% [markdown]
# ## Where next
#
# - Every check and its limits: [docs/compare.md](../compare.md). `nan_steps_allowed`, `inf_steps_allowed` and
#   `grad_norm_spikes_allowed` are thresholds like any other; `fail_on_learning: true` makes the learning checks
#   fail instead of warn.
# - The non-finite guard and what the run records: docs/metrics.md.
# - The [quickstart](01-quickstart.ipynb): baselines, comparison, the PR comment.
