"""Real runs for the detection benchmark: collected interleaved under varying load, replayed through `compare`.

    python benchmarks/detection.py collect-real --rounds 8 --steps 120 -o benchmarks/data/real-runs
    python benchmarks/detection.py replay benchmarks/data/real-runs --sets 30 --seed 0 [--write-docs]

`collect-real` runs the tiny DPO canary in rounds. Each round runs every label once (plain twice, then the
planted slowdowns), in a random order, while 0, 1 or 2 CPU-bound busy loops run beside it (the round number
picks how many), so that every label sees the same drift and the same load mix. A planted slowdown is
`fault_injection.sleep_s_per_step` = effect x the median step time of a quiet calibration run: a fixed sleep, so
under load (longer steps) its relative size shrinks; `replay` reports the effect each label really had (its
median against the plain runs of the same rounds). A manifest (manifest.jsonl) lists every run.

`replay` judges the collected runs with the real comparison (`canary_action.compare.command.run_compare`,
exactly what `canary compare` calls): A/A — every plain run as the current run against random sets of n other
plain runs — and detection — every planted run against random sets of n plain runs — for each tier and n.
A false alarm is a `regression` verdict on an A/A pair; a detection is a `regression` verdict with step_time
failed.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import shutil
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from canary_action.compare import stats
from canary_action.compare.baselines import load_current
from canary_action.compare.command import run_compare
from canary_action.compare.runs import RunData
from canary_action.config.thresholds import Tier

REPO: Final = Path(__file__).resolve().parent.parent
MANIFEST: Final = "manifest.jsonl"
LABELS: Final = {"plain": 0.0, "plain2": 0.0, "slow10": 0.10, "slow20": 0.20, "slow50": 0.50}
REPLAY_TIERS: Final[tuple[Tier, ...]] = ("default", "smoke", "perf", "nightly")
REPLAY_BASELINES: Final = (1, 3, 5)
DOCS_BEGIN: Final = "<!-- real-runs:begin -->"
DOCS_END: Final = "<!-- real-runs:end -->"


@contextmanager
def busy_loops(count: int) -> Iterator[None]:
    """`count` CPU-bound processes for the duration (the load a shared runner has from its neighbours)."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    try:
        yield
    finally:
        for p in procs:
            p.kill()
            p.wait()


def canary_run(config: Path, out: Path, steps: int | None, sleep_s: float, *overrides: str) -> Path:
    """One `canary run` as a user starts it (max_steps: the config's when None); the path of its metrics.json."""
    exe = shutil.which("canary") or str(Path(sys.executable).with_name("canary"))
    out.mkdir(parents=True, exist_ok=True)
    before = set(out.iterdir())
    cmd = [exe, "run", str(config), "-o", str(out)]
    for override in [*([f"max_steps={steps}"] if steps else []), *overrides]:
        cmd += ["--set", override]
    if sleep_s:
        cmd += ["--set", f"fault_injection.sleep_s_per_step={sleep_s:.6f}"]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=REPO)
    (new,) = set(out.iterdir()) - before
    return new / "metrics.json"


