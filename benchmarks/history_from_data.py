"""The history page of this project's own recorded runs (benchmarks/data): what docs/history.md shows.

    python benchmarks/history_from_data.py [-o benchmarks/data/history-2026-11-28] [--site DIR]

Every recorded run becomes a history entry as the action's history step would write it for a default-branch run,
judged as the action's run mode judges one: `canary compare` against the up to 5 runs of its config before it that
did not regress (the first of a config has no baseline: neutral).
  tiny-dpo, tiny-sft   the separate CPU runs of real-runs-2026-11-24 (tiny-dpo: plain runs and runs with a planted
                       +10/+20/+50 % sleep, interleaved) and real-runs-heldout-{dpo,sft}-2026-11-27 (held-out
                       evaluation on): two commits of this project, so the held-out chart starts on 2026-11-27
  team-dpo, team-sft,  the base side of every lockstep pair of lockstep-aa-2026-11-28 (the base tree never changed:
  team-grpo            the default branch's own drift); each A/A pair (a head that changed nothing) is drawn as a pull
                       request merged after it, with the paired effects its comparison judged. The pairs with a
                       planted slowdown are not drawn as merged: a gate keeps such a change out.
Writes history.jsonl to -o and, with --site, builds the site there.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from canary_action.compare.command import run_compare  # noqa: E402
from canary_action.compare.result import CompareResult  # noqa: E402
from canary_action.history.collect import entry_from_result, pull_request_of  # noqa: E402
from canary_action.history.read import read_history  # noqa: E402
from canary_action.history.record import Entry, PullRequest  # noqa: E402
from canary_action.history.site import build_site  # noqa: E402
from canary_action.history.store import write_history  # noqa: E402
from canary_action.metrics.io import read_metrics  # noqa: E402

DATA = ROOT / "benchmarks" / "data"
REPOSITORY = "rlhf-canary/rlhf-canary"
SINGLES = ("real-runs-2026-11-24", "real-runs-heldout-dpo-2026-11-27", "real-runs-heldout-sft-2026-11-27")
PAIRS = "lockstep-aa-2026-11-28"
BASELINES = 5


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-o", "--output", type=Path, default=DATA / "history-2026-11-28")
    parser.add_argument("--site", type=Path, help="Also build the site into this folder.")
    args = parser.parse_args()
    runs: list[tuple[Path, PullRequest | None]] = []
    for name in SINGLES:
        runs += [(path, None) for path in sorted((DATA / name).glob("*/*/metrics.json")) if "calibration" not in
                 path.parts]  # fmt: skip
    for manifest in sorted((DATA / PAIRS).glob("*/manifest.jsonl")):
        for line in manifest.read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            if "pair" not in record:
                continue
            pair_dir = manifest.parent / record["pair"]
            merged = (
                pull_request_of(run_compare(pair_dir, [], missing_ok=True), None) if record["label"] == "aa" else None
            )
            runs.append((pair_dir / "base" / "metrics.json", merged))
    entries = judged(runs)
    args.output.mkdir(parents=True, exist_ok=True)
    write_history(args.output / "history.jsonl", entries)
    configs = sorted({e.config for e in entries})
    print(f"{args.output / 'history.jsonl'}: {len(entries)} entries of {', '.join(configs)}")
    if args.site:
        build_site(read_history(args.output / "history.jsonl"), args.site)
        print(f"{args.site / 'index.html'}")


def judged(runs: list[tuple[Path, PullRequest | None]]) -> list[Entry]:
    """Each run compared with the runs of its config before it that did not regress, oldest first."""
    dated = sorted(runs, key=lambda run: read_metrics(run[0]).run.started_at)
    kept: dict[str, list[Path]] = {}
    entries = []
    for path, merged in dated:
        metrics = read_metrics(path)
        baselines = kept.setdefault(metrics.run.config_name, [])
        result: CompareResult = run_compare(path, baselines[-BASELINES:], missing_ok=True)
        entries.append(entry_from_result(result, metrics, repository=REPOSITORY, event="push", commit=None, run_id=None,
                              pull_request=merged, bisect=None))  # fmt: skip
        if result.verdict != "regression":
            baselines.append(path)
    return entries


if __name__ == "__main__":
    main()
