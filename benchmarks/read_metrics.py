"""How long reading one metrics.json takes (`read_metrics`: parse, validate), in-process, for a run length.

    python benchmarks/read_metrics.py [--steps 2000] [--repeats 30] [--tree DIR ...]

Writes one synthetic run (tests/factories.py) of `--steps` steps, then, for each code tree given (default:
this one; pass an older checkout too to compare), times `read_metrics` in a fresh interpreter: the median and
the best of `--repeats` reads. Trees are measured in turn, round after round, so the machine's drift falls
on all of them alike.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_TIMER = """
import sys, time
sys.path.insert(0, sys.argv[1])
from pathlib import Path
from canary_action.metrics.io import read_metrics
path, repeats = Path(sys.argv[2]), int(sys.argv[3])
read_metrics(path)
for _ in range(repeats):
    start = time.perf_counter()
    read_metrics(path)
    print(time.perf_counter() - start)
"""


def write_run(folder: Path, steps: int) -> Path:
    sys.path.insert(0, str(ROOT))
    from canary_action.metrics.io import write_metrics
    from tests.factories import make_metrics

    path = folder / "metrics.json"
    write_metrics(make_metrics(num_steps=steps, seed=1), path)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tree", action="append", type=Path, help="a code tree to time (repeatable)")
    args = parser.parse_args()
    trees = args.tree or [ROOT]
    with tempfile.TemporaryDirectory() as tmp:
        path = write_run(Path(tmp), args.steps)
        print(f"{args.steps} steps, {path.stat().st_size / 2**20:.2f} MiB")
        times: dict[Path, list[float]] = {tree: [] for tree in trees}
        for _ in range(args.rounds):
            for tree in trees:
                command = [sys.executable, "-c", _TIMER, str(tree), str(path), str(args.repeats)]
                out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
                times[tree].extend(float(line) for line in out.split())
        for tree, seconds in times.items():
            print(f"  {tree}: median {statistics.median(seconds) * 1000:.1f} ms, best {min(seconds) * 1000:.1f} ms")


if __name__ == "__main__":
    main()
