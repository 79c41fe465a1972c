"""Lockstep A/B on real runs: pairs of the tiny DPO canary, plain (A/A) and with a planted slowdown on the head
side, on a quiet machine and beside a bursty CPU hog, judged paired and the old way (separate runs).

    python benchmarks/lockstep.py collect -o benchmarks/data/lockstep-2026-11-24
    python benchmarks/lockstep.py replay benchmarks/data/lockstep-2026-11-24 --write-docs

`collect` first calibrates: the median step time of one quiet A/A pair and the time of one 256x256 matrix
product here, so that a planted slowdown of X % is X % x step / product extra products per step
(`fault_injection.extra_matmuls_per_step`: compute, like a real regression) or, for the sleep comparison, a
sleep of X % x step (`sleep_s_per_step`). It then runs every job of the plan — (label, load) repeated — in one
random order, so that drift over the hour hits every label alike. Each pair is `canary pair` as a user runs it
(two trees: the base tree holds configs/tiny/dpo.yaml; a head tree holds the same file with the planted fault;
A/A pairs give the base tree for both sides), timed from the command's start to its end; `single` jobs time one
`canary run` of the same config for the wall-time ratio. Under load "hog", one bursty CPU hog runs beside the
pair: busy for 0.5-3 s, idle for 0.5-3 s, at random. A manifest (manifest.jsonl) lists every job.

`replay` judges each pair with the real comparison (`run_compare`, what `canary compare PAIR_DIR` runs) with the
default tier and a 5 % step-time limit, and the same head runs the old way: against the base sides of three
other pairs of the same load (separate runs). A false alarm is a `regression` verdict on an A/A pair; a
detection is step_time failed.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final

REPO: Final = Path(__file__).resolve().parent.parent
CONFIG: Final = Path("configs/tiny/dpo.yaml")
MANIFEST: Final = "manifest.jsonl"
DOCS_BEGIN: Final = "<!-- lockstep:begin -->"
DOCS_END: Final = "<!-- lockstep:end -->"
#: label -> (kind of planted slowdown, nominal size)
LABELS: Final = {
    "aa": ("none", 0.0), "busy5": ("busy", 0.05), "busy10": ("busy", 0.10), "busy20": ("busy", 0.20),
    "sleep10": ("sleep", 0.10),
}  # fmt: skip
QUIET_PLAN: Final = "aa:10,busy5:6,busy10:6,busy20:4,sleep10:3,single:3"
HOG_PLAN: Final = "aa:8,busy5:4,busy10:4,busy20:6"
HOG: Final = """
import random, time
rng = random.Random(0)
while True:
    end = time.monotonic() + rng.uniform(0.5, 3.0)
    while time.monotonic() < end:
        pass
    time.sleep(rng.uniform(0.5, 3.0))