def collect(
    config: Path, out: Path, *, rounds: int, steps: int, seed: int, loads: Sequence[int], labels: Sequence[str] = ()
) -> None:
    """Every round runs each of `labels` (default: every label) once, in a random order."""
    rng = random.Random(seed)
    out.mkdir(parents=True, exist_ok=True)
    calibration = canary_run(config, out / "calibration", steps, 0.0)
    quiet = load_current(calibration).step_time_median
    assert quiet is not None
    print(f"calibration: median step {quiet:.4f} s", file=sys.stderr, flush=True)
    with (out / MANIFEST).open("a", encoding="utf-8") as manifest:
        for r in range(rounds):
            order = list(labels or LABELS)
            rng.shuffle(order)
            load = loads[r % len(loads)]
            with busy_loops(load):
                for position, label in enumerate(order):
                    sleep_s = LABELS[label] * quiet
                    started = time.time()
                    path = canary_run(config, out / label, steps, sleep_s)
                    row = {
                        "round": r, "position": position, "label": label, "effect": LABELS[label],
                        "sleep_s": sleep_s, "busy_loops": load, "path": str(path.relative_to(out)),
                        "wall_s": round(time.time() - started, 1),
                    }  # fmt: skip
                    manifest.write(json.dumps(row) + "\n")
                    manifest.flush()
                    print(json.dumps(row), file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Collected:
    row: dict[str, Any]
    path: Path
    run: RunData

    @property
    def plain(self) -> bool:
        return self.row["effect"] == 0.0


def read_collected(directory: Path) -> list[Collected]:
    rows = [json.loads(line) for line in (directory / MANIFEST).read_text(encoding="utf-8").splitlines() if line]
    return [Collected(row, directory / row["path"], load_current(directory / row["path"])) for row in rows]


@dataclass
class Cell:
    tier: Tier
    n: int
    label: str
    trials: int = 0
    alarms: int = 0
    step_time_fails: int = 0
    neutral: int = 0
    heldout_judged: int = 0
    """Comparisons in which heldout_eval was judged (passed or failed): runs and baselines that evaluated the same
    held-out examples."""
    heldout_fails: int = 0
    warned: Counter[str] = field(default_factory=Counter)
    """Checks that warned, by name (an A/A warning is a milder false alarm: it is read)."""

    @property
    def rate(self) -> float:
        return self.alarms / self.trials if self.trials else 0.0


def replay(runs: Sequence[Collected], sets: int, seed: int) -> list[Cell]:
    rng = random.Random(seed)
    plain = [c for c in runs if c.plain]
    planted = sorted({c.row["label"] for c in runs if not c.plain}, key=lambda x: LABELS[x])
    groups = [("A/A", plain)] + [(label, [c for c in runs if c.row["label"] == label]) for label in planted]
    return [
        _cell(tier, n, label, currents, plain, sets=sets, rng=rng)
        for tier in REPLAY_TIERS
        for n in REPLAY_BASELINES
        if n < len(plain)  # an A/A current run leaves the others as its possible baselines
        for label, currents in groups
    ]


def _cell(
    tier: Tier, n: int, label: str, currents: Sequence[Collected], plain: Sequence[Collected], *, sets: int,
    rng: random.Random,
) -> Cell:  # fmt: skip
    cell = Cell(tier=tier, n=n, label=label)
    for current in currents:
        others = [p for p in plain if p is not current]
        for _ in range(sets):
            chosen = rng.sample(others, n)
            # Newest first, as the action hands them over.
            chosen.sort(key=lambda c: (c.row["round"], c.row["position"]), reverse=True)
            result = run_compare(current.path, [c.path for c in chosen], tier=tier)
            cell.trials += 1
            cell.alarms += result.verdict == "regression"
            cell.neutral += result.verdict == "neutral"
            cell.step_time_fails += any(ch.name == "step_time" and ch.status == "fail" for ch in result.checks)
            cell.warned.update(ch.name for ch in result.checks if ch.status == "warn")
            held = next((ch for ch in result.checks if ch.name == "heldout_eval"), None)
            cell.heldout_judged += held is not None and held.status in ("pass", "fail")
            cell.heldout_fails += held is not None and held.status == "fail"
    return cell


def measured_effects(runs: Sequence[Collected]) -> dict[str, float]:
    """Each label's real slowdown: the median, over rounds, of its run median over the round's plain runs'."""
    by_round: dict[int, list[Collected]] = {}
    for c in runs:
        by_round.setdefault(c.row["round"], []).append(c)
    ratios: dict[str, list[float]] = {}
    for members in by_round.values():
        plain = [m.run.step_time_median for m in members if m.plain and m.run.step_time_median]
        if not plain:
            continue
        base = statistics.fmean(plain)
        for m in members:
            if not m.plain and m.run.step_time_median:
                ratios.setdefault(m.row["label"], []).append(m.run.step_time_median / base - 1)
    return {label: statistics.median(values) for label, values in ratios.items()}


def render(cells: Sequence[Cell], runs: Sequence[Collected], args: argparse.Namespace) -> str:
    plain = [c for c in runs if c.plain]
    medians = [c.run.step_time_median for c in plain if c.run.step_time_median]
    effects = measured_effects(runs)
    loads = sorted({c.row["busy_loops"] for c in runs})
    labels = [lab for lab in LABELS if LABELS[lab] > 0 and any(c.row["label"] == lab for c in runs)]
    counts = {lab: sum(c.row["label"] == lab for c in runs) for lab in labels}
    heldout = any(c.heldout_judged for c in cells)
    head = ["tier", "baselines", "A/A false alarms (neutral)", "A/A warnings"]
    head += ["A/A heldout_eval failed (judged)"] if heldout else []
    head += [f"planted +{LABELS[lab]:.0%} (measured {effects.get(lab, float('nan')):+.0%})" for lab in labels]
    lines = [
        f"Recorded {args.date} on {args.machine}: {len(plain)} plain runs"
        + "".join(f", {counts[lab]} at +{LABELS[lab]:.0%}" for lab in labels)
        + f" of `{runs[0].run.config_name}` ({runs[0].run.num_steps} steps, cpu_threads "
        f"{runs[0].run.env.torch_threads}), collected interleaved in rounds with {loads} busy loops beside them; "
        f"plain run medians {min(medians):.3f}-{max(medians):.3f} s. Each cell: every current run against "
        f"{args.sets} random baseline sets (seed {args.seed}); a false alarm or a detection is a `regression` "
        "verdict of the real `compare`.",
        "",
        "```",
        f"python benchmarks/detection.py replay {args.runs_dir} --sets {args.sets} --seed {args.seed} --write-docs"
        + (f" --section {args.section}" if args.section != "real-runs" else ""),
        "```",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    for tier in REPLAY_TIERS:
        for n in REPLAY_BASELINES:
            row = {c.label: c for c in cells if c.tier == tier and c.n == n}
            aa = row["A/A"]
            parts = [tier, str(n), f"{100 * aa.rate:.1f} % of {aa.trials} ({100 * aa.neutral / aa.trials:.0f} %)"]
            warned = ", ".join(f"{name} {100 * k / aa.trials:.1f} %" for name, k in aa.warned.most_common(3))
            parts.append(warned or "none")
            if heldout:
                parts.append(f"{100 * aa.heldout_fails / max(aa.heldout_judged, 1):.1f} % ({aa.heldout_judged})")
            parts += [f"{100 * row[lab].rate:.0f} %" for lab in labels if lab in row]
            lines.append("| " + " | ".join(parts) + " |")
    worst = max((c for c in cells if c.label == "A/A"), key=lambda c: c.rate)
    lines += [
        "",
        f"Target A/A <= 1 % in every cell: {'met' if worst.rate <= 0.01 else 'NOT met'} "
        f"(highest: {worst.tier}, {worst.n} baselines, {100 * worst.rate:.2f} %).",
    ]
    if heldout:
        aa_cells = [c for c in cells if c.label == "A/A"]
        fails, judged = sum(c.heldout_fails for c in aa_cells), sum(c.heldout_judged for c in aa_cells)
        rate = 100 * fails / max(judged, 1)
        lines.append(f"heldout_eval on A/A comparisons: failed in {fails} of {judged} judged ({rate:.2f} %).")
    return "\n".join(lines)


def write_docs(section: str, path: Path, begin: str = DOCS_BEGIN, end: str = DOCS_END) -> None:
    """Replace what stands between the two markers in `path` with `section`."""
    text = path.read_text(encoding="utf-8")
    start, stop = text.index(begin) + len(begin), text.index(end)
    path.write_text(text[:start] + "\n" + section + "\n" + text[stop:], encoding="utf-8")


def cmd_collect(args: argparse.Namespace) -> None:
    collect(
        args.config, args.output, rounds=args.rounds, steps=args.steps, seed=args.seed, loads=args.loads,
        labels=args.labels,
    )  # fmt: skip


@contextmanager
def cpu_prior(ratio: float | None) -> Iterator[None]:
    """Exploration only: the gate's CPU prior ratio set to `ratio` for the duration."""
    shipped = stats.PRIOR_RATIO["cpu"]
    if ratio is not None:
        stats.PRIOR_RATIO["cpu"] = ratio
    try:
        yield
    finally:
        stats.PRIOR_RATIO["cpu"] = shipped


def fitted_ratio(runs: Sequence[Collected]) -> tuple[float, float, float]:
    """(between-run SD of the plain runs' log medians, their median per-step log SD, the ratio of the two)."""
    plain = [c.run for c in runs if c.plain]
    logs = [math.log(r.step_time_median) for r in plain if r.step_time_median]
    steps = [sd for r in plain if (sd := stats.per_step_log_sd(r.steady_step_times)) is not None]
    between, per_step = statistics.stdev(logs), statistics.median(steps)
    return between, per_step, between / per_step


def cmd_replay(args: argparse.Namespace) -> None:
    runs = read_collected(args.runs_dir)
    between, per_step, ratio = fitted_ratio(runs)
    print(f"plain runs: between-run SD {between:.3f}, per-step SD {per_step:.3f}, ratio {ratio:.2f}", file=sys.stderr)
    with cpu_prior(args.prior_ratio):
        cells = replay(runs, args.sets, args.seed)
        section = render(cells, runs, args)
    if args.prior_ratio is not None:
        section = f"EXPLORATION: PRIOR_RATIO cpu {args.prior_ratio} (not the shipped constant)\n\n{section}"
    print(section)
    if args.write_docs:
        if args.prior_ratio is not None:
            raise SystemExit("--write-docs records the shipped constants only; drop --prior-ratio")
        write_docs(section, args.docs, f"<!-- {args.section}:begin -->", f"<!-- {args.section}:end -->")


def add_commands(sub: Any, today: str, machine: str) -> None:
    p = sub.add_parser("collect-real", help="real runs, plain and planted, interleaved under varying load")
    p.add_argument("--rounds", type=int, default=8, help="rounds; each runs every label once, in a random order")
    p.add_argument("--steps", type=int, default=120, help="max_steps of each run (nightly needs 100 steady)")
    p.add_argument("--loads", type=int, nargs="+", default=[0, 1, 2], help="busy loops beside round r: loads[r % k]")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--config", type=Path, default=Path("configs/tiny/dpo.yaml"))
    p.add_argument("--labels", nargs="+", choices=list(LABELS), default=[], help="default: every label")
    p.add_argument("-o", "--output", type=Path, required=True)
    p.set_defaults(func=cmd_collect)

    p = sub.add_parser("replay", help="A/A and detection rates of the real compare on collected real runs")
    p.add_argument("runs_dir", type=Path)
    p.add_argument("--sets", type=int, default=30, help="random baseline sets per current run and cell")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--prior-ratio", type=float, default=None, help="exploration: the gate's CPU prior ratio")
    p.add_argument("--write-docs", action="store_true", help="replace the real-runs section in docs/benchmarks.md")
    p.add_argument("--docs", type=Path, default=REPO / "docs" / "benchmarks.md")
    p.add_argument("--section", default="real-runs", help="the docs section's markers: <!-- NAME:begin/end -->")
    p.add_argument("--date", default=today)
    p.add_argument("--machine", default=machine)
    p.set_defaults(func=cmd_replay)
