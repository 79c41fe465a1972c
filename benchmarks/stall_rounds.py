"""The stalled-round rule on real pairs: for each pair of a lockstep collection (benchmarks/lockstep.py collect),
its label and load, the rounds in which the base side's CPU time per wall second fell under half its usual
(compare/paired.stalled_rounds) out of all its rounds, the verdict and step_time status the real comparison
gives, and the base side's lowest and median CPU/wall ratio over the rounds.

    python benchmarks/stall_rounds.py benchmarks/data/lockstep-2026-11-26-cputime
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(collection: Path) -> None:
    sys.path.insert(0, str(ROOT))
    from canary_action.compare import paired
    from canary_action.compare.baselines import load_current
    from canary_action.compare.command import pair_members, run_compare

    print("label load stalled/rounds verdict step_time min_ratio median_ratio")
    for line in (collection / "manifest.jsonl").read_text(encoding="utf-8").splitlines():
        job = json.loads(line)
        records = list((collection / job["pair"]).rglob("pair.json")) if job.get("pair") else []
        if not records:
            continue
        members = pair_members(records[0].parent)
        assert members is not None
        head, base = load_current(members[0]), load_current(members[1])
        stalled, total = paired.stalled_rounds(head, base), len(paired.rounds(base))
        result = run_compare(records[0].parent, [], missing_ok=True)
        step_time = next((c.status for c in result.checks if c.name == "step_time"), None)
        ratios = list(paired.cpu_ratios(base).values())
        low, middle = (min(ratios), statistics.median(ratios)) if ratios else (None, None)
        print(job["label"], job["load"], f"{len(stalled)}/{total}", result.verdict, step_time, low, middle)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
