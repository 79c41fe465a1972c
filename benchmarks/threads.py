"""Which `cpu_threads` keeps a CPU canary fast and steady on a shared machine: the candidates, under load.

    python benchmarks/threads.py --config configs/tiny/sft.yaml --repeats 3 --loads 0 2 [--write-docs]

For each load (0, 1, 2 ... CPU-bound busy loops beside the canary, as neighbours on a shared runner), runs the
canary with each candidate thread count, interleaved (repeat r runs every candidate once, in a shuffled order),
and reports per candidate and load: the median of the runs' median step times, the spread between runs (SD of
their log medians) and within a run (the median of the runs' robust per-step SDs), and the wall time.
"""

from __future__ import annotations

import argparse
import datetime
import math
import os
import platform
import random
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Final

from canary_action.compare.baselines import load_current
from canary_action.compare.stats import per_step_log_sd

try:
    from benchmarks.real_runs import REPO, busy_loops, canary_run, write_docs
except ModuleNotFoundError:  # run as a script
    from real_runs import REPO, busy_loops, canary_run, write_docs  # type: ignore[no-redef]

CANDIDATES: Final = ("1", "2", "auto")
DOCS_BEGIN: Final = "<!-- threads:begin -->"
DOCS_END: Final = "<!-- threads:end -->"


@dataclass
class Cell:
    threads: str
    load: int
    medians: list[float] = field(default_factory=list)
    step_sds: list[float] = field(default_factory=list)
    walls: list[float] = field(default_factory=list)


def measure(config: Path, candidates: Sequence[str], loads: Sequence[int], repeats: int, seed: int) -> list[Cell]:
    rng = random.Random(seed)
    cells = {(t, load): Cell(t, load) for load in loads for t in candidates}
    with TemporaryDirectory() as tmp:
        for load in loads:
            with busy_loops(load):
                for r in range(repeats):
                    order = list(candidates)
                    rng.shuffle(order)
                    for threads in order:
                        started = time.time()
                        out = Path(tmp) / f"{load}-{threads}-{r}"
                        run = load_current(canary_run(config, out, None, 0.0, f"cpu_threads={threads}"))
                        cell = cells[threads, load]
                        cell.walls.append(time.time() - started)
                        if run.step_time_median is not None:
                            cell.medians.append(run.step_time_median)
                        if (sd := per_step_log_sd(run.steady_step_times)) is not None:
                            cell.step_sds.append(sd)
                        print(f"load {load} threads {threads}: {run.step_time_median:.4f} s", file=sys.stderr)
    return list(cells.values())


def render(cells: Sequence[Cell], args: argparse.Namespace) -> str:
    lines = [
        f"Recorded {args.date} on {args.machine}; `{args.config}` at its own length, {args.repeats} runs per cell, "
        "candidates interleaved within each load.",
        "",
        "```",
        f"python benchmarks/threads.py --config {args.config} --repeats {args.repeats} "
        f"--loads {' '.join(map(str, args.loads))} --write-docs",
        "```",
        "",
        "| busy loops beside it | cpu_threads | median step (s) | between runs (SD of log medians) "
        "| within a run (per-step SD) | wall per run (s) |",
        "|---|---|---|---|---|---|",
    ]
    for c in cells:
        between = statistics.stdev(math.log(m) for m in c.medians) if len(c.medians) > 1 else float("nan")
        lines.append(
            f"| {c.load} | {c.threads} | {statistics.median(c.medians):.4f} | {100 * between:.1f} % "
            f"| {100 * statistics.median(c.step_sds):.1f} % | {statistics.median(c.walls):.0f} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=Path("configs/tiny/sft.yaml"))
    parser.add_argument("--candidates", nargs="+", default=list(CANDIDATES))
    parser.add_argument("--loads", type=int, nargs="+", default=[0, 2])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--write-docs", action="store_true")
    parser.add_argument("--docs", type=Path, default=REPO / "docs" / "benchmarks.md")
    parser.add_argument("--date", default=datetime.datetime.now(datetime.UTC).date().isoformat())
    parser.add_argument("--machine", default=f"{os.cpu_count()}-core {platform.machine()} (shared dev machine)")
    args = parser.parse_args(argv)
    section = render(measure(args.config, args.candidates, args.loads, args.repeats, args.seed), args)
    print(section)
    if args.write_docs:
        write_docs(section, args.docs, DOCS_BEGIN, DOCS_END)


if __name__ == "__main__":
    main()
