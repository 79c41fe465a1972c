"""How long refusing a hostile baseline takes, and how much memory: the inputs a pull request can hand the
publishing job (its artifact) that are built to be slow rather than wrong.

    python benchmarks/hostile_inputs.py [--tree DIR ...] [--scale 1.0]

Cases (each file written once, then read by each code tree in a fresh interpreter, so that a tree's peak RSS
is its own):
  junk-keys     a metrics.json with 3,000,000 unknown top-level keys (46 MiB, under the 64 MiB cap)
  junk-columns  3,000,000 series columns that are not arrays
  bad-items     one series column of 6,000,000 strings
  zip-entries   an artifact zip of 1,000,000 empty entries whose end record declares 1

Prints, per case and tree: refused or not, seconds, peak RSS growth. `--scale` shrinks every case (0.1 for a
quick look). Pass an older checkout as a second `--tree` to compare (git worktree add /tmp/old <commit>).
"""

from __future__ import annotations

import argparse
import io
import json
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_READER = """
import sys, time
sys.path.insert(0, sys.argv[1])
from pathlib import Path
from canary_action.errors import CanaryError
from canary_action.github.artifacts import extract_artifact
from canary_action.metrics.io import read_metrics
path = Path(sys.argv[2])
def peak_mib():  # this process's own high-water mark (ru_maxrss can carry the parent's over fork and exec)
    status = Path("/proc/self/status").read_text()
    return int(next(line for line in status.splitlines() if line.startswith("VmHWM:")).split()[1]) / 1024
before = peak_mib()
start = time.perf_counter()
try:
    if path.suffix == ".zip":
        with path.open("rb") as f:
            extract_artifact(f, path.with_suffix(".out"))
    else:
        read_metrics(path)
    outcome = "accepted"
except CanaryError:
    outcome = "refused"
grown = peak_mib() - before
print(outcome, time.perf_counter() - start, grown)
"""


def write_cases(folder: Path, scale: float) -> dict[str, Path]:
    sys.path.insert(0, str(ROOT))
    from tests.factories import make_metrics

    base = json.loads(make_metrics().model_dump_json())
    many, items = int(3_000_000 * scale), int(6_000_000 * scale)
    cases = {
        "junk-keys": base | {f"k{i:08d}": 0 for i in range(many)},
        "junk-columns": base | {"series": base["series"] | {f"k{i:08d}": 0 for i in range(many)}},
        "bad-items": base | {"series": base["series"] | {"train/loss": ["x"] * items}},
    }
    paths = {}
    for name, doc in cases.items():
        paths[name] = folder / f"{name}.json"
        paths[name].write_text(json.dumps(doc), encoding="utf-8")
    paths["zip-entries"] = folder / "zip-entries.zip"
    paths["zip-entries"].write_bytes(understated_zip(int(1_000_000 * scale)))
    return paths


def understated_zip(entries: int) -> bytes:
    """A zip of `entries` empty files whose end-of-central-directory record says it holds one."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for i in range(entries):
            archive.writestr(f"d/{i:07d}.json", b"")
    raw = bytearray(buffer.getvalue())
    end = raw.rindex(b"PK\x05\x06")
    raw[end + 8 : end + 12] = (1).to_bytes(2, "little") * 2  # entries on this disk, entries in all
    return bytes(raw)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tree", action="append", type=Path, help="a code tree to measure (repeatable)")
    parser.add_argument("--scale", type=float, default=1.0)
    args = parser.parse_args()
    trees = args.tree or [ROOT]
    with tempfile.TemporaryDirectory() as tmp:
        for name, path in write_cases(Path(tmp), args.scale).items():
            print(f"{name} ({path.stat().st_size / 2**20:.0f} MiB)")
            for tree in trees:
                command = [sys.executable, "-c", _READER, str(tree), str(path)]
                out = subprocess.run(command, capture_output=True, text=True, check=True).stdout.split()
                print(f"  {tree}: {out[0]} after {float(out[1]):.2f} s, peak RSS +{float(out[2]):.0f} MiB")


if __name__ == "__main__":
    main()
