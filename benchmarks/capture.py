"""What capture costs (docs/replay.md): off, nothing; on, so much per captured step and so many bytes.

    python benchmarks/capture.py off --config configs/tiny/sft.yaml --steps 60 -o DIR
    python benchmarks/capture.py on --config configs/tiny/sft.yaml --steps 30 --every 3 -o DIR

`off`: a lockstep A/A pair (`canary pair`) of the config with capture switched off (`capture: {on_non_finite:
false}`) as base against the config with no capture block (the default: the first NaN/Inf step is captured,
the step's batches kept by reference) as head: step_time's effect and interval, and whether the numerics are
identical. `on`: one run capturing every k-th step; the run's own capture notice gives the seconds spent writing
and the bytes, divided by the steps captured. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def canary(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "canary_action", *args]
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=3600, check=False)


def tree(folder: Path, config: Path, steps: int, extra: str = "") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    lines = [line for line in config.read_text(encoding="utf-8").splitlines() if not line.startswith("max_steps:")]
    (folder / "canary.yaml").write_text("\n".join(lines) + f"\nmax_steps: {steps}\n{extra}", encoding="utf-8")
    return folder


def off(config: Path, steps: int, out: Path) -> dict[str, Any]:
    base = tree(out / "trees" / "capture-off", config, steps, "capture:\n  on_non_finite: false\n")
    head = tree(out / "trees" / "default", config, steps)
    done = canary("pair", "canary.yaml", "--base", str(base), "--head", str(head), "-o", str(out / "pairs"), "--json",
                  "--confirm-minutes", "0")  # fmt: skip
    if done.returncode not in (0, 1):
        raise SystemExit(done.stderr[-2000:])
    result = json.loads(done.stdout)
    check = next(c for c in result["checks"] if c["name"] == "step_time")
    return {
        "config": str(config), "steps": steps, "verdict": result["verdict"], "step_time": {
            k: check.get(k) for k in ("status", "delta_pct", "interval", "threshold")
        }, "numerics": (result.get("numerics") or {}).get("state"),
    }  # fmt: skip


def on(config: Path, steps: int, every: int, out: Path) -> dict[str, Any]:
    chosen = list(range(every, steps + 1, every))
    done = canary("run", str(config), "-o", str(out / "runs"), "--set", f"max_steps={steps}",
                  "--set", f"capture.steps={chosen}", "--set", "capture.max_captures=100")  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(done.stderr[-2000:])
    run_dir = max((out / "runs").iterdir(), key=lambda p: p.stat().st_mtime)
    metrics = json.loads((run_dir / "metrics.json").read_text(encoding="utf-8"))
    notice = next(n for n in metrics["notices"] if n.startswith("capture: "))
    seconds = float(re.search(r" in ([0-9.]+) ms,", notice).group(1)) / 1000  # type: ignore[union-attr]
    folders = sorted((run_dir / "captures").glob("step-*"))
    sizes = [sum(f.stat().st_size for f in folder.iterdir()) for folder in folders]
    return {
        "config": str(config), "steps": steps, "captured": len(folders), "seconds_per_capture": seconds / len(folders),
        "bytes_per_capture": sum(sizes) / len(sizes), "step_time_median_s": metrics["summary"]["step_time_s"]["median"],
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=["off", "on"])
    parser.add_argument("--config", type=Path, default=Path("configs/tiny/sft.yaml"))
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--every", type=int, default=3)
    parser.add_argument("-o", "--output", type=Path, required=True)
    args = parser.parse_args()
    config = args.config.resolve()
    figures = (
        off(config, args.steps, args.output) if args.mode == "off" else on(config, args.steps, args.every, args.output)
    )
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
