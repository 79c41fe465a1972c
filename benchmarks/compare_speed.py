"""How long `canary compare` takes, as a CI step calls it: a fresh process, files in, report out.

    python benchmarks/compare_speed.py [--steps 2000] [--baselines 5] [--repeats 7]

Writes a current run and N baselines of `--steps` steps (synthetic, tests/factories.py) to a temporary
directory, then times `canary compare CURRENT DIR` and `--json` in a subprocess (interpreter start included)
and prints the median and the worst of the repeats. The target (DESIGN.md): well under a second.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from canary_action.metrics.io import write_metrics  # noqa: E402
from tests.factories import make_metrics  # noqa: E402


def write_runs(folder: Path, steps: int, baselines: int) -> Path:
    same = {"workload": {"dataset_fingerprint": "d" * 64}, "config": {"seed": 0}}
    for i in range(baselines):
        run = {"run_id": f"base-{i}", "started_at": f"2026-01-{i + 1:02d}T00:00:00.000Z"}
        write_metrics(make_metrics(num_steps=steps, seed=100 + i, run=run, **same), folder / "history" / f"{i}.json")
    current = folder / "current.json"
    write_metrics(make_metrics(num_steps=steps, seed=1, step_time_s=0.104, run={"run_id": "current"}, **same), current)
    return current


def time_command(args: list[str], repeats: int) -> list[float]:
    command = [sys.executable, "-c", "from canary_action.cli import main; main()", *args]
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run(command, capture_output=True, check=False)
        times.append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--baselines", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        current = write_runs(folder, args.steps, args.baselines)
        size = sum(p.stat().st_size for p in folder.rglob("*.json")) / 2**20
        print(f"{args.baselines} baselines + 1 run of {args.steps} steps ({size:.1f} MiB of metrics.json)")
        startup = time_command(["--version"], args.repeats)
        print(f"  interpreter + CLI import (--version): median {statistics.median(startup):.3f} s")
        for flags in ([], ["--json"]):
            times = time_command(["compare", str(current), str(folder / "history"), *flags], args.repeats)
            label = " ".join(["canary compare", *flags])
            print(f"  {label:<22} median {statistics.median(times):.3f} s, worst {max(times):.3f} s")


if __name__ == "__main__":
    main()
