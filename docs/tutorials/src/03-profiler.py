# Source of docs/tutorials/03-profiler.ipynb: edit here, then `python scripts/build_tutorials.py`.
# %% [markdown]
# # My run got slower — here's how to find why
#
# The step-time check says *that* a pull request made training slower. The profiler says *where*: which
# operations take the extra time. In this notebook (a minute or two on a 2-core CPU, offline) you will:
#
# 1. turn on the canary's profiler for a few steps inside the run;
# 2. run a baseline and a variant with a planted slowdown, both profiled;
# 3. read one profile: self time, the top ops, and why the profiled steps are left out of the timing;
# 4. see the comparison fail on step time, and read the **op diff** — the ops whose time grew — as evidence;
# 5. open the chrome trace, in a viewer and from Python.
#
# The [quickstart](01-quickstart.ipynb) covers running, comparing and the report; here we go straight to the
# profile.

# %%
import gzip
import json
import os
import shutil
import sys
from collections import Counter
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
WORK = Path("runs") / "profiler"  # beside the notebook; runs/ is ignored by git
if WORK.exists():
    shutil.rmtree(WORK)  # a fresh start: the baseline folder must hold this notebook's runs only
# `!canary` below: the command installed beside this kernel's Python, whatever the PATH Jupyter started with.
os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
print(f"config {CONFIG}\nruns in {WORK.resolve()}")

# %% [markdown]
# ## 1. Turn the profiler on
#
# The profiler is off by default: it slows every op it records. Switched on, it records a *window* of a few
# optimizer steps with `torch.profiler` and writes two things: a chrome trace of every op in the window, and a
# summary of the top ops in `metrics.json`. These are its settings (the `profiler` section of a config):

# %%
profiler_fields = type(api.load_config(CONFIG).config.profiler).model_fields
for name, field in profiler_fields.items():
    print(f"{name:14} default {field.default!s:18} {field.description}")

# %% [markdown]
# The default window (steps 50-69) lies past the end of this 30-step canary, so we place one inside it: steps
# 11 and 12, after the first steps' warm-up. The profiled steps are left out of the step times, so the run must
# keep enough others. We judge it with the `smoke` threshold tier, made for short canaries, which wants 10
# steady steps (`default` wants 20): 10 steady steps, room for a warm-up cut of up to 10 and the window's 2
# make 22 steps, fewer than the file's 30, to keep this notebook quick. `overrides` are `canary run --set`'s
# `KEY.PATH=VALUE` strings; in a config file the window would be
# `profiler: {enabled: true, start_step: 11, num_steps: 2}`.

# %%
WINDOW_START, WINDOW_STEPS = 11, 2
# The held-out evaluation scores each run in a process of its own (seconds): off here, where this notebook is about
# something else; 04-root-cause shows it.
PROFILED = [
    "heldout.enabled=false",
    "max_steps=22",
    "profiler.enabled=true",
    f"profiler.start_step={WINDOW_START}",
    f"profiler.num_steps={WINDOW_STEPS}",
]
TIER = "smoke"  # canary compare --threshold-tier smoke
print(api.load_config(CONFIG, overrides=PROFILED).config.profiler)

# %% [markdown]
# ## 2. A baseline and a slower pull request
#
# Three baseline runs (the comparison judges a change against the spread it measures between them), then the
# pull request. We plant its slowdown with `fault_injection.extra_matmuls_per_step`: that many extra 256x256
# matrix products inside every training step — real compute, as a slower kernel or a needless extra projection
# would cost. 2,000 of them make a step several times slower: a blunt regression, because on a busy shared CPU
# the step times of separate runs scatter widely and the gate widens its limit to match (a lockstep pair,
# docs/lockstep.md, catches +10 %). The point here is not *whether* it is caught but *what the profile shows*.

# %%
EXTRA_MATMULS = 2000
BASELINES = WORK / "baselines"
baselines = [api.run(CONFIG, output_dir=BASELINES, overrides=PROFILED) for _ in range(3)]
SLOWDOWN = f"fault_injection.extra_matmuls_per_step={EXTRA_MATMULS}"
slow = api.run(CONFIG, output_dir=WORK / "pr-slow", overrides=[*PROFILED, SLOWDOWN])
base = baselines[0]
for label, outcome in [*((f"baseline {i}", b) for i, b in enumerate(baselines, 1)), ("slowed", slow)]:
    print(f"{label:10} median step {outcome.metrics.summary.step_time_s.median * 1000:5.0f} ms  {outcome.run_dir}")