"""


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
    import torch

    torch.set_num_threads(1)
    a, b = torch.randn(256, 256), torch.randn(256, 256)
    for _ in range(50):
        torch.mm(a, b)
    times = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(200):
            torch.mm(a, b)
        times.append((time.perf_counter() - start) / 200)
    return statistics.median(times)


def run_pair(base: Path, head: Path, out: Path, steps: int) -> tuple[Path, float]:
    out.mkdir(parents=True, exist_ok=True)
    before = set(out.iterdir())
    start = time.perf_counter()
    done = subprocess.run(
        canary("pair", str(CONFIG), "--base", str(base), "--head", str(head), "-o", str(out),
               "--set", f"max_steps={steps}", "--json"),
        capture_output=True, text=True, check=False, cwd=REPO,
    )  # fmt: skip
    wall = time.perf_counter() - start
    if done.returncode not in (0, 1):
        raise RuntimeError(f"canary pair failed ({done.returncode}): {done.stderr[-2000:]}")
    (new,) = set(out.iterdir()) - before
    return new, wall


def run_single(out: Path, steps: int) -> float:
    start = time.perf_counter()
    subprocess.run(
        canary("run", str(CONFIG), "-o", str(out), "--set", f"max_steps={steps}"),
        check=True, capture_output=True, cwd=REPO,
    )  # fmt: skip
    return time.perf_counter() - start


def make_tree(root: Path, name: str, fault: str | None) -> Path:
    tree = root / name
    (tree / CONFIG.parent).mkdir(parents=True, exist_ok=True)
    text = (REPO / CONFIG).read_text(encoding="utf-8")
    if fault:
        text += f"fault_injection:\n  {fault}\n"
    (tree / CONFIG).write_text(text, encoding="utf-8")
    return tree


def parse_plan(plan: str, load: str) -> list[tuple[str, str]]:
    jobs = []
    for item in plan.split(","):
        label, _, count = item.partition(":")
        if label != "single" and label not in LABELS:
            raise SystemExit(f"unknown label {label!r} in the plan")
        jobs += [(label, load)] * int(count)
    return jobs


def collect(out: Path, *, quiet_plan: str, hog_plan: str, steps: int, seed: int) -> None:
    out.mkdir(parents=True, exist_ok=True)
    trees = out / "trees"
    base = make_tree(trees, "base", None)
    calibration, _ = run_pair(base, base, out / "calibration", steps)
    step_s = json.loads((calibration / "base" / "metrics.json").read_text())["summary"]["step_time_s"]["median"]
    product_s = matmul_s()
    heads: dict[str, tuple[Path, str]] = {"aa": (base, "")}
    for label, (kind, size) in LABELS.items():
        if kind == "busy":
            count = round(size * step_s / product_s)
            heads[label] = (make_tree(trees, label, f"extra_matmuls_per_step: {count}"), f"{count} products")
        elif kind == "sleep":
            sleep = size * step_s
            heads[label] = (make_tree(trees, label, f"sleep_s_per_step: {sleep:.4f}"), f"{sleep * 1000:.1f} ms sleep")
    planted = {k: v[1] for k, v in heads.items()}
    calibrated = {"step_s": step_s, "matmul_s": product_s, "steps": steps, "heads": planted}
    (out / "calibration.json").write_text(json.dumps(calibrated, indent=2), encoding="utf-8")
    jobs = parse_plan(quiet_plan, "quiet") + parse_plan(hog_plan, "hog")
    random.Random(seed).shuffle(jobs)
    with (out / MANIFEST).open("a", encoding="utf-8") as manifest:
        for number, (label, load) in enumerate(jobs, 1):
            started = time.strftime("%H:%M:%S")
            with hog(load == "hog"):
                if label == "single":
                    wall = run_single(out / "singles", steps)
                    row: dict[str, Any] = {"label": label, "load": load, "wall_s": wall}
                else:
                    head, planted = heads[label]
                    pair, wall = run_pair(base, head, out / "pairs", steps)
                    row = {"label": label, "load": load, "pair": str(pair.relative_to(out)), "wall_s": wall,
                           "planted": planted}  # fmt: skip
            row["started"] = started
            manifest.write(json.dumps(row) + "\n")
            manifest.flush()
            print(f"[{number}/{len(jobs)}] {label} {load} {wall:.0f} s", file=sys.stderr, flush=True)


def cmd_collect(args: argparse.Namespace) -> None:
    collect(args.output, quiet_plan=args.quiet_plan, hog_plan=args.hog_plan, steps=args.steps, seed=args.seed)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python benchmarks/lockstep.py", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(required=True)
    p = sub.add_parser("collect", help="real pairs (A/A and planted), interleaved, quiet and beside a bursty hog")
    p.add_argument("-o", "--output", type=Path, required=True)
    p.add_argument("--quiet-plan", default=QUIET_PLAN, help=f"label:count,... on a quiet machine ({QUIET_PLAN})")
    p.add_argument("--hog-plan", default=HOG_PLAN, help=f"label:count,... beside the bursty hog ({HOG_PLAN})")
    p.add_argument("--steps", type=int, default=100, help="max_steps of every run")
    p.add_argument("--seed", type=int, default=0, help="seed of the job order")
    p.set_defaults(func=cmd_collect)
    args = parser.parse_args(argv)
    args.func(args)


if __name__ == "__main__":
    main()
