"""Lockstep A/B on real runs: pairs of a team's canary (its own trainer_factory, collator and compute_loss, on
the builtin tiny model), A/A and with slowdowns written as team code, on a quiet machine and beside a bursty CPU
hog, judged with the defaults (`canary pair` and the action: no threshold file) and the old way (separate runs).

    python benchmarks/lockstep.py collect -o benchmarks/data/lockstep-2026-11-26
    python benchmarks/lockstep.py replay benchmarks/data/lockstep-2026-11-26 --date 2026-11-26 --write-docs

Each tree is a team's repository: `canary.yaml` (training_type custom, trainer_factory
team_pipeline.trainer:build_trainer) and the package `team_pipeline/`. The base tree's trainer is plain; a head
tree's adds needless work, as a pull request would: `compute_loss` recomputing a probe diagnostic N times per
step (tensor work), or the collator re-checking a vocabulary table N times per batch (Python work, timed as
data wait). `collect` first calibrates: the median step of one quiet A/A pair, and the time of one diagnostic
and one check, timed from the base tree's own module on one thread; a slowdown of X % is then X % x step / unit
repetitions. It runs every job of the plan — (label, load) repeated — in one random order, so that drift over
the hour hits every label alike. Each pair is `canary pair canary.yaml --base BASE --head HEAD` as a user runs
it (A/A pairs give the base tree for both sides), timed from the command's start to its end; `single` jobs time
one `canary run` of the base tree for the wall-time ratio. Under load "hog", one bursty CPU hog runs beside the
pair: busy for 0.5-3 s, idle for 0.5-3 s, at random. A manifest (manifest.jsonl) lists every job.

`replay` judges each pair with the real comparison (`run_compare`, what `canary compare PAIR_DIR` runs), with
the defaults unless `--threshold-file` is given, and the same head runs the old way: against the base sides of
three other pairs of the same load (separate runs). A false alarm is a `regression` verdict on an A/A pair; a
detection is step_time failed. Older collections (fault_injection heads, 2026-11-24) replay too: the labels
come from their calibration.json.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

REPO: Final = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # run as a script: benchmarks/ is a package of the repository
    sys.path.insert(0, str(REPO))

from benchmarks import canaries  # noqa: E402
from benchmarks.real_runs import write_docs  # noqa: E402
from canary_action.compare.stats import Effect  # noqa: E402

CONFIG: Final = Path("canary.yaml")
MANIFEST: Final = "manifest.jsonl"
#: Fewer A/A pairs than this fit no process-level spread worth shipping: the table says so beside the figure.
MIN_FIT_PAIRS: Final = 10
#: The planted size (%) of the head whose measured effect scales a family's heads (--size-in-situ).
SIZING_PCT: Final = 10.0
DOCS_BEGIN: Final = "<!-- lockstep:begin -->"
DOCS_END: Final = "<!-- lockstep:end -->"
#: label -> (the team code that slows the head side, nominal size)
LABELS: Final = {
    "aa": ("none", 0.0), "loss5": ("loss", 0.05), "collate5": ("collate", 0.05), "loss10": ("loss", 0.10),
    "collate10": ("collate", 0.10),
}  # fmt: skip
QUIET_PLAN: Final = "aa:12,loss5:5,collate5:5,loss10:3,collate10:3,single:4"
HOG_PLAN: Final = "aa:12,loss5:5,collate5:5,loss10:3,collate10:3"
HOG: Final = """
import os, random, time
parent, rng = os.getppid(), random.Random(0)
while os.getppid() == parent:  # never outlive the collector (a killed collector cannot kill its hog)
    end = time.monotonic() + rng.uniform(0.5, 3.0)
    while time.monotonic() < end:
        pass
    time.sleep(rng.uniform(0.5, 3.0))
"""
TEAM_CONFIG: Final = """\
# A team's canary: its own trainer (team_pipeline/trainer.py) on the builtin tiny model and data, offline.
name: team-sft
training_type: custom
trainer_factory: team_pipeline.trainer:build_trainer
model_name: builtin:tiny-llama
dataset_name: builtin:sft
dataset_size: 512
max_length: 128
max_prompt_length: 32
max_steps: 100
batch_size: 16
gradient_accumulation_steps: 1
learning_rate: 1.0e-3
use_peft: false
"""
TEAM_TRAINER: Final = '''\
"""Our SFT trainer: the team's collator and loss, on the model and data the canary loads (training_type: custom)."""

from __future__ import annotations

import torch
from transformers import DataCollatorForLanguageModeling, Trainer, TrainingArguments
{constants}
_VOCAB = list(range(4096))
_PROBE = torch.randn(256, 256, generator=torch.Generator().manual_seed(0))


def vocab_check() -> int:
    """Validates the token table: every id unique and in range."""
    return len(set(sorted(_VOCAB, reverse=True)))


def probe_diagnostic() -> torch.Tensor:
    """A random-feature projection of the probe, for the training dashboard."""
    return _PROBE @ _PROBE


class TeamCollator(DataCollatorForLanguageModeling):
    def __call__(self, features, return_tensors=None):
{collate_work}        return super().__call__(features, return_tensors)