# %% [markdown]
# ## 3. Reading one profile
#
# `metrics.profiler` is the summary: the steps the window covered, where the trace is, and the top ops (20 by
# default, `profiler.top_k`), ordered by self time. **Self time** is the time spent in an op itself, not in
# the ops it calls — `aten::linear` does its work by calling `aten::mm`, and that work counts for `aten::mm` —
# so the self times of all ops add up to the window's total without counting anything twice.
#
# Each op has two self times. **CPU self time** is what the host spent in it. **Device self time** is what
# the GPU spent running its kernels: here, on a CPU, it is 0 for every op — there is no device. On a GPU the
# host only *launches* kernels and returns, so an op's CPU time mostly measures launch overhead while its
# device time is the real work; the op diff below then compares device times.

# %%
window = base.metrics.profiler
print(f"window: steps {window.start_step}-{window.end_step}, trace {window.trace_path}")
print(f"CPU self time, all ops: {window.cpu_time_total_ms:.0f} ms; device self time: {window.device_time_total_ms} ms")


def top_ops_table(metrics: api.Metrics, rows: int = 8) -> str:
    """The profile's top ops per profiled step, as a markdown table."""
    profile = metrics.profiler
    steps = profile.end_step - profile.start_step + 1
    lines = [
        "| op | calls / step | CPU self ms / step | share of CPU time | device self ms / step |",
        "|---|---|---|---|---|",
    ]
    for op in profile.top_ops[:rows]:
        share = op.cpu_self_time_ms / profile.cpu_time_total_ms
        lines.append(
            f"| `{op.name}` | {op.count / steps:.0f} | {op.cpu_self_time_ms / steps:.1f} | {share:.1%} "
            f"| {op.device_self_time_ms / steps:.1f} |"
        )
    return "\n".join(lines)


display(Markdown(top_ops_table(base.metrics)))

# %% [markdown]
# Matrix products (`aten::mm`, `aten::addmm_`) take the largest share, as in most transformer training;
# element-wise ops (`aten::mul`, `aten::copy_`, …) most of the rest. The slowed run's profile reads
# differently — one op class has taken over the window:

# %%
display(Markdown(top_ops_table(slow.metrics)))

# %% [markdown]
# ### The profiled steps are left out of the timing
#
# Recording costs time: every op call is timed and, by default, its input shapes and memory allocations are
# recorded too (`record_shapes`, `profile_memory`). On this tiny model, a few hundred op calls per step, the cost
# hides in the noise; on a real model with thousands of small kernels per step it can be far larger. So
# the canary marks the profiled steps in the per-step series (`perf/in_profiler_window`) and leaves them out of
# every timing summary, as it leaves out the warm-up: the median step time and the step-time check read the
# other steps only. (Each run detects its own warm-up; a comparison then cuts the longest of them from every
# run, so that all of them compare the same steps.)

# %%
for label, outcome in [("baseline", base), ("slowed", slow)]:
    series, summary = outcome.metrics.series, outcome.metrics.summary
    profiled = [t for t, w in zip(series["perf/step_time_s"], series["perf/in_profiler_window"], strict=True) if w]
    print(
        f"{label:8}: {summary.num_steps} steps: warm-up 1-{summary.warmup_steps}, profiled "
        f"{outcome.metrics.profiler.start_step}-{outcome.metrics.profiler.end_step} "
        f"({sum(profiled) / len(profiled) * 1000:.0f} ms on average), {summary.num_steady_steps} steady "
        f"(median {summary.step_time_s.median * 1000:.0f} ms)"
    )

# %% [markdown]
# Step time per step, both runs (log scale: the slowed run is several times slower). The shaded steps are the
# profiler window.

# %%
STEP, STEP_TIME = "step", "perf/step_time_s"
fig, ax = plt.subplots(figsize=(10, 4))
for label, outcome in [("baseline", base), (f"+{EXTRA_MATMULS:,} matmuls per step", slow)]:
    ax.plot(outcome.metrics.series[STEP], outcome.metrics.series[STEP_TIME], marker=".", label=label)
ax.axvspan(window.start_step - 0.5, window.end_step + 0.5, color="orange", alpha=0.2, label="profiler window")
ax.set_yscale("log")
ax.set_xlabel("optimizer step")
ax.set_ylabel("step time (s)")
ax.legend()
fig.tight_layout()
plt.show()

# %% [markdown]
# ## 4. The verdict, and the op diff as evidence
#
# First what CI sees: `canary compare` fails the step-time check (exit code 1), and because both sides were
# profiled, its report lists the **"Profiled ops that moved"** — and ranks a *kernel* suspect that names them.

# %%
baseline_files = [str(b.metrics_path) for b in baselines]
baseline_args = " ".join(baseline_files)
# !canary compare --threshold-tier {TIER} {slow.metrics_path} {baseline_args}

# %% [markdown]
# `host_memory` (a CPU run's peak RSS) is skipped here, and says why: the profiler keeps every event of its
# window in host memory, and the slowed window records thousands more op calls, a cost of measuring that would
# read as the pull request's. Memory is judged on runs without the profiler.
#
# From Python, the same comparison. `result.op_changes` is the op diff: each op's self time **per profiled
# step** in the baseline and in this run (the windows may differ in length), and the change, largest first.
# `None` on one side means the op was not in that side's top ops — new, or just below the `top_k` cut — and
# its change is then the least it can be.

# %%
result = api.compare(slow.metrics_path, baseline_files, tier=TIER)
step_time = next(c for c in result.checks if c.name == "step_time")
print(result.verdict, "-", result.reason)


def ms(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


rows = ["| op | baseline ms / step | current ms / step | change |", "|---|---|---|---|"]
for op in result.op_changes:
    rows.append(f"| `{op.name}` | {ms(op.baseline_ms)} | {ms(op.current_ms)} | {op.delta_ms:+.2f} |")
display(Markdown("\n".join(rows)))
print("times are", "device" if result.op_changes[0].device else "CPU", "self times")

# %% [markdown]
# The suspects weigh that diff with everything else. The *kernel* suspect names the grown op class and how much
# of the step-time growth it explains; the *config* suspect names the planted fault. In a real pull request
# the config line would be a dependency bump or a changed model setting — and the op diff tells you which ops
# to look at.

# %%
for rank, suspect in enumerate(result.suspects, 1):
    print(f"{rank}. [{suspect.category}, confidence {suspect.confidence:.2f}] {suspect.summary}")
    for line in suspect.evidence:
        print("     evidence:", line)
    for line in suspect.next_steps:
        print("     next:", line)

# %% [markdown]
# ### Any two profiles, without a verdict
#
# `api.diff_profiles(before, after)` is that op diff alone, for any two profiled runs (a metrics.json path, a
# loaded `Metrics` or a `Run`): handy to compare two branches, or a run with last week's. Here, two of the
# baselines against each other — the noise an op diff carries when nothing changed — and the first baseline
# against the slowed run.

# %%
noise = api.diff_profiles(baselines[0].metrics_path, baselines[1].metrics_path, top=3)
diff = api.diff_profiles(base.metrics, slow.metrics, top=8)
print("baseline vs baseline:", ", ".join(f"{op.name} {op.delta_ms:+.2f} ms" for op in noise))
print("baseline vs slowed:  ", ", ".join(f"{op.name} {op.delta_ms:+.2f} ms" for op in diff[:3]))

# %%
fig, (left, right) = plt.subplots(1, 2, figsize=(13, 4.5))
steps_base = window.end_step - window.start_step + 1
steps_slow = slow.metrics.profiler.end_step - slow.metrics.profiler.start_step + 1
top_base = {op.name: op.cpu_self_time_ms / steps_base for op in base.metrics.profiler.top_ops}
top_slow = {op.name: op.cpu_self_time_ms / steps_slow for op in slow.metrics.profiler.top_ops}
names = list(top_base)[:8][::-1]  # the baseline's top ops, largest at the top
positions = range(len(names))
left.barh([p + 0.2 for p in positions], [top_base[n] for n in names], height=0.4, label="baseline")
left.barh([p - 0.2 for p in positions], [top_slow.get(n, 0.0) for n in names], height=0.4, label="slowed")
left.set_yticks(list(positions), names)
left.set_xscale("log")
left.set_xlabel("CPU self time per profiled step (ms, log scale)")
left.set_title("the baseline's top ops, in both runs")
left.legend()
shown = diff[::-1]
bars = right.barh([op.name for op in shown], [op.delta_ms for op in shown])
for bar, op in zip(bars, shown, strict=True):
    bar.set_color("tab:red" if op.delta_ms > 0 else "tab:green")
right.bar_label(bars, labels=[f"{op.delta_ms:+.1f}" for op in shown], padding=3)
right.set_xlabel("change in self time per profiled step (ms)")
right.set_title("api.diff_profiles(baseline, slowed)")
right.margins(x=0.2)
fig.tight_layout()
plt.show()

# %%
# Checked when this notebook runs in CI: the planted slowdown fails step time, and the op diff puts the op
# class it changed, aten::mm, first, in the result and in the kernel suspect's evidence.
GROWN_OP = "aten::mm"
assert result.verdict == "regression", result.reason
assert step_time.status == "fail", step_time.message
assert result.op_changes[0].name == GROWN_OP, result.op_changes
assert diff[0].name == GROWN_OP, diff
growth = [op.delta_ms for op in diff if op.delta_ms > 0]
assert diff[0].delta_ms > 0.9 * sum(growth), diff  # one op class holds the growth, not a spread of small ones
kernel = [s for s in result.suspects if s.category == "kernel"]
assert kernel, [s.summary for s in result.suspects]
assert GROWN_OP in kernel[0].summary, kernel[0].summary
assert kernel[0].evidence[0].startswith(GROWN_OP), kernel[0].evidence
host_memory = next(c for c in result.checks if c.name == "host_memory")
assert host_memory.status == "skip", host_memory.message  # the profiler's memory is not the pull request's

# %% [markdown]
# ## 5. Opening the trace
#
# The summary keeps the top ops; the trace keeps every op call of the window, in time order, with its inputs'
# shapes. It is `profiler_traces/trace.json.gz` in the run's folder (gzip: a GPU run's trace is tens of MB of
# JSON), and its path is in `metrics.profiler.trace_path` (relative here, as the output folder we gave the run
# was). Both viewers open the compressed file as it is:
#
# - **[ui.perfetto.dev](https://ui.perfetto.dev)**: "Open trace file" and pick `trace.json.gz` (it stays in your
#   browser; nothing is uploaded). Press `w`/`s` to zoom, `a`/`d` to pan; select a range to get a table of the
#   ops in it, sorted by time.
# - **chrome://tracing** in Chrome or Edge: "Load" the same file.
#
# Open both traces: in the slowed one, every step carries a long run of back-to-back `aten::mm` calls that the
# baseline's steps lack.

# %%
traces = {"baseline": Path(base.metrics.profiler.trace_path), "slowed": Path(slow.metrics.profiler.trace_path)}
for label, path in traces.items():
    print(f"{label:8} {path.resolve()} ({path.stat().st_size / 1e6:.1f} MB)")

# %% [markdown]
# The trace is gzip-compressed JSON in the Chrome trace event format: a list of `traceEvents`, each op call one event
# with its `name`, start (`ts`) and duration (`dur`, in microseconds), and with `record_shapes` its inputs'
# shapes in `args`. So the question the kernel suspect asks — *compare `aten::mm`'s input shapes and launch
# count* — takes a few lines of Python: count the `aten::mm` calls in each trace by the shapes they multiplied.


# %%
def mm_calls(path: Path) -> Counter:
    """aten::mm calls in a chrome trace, counted by their input shapes."""
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    return Counter(
        " x ".join(str(dims) for dims in e.get("args", {}).get("Input Dims", []))
        for e in events
        if e.get("name") == GROWN_OP and e.get("ph") == "X"
    )


calls = {label: mm_calls(path) for label, path in traces.items()}
for label, counter in calls.items():
    print(f"{label}: {sum(counter.values())} aten::mm calls in the window; most frequent shapes:")
    for shapes, count in counter.most_common(3):
        print(f"    {count:5} x {shapes}")
new_shapes = calls["slowed"] - calls["baseline"]
print("calls only the slowed run made:", dict(new_shapes))

# %% [markdown]
# The baseline's products have the model's shapes (tokens x hidden size, for each projection); the slowed run
# makes the same ones plus exactly 2,000 per profiled step of one shape the model never uses, 256x256 by
# 256x256: the planted work, found without reading its code.

# %%
# Checked when this notebook runs in CI: the trace holds exactly the planted products, and nothing else new.
assert dict(new_shapes) == {"[256, 256] x [256, 256]": EXTRA_MATMULS * WINDOW_STEPS}, new_shapes
assert not calls["baseline"] - calls["slowed"], calls["baseline"] - calls["slowed"]

# %% [markdown]
# ## Where next
#
# - How a run is judged, every check, and what the op diff and suspects are made of:
#   [docs/compare.md](../compare.md).
# - More regressions and their suspects — a slow data loader, a memory regression, a NaN, a straggler rank — and
#   how to write the story up for your team: [04-root-cause.ipynb](04-root-cause.ipynb).
# - Every config key, the profiler's included: `canary schema --config`, and the
#   [configs](../configs.md) page.