class TeamTrainer(Trainer):
    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        result = super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
{loss_work}        return result


def build_trainer(context):
    config, tokenizer = context.config, context.tokenizer

    def tokenize(example):
        return tokenizer(example["text"], truncation=True, max_length=config.max_length)

    dataset = context.dataset.map(tokenize, remove_columns=context.dataset.column_names)
    return TeamTrainer(
        model=context.model,
        args=TrainingArguments(**context.trainer_kwargs()),
        train_dataset=dataset,
        data_collator=TeamCollator(tokenizer, mlm=False),
    )
'''
#: What a head tree adds to the base tree's trainer (the pull request): a constant and the loop that uses it.
SLOWDOWNS: Final = {
    "loss": (
        "\n#: Recompute the diagnostic each step (it was left on after debugging the dashboard).\n"
        "DIAGNOSTIC_REPEATS = {count}\n",
        "", "        with torch.no_grad():\n            for _ in range(DIAGNOSTIC_REPEATS):\n"
        "                probe_diagnostic()\n",
    ),
    "collate": (
        "\n#: Re-check the token table for every batch (a validation loop left on).\nVOCAB_CHECKS = {count}\n",
        "        for _ in range(VOCAB_CHECKS):\n            vocab_check()\n", "",
    ),
}  # fmt: skip


def canary(*args: str) -> list[str]:
    return [sys.executable, "-m", "canary_action", *args]


@contextmanager
def hog(on: bool) -> Iterator[None]:
    """One bursty CPU hog for the duration (when `on`)."""
    process = subprocess.Popen([sys.executable, "-c", HOG]) if on else None
    try:
        yield
    finally:
        if process is not None:
            process.kill()
            process.wait()


def matmul_s() -> float:
    """One 256x256 float32 product on one thread, as fault_injection.extra_matmuls_per_step does it."""
    from canary_action.train.instrument import PlantedWork

    return statistics.median(PlantedWork.timings_s(rounds=5))


def unit_s(
    tree: Path, name: str, rounds: int = 5, per_round: int = 200, module: str = "team_pipeline/trainer.py"
) -> float:
    """Seconds per call of the team module's `name` (probe_diagnostic, vocab_check), on one thread as the canary
    trains: the median of `rounds` rounds after a warm-up."""
    import torch

    torch.set_num_threads(1)
    spec = importlib.util.spec_from_file_location("team_trainer", tree / module)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    work: Callable[[], object] = getattr(module, name)
    for _ in range(per_round):
        work()
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(per_round):
            work()
        times.append((time.perf_counter() - start) / per_round)
    return statistics.median(times)


def run_pair(
    base: Path, head: Path, out: Path, ablation: Sequence[str] = (), options: Sequence[str] = ()
) -> tuple[Path, float]:
    """One `canary pair` with its defaults but `options`; `ablation` turns off what makes the sides comparable:
    "pin" (both sides may use every CPU, as the scheduler likes), "malloc" (glibc as it is)."""
    out.mkdir(parents=True, exist_ok=True)
    before = set(out.iterdir())
    extra = ["--cpus", ",".join(map(str, sorted(os.sched_getaffinity(0))))] if "pin" in ablation else []
    env = {**os.environ, **({"CANARY_PAIR_MALLOC": "default"} if "malloc" in ablation else {})}
    start = time.perf_counter()
    done = subprocess.run(
        canary("pair", str(CONFIG), "--base", str(base), "--head", str(head), "-o", str(out), "--json", *extra,
                *options),
        capture_output=True, text=True, check=False, cwd=REPO, env=env,
    )  # fmt: skip
    wall = time.perf_counter() - start
    if done.returncode not in (0, 1):
        raise RuntimeError(f"canary pair failed ({done.returncode}): {done.stderr[-2000:]}")
    (new,) = set(out.iterdir()) - before
    return new, wall


def run_single(tree: Path, out: Path) -> float:
    """One `canary run` of the tree's canary, in the tree (where the team's package imports from)."""
    start = time.perf_counter()
    subprocess.run(canary("run", str(CONFIG), "-o", str(out.resolve())), check=True, capture_output=True, cwd=tree)
    return time.perf_counter() - start


def make_tree(root: Path, name: str, kind: str = "none", count: int = 0) -> Path:
    """A team's repository: the canary config and team_pipeline/, its trainer slowed by `kind` x `count`."""
    tree = root / name
    (tree / "team_pipeline").mkdir(parents=True, exist_ok=True)
    (tree / CONFIG).write_text(TEAM_CONFIG, encoding="utf-8")
    (tree / "team_pipeline" / "__init__.py").write_text("", encoding="utf-8")
    constants, collate_work, loss_work = ("", "", "")
    if kind in SLOWDOWNS:
        constants, collate_work, loss_work = SLOWDOWNS[kind]
        constants = constants.format(count=count)
    text = TEAM_TRAINER.format(constants=constants, collate_work=collate_work, loss_work=loss_work)
    (tree / "team_pipeline" / "trainer.py").write_text(text, encoding="utf-8")
    return tree


def parse_plan(plan: str, load: str, labels: Collection[str] = LABELS) -> list[tuple[str, str]]:
    jobs = []
    for item in filter(None, plan.split(",")):
        label, _, count = item.partition(":")
        if label != "single" and label not in labels:
            raise SystemExit(f"unknown label {label!r} in the plan")
        jobs += [(label, load)] * int(count)
    return jobs


def collect(
    out: Path, *, quiet_plan: str, hog_plan: str, seed: int, ablation: Sequence[str] = (), canary: str = "team-sft",
    steps: int | None = None, size_in_situ: bool = False,
) -> None:  # fmt: skip
    out.mkdir(parents=True, exist_ok=True)
    trees = out / "trees"
    family = canaries.FAMILIES.get(canary)
    if steps is not None or size_in_situ:
        if family is None:
            raise SystemExit(f"--steps and --size-in-situ are for the families of benchmarks/canaries.py, not {canary}")
        family = family.with_steps(steps) if steps is not None else family
    base = make_tree(trees, "base") if family is None else family.make_tree(trees, "base")
    calibration, _ = run_pair(base, base, out / "calibration", ablation)
    step_s = json.loads((calibration / "base" / "metrics.json").read_text())["summary"]["step_time_s"]["median"]
    heads: dict[str, tuple[Path, str]] = {"aa": (base, "")}
    if family is None:
        units = {"loss": unit_s(base, "probe_diagnostic"), "collate": unit_s(base, "vocab_check")}
        for label, (kind, size) in LABELS.items():
            if kind in units:
                count = round(size * step_s / units[kind])
                what = "diagnostics in compute_loss" if kind == "loss" else "vocabulary checks in the collator"
                heads[label] = (make_tree(trees, label, kind, count), f"{count} {what}")
        labels: Collection[str] = LABELS
    else:
        module, function = family.unit
        units = {function: unit_s(base, function, module=module)}
        scale, sizing = 1.0, {}
        if size_in_situ:
            sizing = size_planted(out, base, family, round(SIZING_PCT / 100 * step_s / units[function]), ablation)
            scale = sizing["scale"]
        for label, size in canaries.LABELS.items():
            if size:
                count = round(size * step_s / units[function] * scale)
                heads[label] = (family.make_tree(trees, label, count), f"{count} {family.planted}")
        labels = canaries.LABELS
    calibrated = {
        "canary": canary, "step_s": step_s, "units_s": units, "steps": family.steps if family else 100,
        "heads": {k: v[1] for k, v in heads.items()}, "ablation": list(ablation),
        **({"sizing": sizing} if size_in_situ else {}),
    }  # fmt: skip
    (out / "calibration.json").write_text(json.dumps(calibrated, indent=2), encoding="utf-8")
    jobs = parse_plan(quiet_plan, "quiet", labels) + parse_plan(hog_plan, "hog", labels)
    random.Random(seed).shuffle(jobs)
    with (out / MANIFEST).open("a", encoding="utf-8") as manifest:
        for number, (label, load) in enumerate(jobs, 1):
            started = time.strftime("%H:%M:%S")
            with hog(load == "hog"):
                if label == "single":
                    wall = run_single(base, out / "singles")
                    row: dict[str, Any] = {"label": label, "load": load, "wall_s": wall}
                else:
                    head, planted = heads[label]
                    pair, wall = run_pair(base, head, out / "pairs", ablation)
                    row = {"label": label, "load": load, "pair": str(pair.relative_to(out)), "wall_s": wall,
                           "planted": planted}  # fmt: skip
            row["started"] = started
            manifest.write(json.dumps(row) + "\n")
            manifest.flush()
            print(f"[{number}/{len(jobs)}] {label} {load} {wall:.0f} s", file=sys.stderr, flush=True)


def size_planted(out: Path, base: Path, family: canaries.Family, count: int, ablation: Sequence[str]) -> dict[str, Any]:
    """The planted heads' scale, measured in situ: one pair of the base tree against a head with `count` units
    (SIZING_PCT % by the unit's own time on a quiet thread), unconfirmed; the scale makes that head measure
    SIZING_PCT % as the gate times it. A unit run inside training can take longer than alone (caches shared with
    the step), so sizes from its time alone run large; the scale is held to [0.5, 2], one pair's noise."""
    probe = family.make_tree(out / "trees", "sizing", count)
    pair, _ = run_pair(base, probe, out / "sizing", ablation, options=("--confirm-minutes", "0"))
    measured = pair_effects(pair)[GATE].delta_pct
    scale = min(2.0, max(0.5, SIZING_PCT / measured)) if measured > 0 else 2.0
    return {"pair": str(pair.relative_to(out)), "count": count, "nominal_pct": SIZING_PCT,
            "measured_pct": round(measured, 2), "scale": round(scale, 3)}  # fmt: skip


def cmd_collect(args: argparse.Namespace) -> None:
    collect(args.output, quiet_plan=args.quiet_plan, hog_plan=args.hog_plan, seed=args.seed, ablation=args.ablate,
            canary=args.canary, steps=args.steps, size_in_situ=args.size_in_situ)  # fmt: skip


@dataclass(frozen=True)
class Judged:
    label: str
    load: str
    pair: str
    wall_s: float
    effect_pct: float
    """The paired step-time effect (head against base), as the gate reports it."""
    sd_log: float
    """Its SD with the shipped process-level spread; within_log without it."""
    within_log: float
    paired_verdict: str
    paired_step: str
    old_verdict: str
    old_step: str
    old_limit_pct: float | None = None
    """The step-time limit the separate-runs judgement applied (the threshold widened to its noise)."""
    round_sd: tuple[float, float] = (0.0, 0.0)
    """The rounds' log ratios: (sample SD, robust SD = 1.4826 x MAD)."""
    paired_limit_pct: float | None = None
    """The limit the paired judgement applied (the minimum effect, raised to the pair's noise)."""
    first_suspect: str | None = None
    """The category ranked first when the pair was flagged (code, dataloader, kernel...)."""


def thresholds_file(directory: Path) -> Path:
    """The default tier with a 5 % step-time limit: how the 2026-11-24 collection was judged (before the paired
    rule, when a pair took the tier's limit)."""
    path = directory / "thresholds.yaml"
    path.write_text("base_tier: default\nmax_step_time_increase_pct: 5\n", encoding="utf-8")
    return path


def judge_all(data: Path, rows: Sequence[dict[str, Any]], limits: Path | None = None) -> list[Judged]:
    """Every pair of `rows` judged paired and as separate runs, with the defaults or the thresholds in `limits`."""
    from canary_action.compare import paired, window
    from canary_action.compare.baselines import load_current
    from canary_action.compare.command import run_compare
    from canary_action.config.thresholds import TIERS

    pairs = [r for r in rows if r["label"] != "single"]
    judged = []
    for index, row in enumerate(pairs):
        pair = data / row["pair"]
        result = run_compare(pair, [], threshold_file=limits)
        step = next(c for c in result.checks if c.name == "step_time")
        head, base = load_current(pair / "head" / "metrics.json"), load_current(pair / "base" / "metrics.json")
        cut = window.common_warmup([head, base], TIERS["default"].min_step_count)
        head, base = window.apply([head, base], cut)
        figure = paired.running_time(head, base).step_time  # what the gate judges: wall time less the wait for a CPU
        effect = paired.paired_effect(head, base, figure)
        assert effect is not None, row
        ratios = [
            math.log(h) - math.log(b)
            for mine, theirs in paired.common_rounds(head, base)
            if (h := figure(head, mine)) and (b := figure(base, theirs))
        ]
        centre = statistics.median(ratios)
        spread = (statistics.stdev(ratios), 1.4826 * statistics.median(abs(r - centre) for r in ratios))
        within = math.sqrt(max(effect.sd_log**2 - paired.process_sd(head) ** 2, 0.0))
        # The old way: the same head run against the base sides of three other pairs of this load, nearest first.
        others = sorted(
            (p for j, p in enumerate(pairs) if j != index and p["load"] == row["load"]),
            key=lambda p: abs(pairs.index(p) - index),
        )[:3]
        if others:
            separate = [data / p["pair"] / "base" / "metrics.json" for p in others]
            old = run_compare(pair / "head" / "metrics.json", separate, threshold_file=limits)
            old_check = next(c for c in old.checks if c.name == "step_time")
            old_verdict: str = old.verdict
            old_step: str = old_check.status
            old_limit = old_check.threshold
        else:
            old_verdict = old_step = "none"  # no other pair of this load to stand in for a separate baseline
            old_limit = None
        judged.append(Judged(
            label=row["label"], load=row["load"], pair=row["pair"], wall_s=row["wall_s"],
            effect_pct=effect.delta_pct, sd_log=effect.sd_log, within_log=within, paired_verdict=result.verdict,
            paired_step=step.status, old_verdict=old_verdict, old_step=old_step, old_limit_pct=old_limit,
            round_sd=spread, paired_limit_pct=step.threshold,
            first_suspect=result.suspects[0].category if result.suspects else None,
        ))  # fmt: skip
    return judged


def process_spread(aa: Sequence[Judged]) -> float:
    """Method of moments over A/A pairs: the SD of their effects beyond what each pair's rounds explain."""
    excess = statistics.fmean(math.log1p(j.effect_pct / 100) ** 2 - j.within_log**2 for j in aa)
    return math.sqrt(max(excess, 0.0))


def expected_false_alarms(aa: Sequence[Judged], fitted: float, limit_pct: float = 3.0, k: float = 3.0) -> float:
    """The A/A rate the data imply: for each A/A pair, the chance that a null effect — spread by its rounds'
    error and the *fitted* process-level spread, not the shipped one — passes the limit the gate applies (the
    minimum effect, raised to k x the gate's SD, and clear of zero). Normal tails (the rounds give ~25+ dof)."""
    rates = []
    for j in aa:
        true_sd = math.hypot(j.within_log, fitted)
        limit = max(math.log1p(limit_pct / 100), k * j.sd_log, 1.96 * j.sd_log)
        rates.append(0.5 * math.erfc(limit / true_sd / math.sqrt(2)))
    return statistics.fmean(rates)


def expected_detection(group: Sequence[Judged], true_pct: float, fitted: float) -> float:
    """The detection rate the data imply for a true effect of `true_pct`: per pair, the chance that the effect,
    spread as an A/A pair's is, lands above the limit that pair applied."""
    rates = []
    for j in group:
        true_sd = math.hypot(j.within_log, fitted)
        limit = math.log1p((j.paired_limit_pct or 3.0) / 100)
        rates.append(0.5 * math.erfc((limit - math.log1p(true_pct / 100)) / true_sd / math.sqrt(2)))
    return statistics.fmean(rates)


def render(judged: Sequence[Judged], rows: Sequence[dict[str, Any]], calibration: dict[str, Any], when: str,
           rule: str = "the defaults (no threshold file): the paired rule, a 3 % minimum effect") -> str:  # fmt: skip
    from canary_action.compare import paired

    aa = [j for j in judged if j.label == "aa"]
    fitted = process_spread(aa)
    z = [math.log1p(j.effect_pct / 100) / j.sd_log for j in aa]
    step_ms = 1000 * calibration["step_s"]
    units = calibration.get("units_s") or {"products": calibration.get("matmul_s", 0.0)}
    unit_text = ", ".join(f"one {k} unit {1000 * v:.3f} ms" for k, v in units.items())
    lines = [
        f"Collected {when} on this 2-core shared VM (`lscpu`: AMD EPYC, 2 vCPUs), one thread per side, "
        f"{calibration['steps']} steps per side in 2-step turns; quiet step {step_ms:.0f} ms; {unit_text}. "
        '"Quiet" means no load added by the benchmark (the machine\'s own neighbours, and other work of this '
        'session, ran as they did); "hog" adds one bursty CPU hog (busy 0.5-3 s, idle 0.5-3 s). '
        f"Judged with {rule}.",
        "",
        "| load | pair | n | planted | measured effect (mean) | paired: step_time failed | separate runs: failed |",
        "|---|---|---|---|---|---|---|",
    ]
    labels = list(calibration["heads"])
    for load in ("quiet", "hog"):
        for label in labels:
            group = [j for j in judged if j.label == label and j.load == load]
            if not group:
                continue
            planted = calibration["heads"].get(label) or "—"
            if label == "aa":
                paired_rate = sum(j.paired_verdict == "regression" for j in group)
                old_rate = sum(j.old_verdict == "regression" for j in group)
                cells = (f"{paired_rate}/{len(group)} false alarms", f"{old_rate}/{len(group)} false alarms")
            else:
                cells = (
                    f"{sum(j.paired_step == 'fail' for j in group)}/{len(group)}",
                    f"{sum(j.old_step == 'fail' for j in group)}/{len(group)}",
                )
            effect = statistics.fmean(j.effect_pct for j in group)
            lines.append(f"| {load} | {label} | {len(group)} | {planted} | {effect:+.1f} % | {cells[0]} | {cells[1]} |")
    shipped = 100 * paired.PROCESS_SD["cpu"]
    expected = expected_false_alarms(aa, fitted)
    old_limits = [j.old_limit_pct for j in judged if j.old_limit_pct is not None]
    paired_limits = [j.paired_limit_pct for j in judged if j.paired_limit_pct is not None]
    detect5, detect10 = (expected_detection(judged, effect, fitted) for effect in (5, 10))
    lines += [
        "",
        f"A/A calibration over all {len(aa)} A/A pairs (quiet and hog): their effects "
        f"{', '.join(f'{j.effect_pct:+.1f}' for j in aa)} %; process-level spread fitted from them "
        f"{100 * fitted:.2f} % (shipped: {shipped:.1f} %, `compare/paired.py` PROCESS_SD); z = effect / its SD has "
        f"SD {statistics.stdev(z):.2f} (1 for a calibrated interval), largest |z| {max(abs(v) for v in z):.1f}; "
        f"the A/A false-alarm rate these spreads imply at the 3 % minimum effect: {100 * expected:.2g} % per pair. "
        f"The rounds' log ratios in an A/A pair have a median SD of {100 * _median_sd(aa, 0):.1f} % but a robust SD "
        f"of {100 * _median_sd(aa, 1):.1f} %: heavy tails (a garbage collection, a neighbour's burst in one side's "
        "chunk), hence the trimmed mean.",
        "",
        f"The paired limit (the minimum effect raised to 3 × the pair's noise) had a median of "
        f"{statistics.median(paired_limits):.1f} % (range {min(paired_limits):.1f}-{max(paired_limits):.1f} %). "
        f"The implied detection of a true +5 % at those limits and spreads: {100 * detect5:.0f} %; of +10 %: "
        f"{100 * detect10:.0f} %. "
        "Separate runs are judged as the artifact history is: the run-to-run spread of three baselines pooled with "
        f"the CPU prior (1.7 x the per-step spread); their step-time limit widened to a median of "
        f"{statistics.median(old_limits):.0f} % (from the tier's 10 %). (Those baselines ran with the pair's "
        "pinning and malloc tuning, which make separate runs look better than `canary run` would.)",
    ]
    firsts = [j.first_suspect for j in judged if j.label != "aa" and j.paired_step == "fail" and j.first_suspect]
    if firsts:
        counts = ", ".join(
            f"{name} {firsts.count(name)}" for name in sorted(set(firsts), key=firsts.count, reverse=True)
        )
        lines.append(f"First suspect of the {len(firsts)} caught slowdowns: {counts}.")
    singles = [r["wall_s"] for r in rows if r["label"] == "single" and r["load"] == "quiet"]
    quiet_pairs = [j.wall_s for j in judged if j.load == "quiet"]
    if singles and quiet_pairs:
        ratio = statistics.fmean(quiet_pairs) / statistics.fmean(singles)
        lines.append(
            f"Wall time, quiet: a pair {statistics.fmean(quiet_pairs):.0f} s (`canary pair`, both sides, compare "
            f"and report), one run {statistics.fmean(singles):.0f} s (`canary run`): {ratio:.2f}x."
        )
    return "\n".join(lines)


def _median_sd(judged: Sequence[Judged], which: int) -> float:
    return statistics.median(j.round_sd[which] for j in judged)


def cmd_rediff(args: argparse.Namespace) -> None:
    """Write each recorded pair's `code` again from its trees (a coordinator's diff that was wrong is replaced,
    and calibration.json says so)."""
    from canary_action.train.launch.tree_diff import diff_trees

    rows = [json.loads(line) for line in (args.data / MANIFEST).read_text(encoding="utf-8").splitlines() if line]
    for row in rows:
        if row["label"] == "single":
            continue
        record_path = args.data / row["pair"] / "pair.json"
        record = json.loads(record_path.read_text(encoding="utf-8"))
        head = args.data / "trees" / ("base" if row["label"] == "aa" else row["label"])
        code = diff_trees(args.data / "trees" / "base", head)
        record["code"] = code.model_dump(mode="json")
        record_path.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    calibration_path = args.data / "calibration.json"
    calibration = json.loads(calibration_path.read_text(encoding="utf-8"))
    calibration["code_rediffed"] = args.why
    calibration_path.write_text(json.dumps(calibration, indent=2), encoding="utf-8")


def cmd_replay(args: argparse.Namespace) -> None:
    rows = [json.loads(line) for line in (args.data / MANIFEST).read_text(encoding="utf-8").splitlines() if line]
    calibration = json.loads((args.data / "calibration.json").read_text(encoding="utf-8"))
    judged = judge_all(args.data, rows, args.threshold_file)
    rule = f"the thresholds in {args.threshold_file}" if args.threshold_file else None
    text = render(judged, rows, calibration, args.date, *([rule] if rule else []))
    print(text)
    if args.write_docs:
        write_docs(text, REPO / "docs" / "benchmarks.md", DOCS_BEGIN, DOCS_END)


FAMILIES_BEGIN: Final = "<!-- lockstep-families:begin -->"
FAMILIES_END: Final = "<!-- lockstep-families:end -->"
TIMINGS_BEGIN: Final = "<!-- lockstep-timings:begin -->"
TIMINGS_END: Final = "<!-- lockstep-timings:end -->"
#: One pair judged by timing: (label, load, nominal slowdown or None for A/A, basis -> (effect %, step_time status)).
TimedPair = tuple[str, str, float | None, dict[str, tuple[float, str]]]
#: The key of the timing the gate chose for a pair (paired.running_time): wall time where the head waits longer.
GATE: Final = "gate"


@dataclass(frozen=True)
class Collected:
    """One `collect` run: its calibration, manifest rows and judged pairs, with what each pair's record says."""

    data: Path
    calibration: dict[str, Any]
    rows: list[dict[str, Any]]
    judged: list[Judged]
    confirmed: dict[str, str]
    """pair -> "confirmation" (a second pair ran), "not confirmed: why", or "" (none was needed)."""
    slow_notes: dict[str, str]
    """pair -> its slow-process note, where the comparison wrote one."""


def load_collection(data: Path) -> Collected:
    from canary_action.compare.command import run_compare

    rows = [json.loads(line) for line in (data / MANIFEST).read_text(encoding="utf-8").splitlines() if line]
    calibration = json.loads((data / "calibration.json").read_text(encoding="utf-8"))
    judged = judge_all(data, rows)
    confirmed, slow = {}, {}
    for row in rows:
        if row["label"] == "single":
            continue
        record = json.loads((data / row["pair"] / "pair.json").read_text(encoding="utf-8"))
        confirmed[row["pair"]] = (
            "confirmation" if record.get("confirmation") else (f"not confirmed: {record['not_confirmed']}"
                                                               if record.get("not_confirmed") else "")
        )  # fmt: skip
        notes = run_compare(data / row["pair"], []).notes
        slow[row["pair"]] = next((n for n in notes if n.startswith("slow process: ")), "")
    return Collected(data, calibration, rows, judged, confirmed, slow)


def render_families(collections: Sequence[Collected]) -> str:
    """Per canary family: A/A false alarms with confirmation (and the first pairs that failed alone), planted
    slowdowns caught, the slow-process notes, the fitted process-level spread and the wall time against one run."""
    from canary_action.compare import paired

    lines = [
        "| canary | collection, started (UTC) | load | A/A pairs | false alarms | A/A first pairs failed (confirming "
        "pair run) | A/A slow-process notes | +5 % caught | +10 % caught |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    families: dict[str, list[Collected]] = {}
    for c in collections:
        name = f"{c.calibration.get('canary', 'team-sft')} ({c.calibration['steps']} steps)"
        families.setdefault(name, []).append(c)
    fits, walls, sizes = [], [], []
    for name, group in families.items():
        for c in group:
            starts = sorted(r["started"][:5] for r in c.rows)
            when = f"{starts[0]}-{starts[-1]}"
            for load in ("quiet", "hog"):
                judged = [j for j in c.judged if j.load == load]
                if not judged:
                    continue
                aa = [j for j in judged if j.label == "aa"]
                alarms = sum(j.paired_verdict == "regression" for j in aa)
                needed = sum(bool(c.confirmed[j.pair]) for j in aa)
                noted = sum(bool(c.slow_notes[j.pair]) for j in aa)
                caught = {
                    size: [j.paired_step == "fail" for j in judged if _nominal(c, j.label) == size]
                    for size in (0.05, 0.10)
                }
                cells = [f"{sum(v)}/{len(v)}" if v else "—" for v in caught.values()]
                lines.append(
                    f"| {name} | {c.data.name} {when} | {load} | {len(aa)} | {alarms} | {needed} | {noted} | "
                    f"{cells[0]} | {cells[1]} |"
                )
        aa_all = [j for c in group for j in c.judged if j.label == "aa"]
        if aa_all:
            few = "" if len(aa_all) >= MIN_FIT_PAIRS else ": too few to fit"
            fits.append(f"{name} {100 * process_spread(aa_all):.2f} % (over {len(aa_all)} A/A pairs{few})")
        fives = [j for c in group for j in c.judged if _nominal(c, j.label) == 0.05]
        if fives:
            how = "in situ" if all("sizing" in c.calibration for c in group) else "by the unit's own time"
            exact = expected_detection(fives, 5.0, paired.PROCESS_SD["cpu"])
            sizes.append(
                f"{name} {statistics.median(j.effect_pct for j in fives):+.1f} % (sized {how}; an exact +5 % would "
                f"fail these pairs' first pair {100 * exact:.0f} % of the time)"
            )
        singles = [r["wall_s"] for c in group for r in c.rows if r["label"] == "single"]
        pairs = [j.wall_s for c in group for j in c.judged if j.label == "aa"]
        if singles and pairs:
            pair_s, single_s = statistics.median(pairs), statistics.median(singles)
            walls.append(f"{name}: an A/A pair {pair_s:.0f} s, one run {single_s:.0f} s ({pair_s / single_s:.2f}x)")
    lines += ["", "Process-level spread fitted from the A/A pairs, per family: " + "; ".join(fits) + "."]
    if sizes:
        lines += ["", "The +5 % heads as measured (median first-pair effect), per family: " + "; ".join(sizes) + "."]
    if walls:
        lines += ["", "Wall time (medians; a pair includes both sides, compare and report): " + "; ".join(walls) + "."]
    return "\n".join(lines)


def _nominal(collection: Collected, label: str) -> float | None:
    if label in canaries.LABELS:
        return canaries.LABELS[label] or None
    return LABELS[label][1] if label in LABELS and LABELS[label][1] else None


def judge_timings(data: Path) -> list[TimedPair]:
    """Each pair of a collection as (label, load, nominal size, timing -> (paired effect %, step_time status)),
    judged on wall time, on wall time less the training thread's wait for a CPU, and on the one the gate chooses
    (GATE), by the paired rule with the defaults (a 3 % minimum effect raised to 3 x the pair's noise; no
    confirmation)."""
    from canary_action.compare.stats import judge_paired
    from canary_action.config.thresholds import TIERS

    rows = [json.loads(line) for line in (data / MANIFEST).read_text(encoding="utf-8").splitlines() if line]
    calibration = json.loads((data / "calibration.json").read_text(encoding="utf-8"))
    collection = Collected(data, calibration, rows, [], {}, {})
    tier = TIERS["default"]
    out = []
    for row in rows:
        if row["label"] == "single":
            continue
        judged = {}
        for key, effect in pair_effects(data / row["pair"]).items():
            decision = judge_paired(effect, tier.paired_min_effect_pct, tier.run_spread_k, worse="higher")
            judged[key] = (effect.delta_pct, decision.status)
        out.append((row["label"], row["load"], _nominal(collection, row["label"]), judged))
    return out


def pair_effects(pair: Path) -> dict[str, Effect]:
    """A recorded pair's paired step-time effect on wall time, on wall time less the wait for a CPU, and on the
    one the gate chooses (GATE), after the comparison's common warm-up cut."""
    from canary_action.compare import paired, window
    from canary_action.compare.baselines import load_current
    from canary_action.config.thresholds import TIERS

    head, base = load_current(pair / "head" / "metrics.json"), load_current(pair / "base" / "metrics.json")
    head, base = window.apply([head, base], window.common_warmup([head, base], TIERS["default"].min_step_count))
    chosen = paired.running_time(head, base)
    effects = {}
    for key, timing in ((paired.WALL.basis, paired.WALL), (paired.RUNNING.basis, paired.RUNNING), (GATE, chosen)):
        effect = paired.paired_effect(head, base, timing.step_time)
        assert effect is not None, pair
        effects[key] = effect
    return effects


def render_timings(collections: Sequence[tuple[str, list[TimedPair]]]) -> str:
    """Per canary family and load: the A/A effects' spread, false alarms and planted slowdowns caught, on wall
    time and on wall time less the wait for a CPU."""
    from canary_action.compare import paired

    bases = (paired.WALL.basis, paired.RUNNING.basis, GATE)
    lines = [
        "| canary | load | A/A pairs | A/A effects' SD: wall / less wait / gate | A/A failed: wall / less wait / gate "
        "| +5 % caught: wall / less wait / gate | +10 % caught: wall / less wait / gate |",
        "|---|---|---|---|---|---|---|",
    ]
    families: dict[str, list[TimedPair]] = {}
    for family, judged in collections:
        families.setdefault(family, []).extend(judged)
    for family, judged in families.items():
        for load in ("quiet", "hog"):
            rows = [j for j in judged if j[1] == load]
            aa = [j[3] for j in rows if j[2] is None]
            sds = [statistics.stdev(j[b][0] for j in aa) if len(aa) > 1 else math.nan for b in bases]
            failed = [sum(j[b][1] == "fail" for j in aa) for b in bases]
            cells = []
            for size in (0.05, 0.10):
                planted = [j[3] for j in rows if j[2] == size]
                counts = [f"{sum(j[b][1] == 'fail' for j in planted)}/{len(planted)}" for b in bases]
                cells.append(" / ".join(counts) if planted else "—")
            spread, alarms = " / ".join(f"{sd:.1f} %" for sd in sds), " / ".join(map(str, failed))
            lines.append(f"| {family} | {load} | {len(aa)} | {spread} | {alarms} | {cells[0]} | {cells[1]} |")
    return "\n".join(lines)


def cmd_timings(args: argparse.Namespace) -> None:
    collections = []
    for data in args.data:
        calibration = json.loads((data / "calibration.json").read_text(encoding="utf-8"))
        collections.append((calibration.get("canary", "team-sft"), judge_timings(data)))
    text = render_timings(collections)
    print(text)
    if args.write_docs:
        write_docs(text, REPO / "docs" / "benchmarks.md", TIMINGS_BEGIN, TIMINGS_END)


def cmd_families(args: argparse.Namespace) -> None:
    text = render_families([load_collection(d) for d in args.data])
    print(text)
    if args.write_docs:
        write_docs(text, REPO / "docs" / "benchmarks.md", FAMILIES_BEGIN, FAMILIES_END)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python benchmarks/lockstep.py", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(required=True)
    p = sub.add_parser("collect", help="real pairs (A/A and team-code slowdowns), interleaved, quiet and beside a hog")
    p.add_argument("-o", "--output", type=Path, required=True)
    p.add_argument("--quiet-plan", default=QUIET_PLAN, help=f"label:count,... on a quiet machine ({QUIET_PLAN})")
    p.add_argument("--hog-plan", default=HOG_PLAN, help=f"label:count,... beside the bursty hog ({HOG_PLAN})")
    p.add_argument("--seed", type=int, default=0, help="seed of the job order")
    p.add_argument("--canary", choices=["team-sft", *canaries.FAMILIES], default="team-sft",
                   help="the canary family (benchmarks/canaries.py); team-sft: the team trainer here")  # fmt: skip
    p.add_argument("--steps", type=int, help="train the family's canary this many steps (its own length otherwise)")
    p.add_argument(
        "--size-in-situ",
        action="store_true",
        help="scale the planted heads by one pair's measured effect of a 10 %% head (size_planted)",
    )
    p.add_argument("--ablate", nargs="*", choices=["pin", "malloc"], default=[],
                   help="turn off pinning both sides to one CPU set, or the malloc tuning (to measure)")  # fmt: skip
    p.set_defaults(func=cmd_collect)
    p = sub.add_parser("rediff", help="write each recorded pair's code diff again from its trees")
    p.add_argument("data", type=Path)
    p.add_argument("--why", required=True, help="what was wrong with the recorded diffs (kept in calibration.json)")
    p.set_defaults(func=cmd_rediff)
    p = sub.add_parser("replay", help="judge the collected pairs, paired and as separate runs; the docs table")
    p.add_argument("data", type=Path)
    p.add_argument("--date", default="2026-11-26")
    p.add_argument("--threshold-file", type=Path, help="judge with these thresholds instead of the defaults")
    p.add_argument("--write-docs", action="store_true", help="replace the lockstep section of docs/benchmarks.md")
    p.set_defaults(func=cmd_replay)
    p = sub.add_parser("timings", help="the pairs of several collections judged on wall time and less the CPU wait")
    p.add_argument("data", type=Path, nargs="+")
    p.add_argument("--write-docs", action="store_true", help="replace the timings section of docs/benchmarks.md")
    p.set_defaults(func=cmd_timings)
    p = sub.add_parser("families", help="A/A and planted pairs of several collections, per canary family")
    p.add_argument("data", type=Path, nargs="+")
    p.add_argument("--write-docs", action="store_true", help="replace the families section of docs/benchmarks.md")
    p.set_defaults(func=cmd_families)
    args = parser.parse_args(argv)
    args.func(args)


if __name__ == "__main__":
    main()
