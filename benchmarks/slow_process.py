"""Slow-process states reproduced on purpose: which of them move one side of a pair by 5 % or more.

    python benchmarks/slow_process.py -o benchmarks/data/slow-process-2026-11-28 --repeats 2

The team DPO canary (benchmarks/canaries.py) is paired with itself, the head side put in one state by code its
factory runs once, in its own process, before training (the base side as it is):

- aa: nothing (the control);
- fresh-memory: 4 MiB of memory the process never had touched every step (page faults, zeroing in the kernel);
- thp-off: transparent huge pages turned off for the process (prctl PR_SET_THP_DISABLE), so its new memory is
  mapped in 4 KiB pages;
- heap-grown: 2 GiB allocated in 64 MiB blocks, touched and freed before training (a heap grown and left
  behind, as a data pipeline that loads everything first leaves it);
- pinned-elsewhere: the head side moved off the CPUs the pair gave it, to the other CPUs of the machine (where
  the machine has others).

Each pair is `canary pair` with the defaults (a failing pair is confirmed); the jobs run in one random order. The
table: each state's paired step-time effect, what the checks said, and the slow-process note's mechanisms.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Final

REPO: Final = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks import canaries, lockstep  # noqa: E402
from benchmarks.real_runs import write_docs  # noqa: E402

#: state -> what the head side's factory runs, once, before it returns the trainer.
STATES: Final = {
    "aa": "",
    "fresh-memory": """
import mmap
from transformers import TrainerCallback


class FreshMemory(TrainerCallback):
    def on_step_end(self, args, state, control, **kwargs):
        with mmap.mmap(-1, 4 << 20) as block:
            for offset in range(0, 4 << 20, mmap.PAGESIZE):
                block[offset] = 1


EXTRA_CALLBACKS.append(FreshMemory())
""",
    "thp-off": """
import ctypes
ctypes.CDLL(None, use_errno=True).prctl(41, 1, 0, 0, 0)  # PR_SET_THP_DISABLE
""",
    "heap-grown": """
import torch
blocks = [torch.ones(16 << 20) for _ in range(32)]  # 32 x 64 MiB, every page touched
del blocks
""",
    "pinned-elsewhere": """
import os
given = os.sched_getaffinity(0)
others = set(range(os.cpu_count() or 1)) - given
if others:
    os.sched_setaffinity(0, others)
""",
}
MECHANISMS: Final = ("system CPU", "minor page faults", "major page faults", "involuntary switches", "run-queue wait")
DOCS_BEGIN: Final = "<!-- slow-process:begin -->"
DOCS_END: Final = "<!-- slow-process:end -->"
HOOK: Final = "\ndef build_trainer(context):\n"


def head_files(state: str) -> dict[str, str]:
    """The DPO canary's files with `state`'s code in team_dpo/state.py, which its factory imports first."""
    family = canaries.FAMILIES["team-dpo"]
    factory = family.files["team_dpo/factory.py"]
    assert HOOK in factory
    factory = factory.replace(HOOK, f"{HOOK}    from team_dpo.state import EXTRA_CALLBACKS\n\n")
    factory = factory.replace("callbacks=[Dashboard()]", "callbacks=[Dashboard(), *EXTRA_CALLBACKS]")
    state_code = f'"""The head side\'s state: {state}."""\n\nEXTRA_CALLBACKS = []\n{STATES[state]}'
    return {**family.files, "team_dpo/factory.py": factory, "team_dpo/state.py": state_code}


def collect(out: Path, repeats: int, seed: int) -> None:
    family = canaries.FAMILIES["team-dpo"]
    trees = out / "trees"
    base = family.make_tree(trees, "base")
    heads = {}
    for state in STATES:
        heads[state] = canaries.Family(**{**family.__dict__, "files": head_files(state)}).make_tree(trees, state)
    jobs = [state for state in STATES for _ in range(repeats)]
    random.Random(seed).shuffle(jobs)
    with (out / lockstep.MANIFEST).open("a", encoding="utf-8") as manifest:
        for number, state in enumerate(jobs, 1):
            pair, wall = lockstep.run_pair(base, heads[state], out / "pairs")
            manifest.write(json.dumps({"state": state, "pair": str(pair.relative_to(out)), "wall_s": wall}) + "\n")
            manifest.flush()
            print(f"[{number}/{len(jobs)}] {state} {wall:.0f} s", file=sys.stderr, flush=True)


def render(out: Path) -> str:
    from canary_action.compare.command import run_compare
    from canary_action.compare.confirm import CONFIRMATION_DIR, agree

    rows = [json.loads(line) for line in (out / lockstep.MANIFEST).read_text(encoding="utf-8").splitlines() if line]
    lines = [
        "| head side's state | pairs | step-time effect of each first pair | verdicts | confirming pairs | "
        "mechanisms the slow-process note named |",
        "|---|---|---|---|---|---|",
    ]
    for state in STATES:
        group = [r for r in rows if r["state"] == state]
        if not group:
            continue
        effects, verdicts, seconds, named = [], [], [], set()
        for row in group:
            result = run_compare(out / row["pair"], [])
            first = run_compare(out / row["pair"], [], confirmations=False)
            step = next(c for c in first.checks if c.name == "step_time")
            effects.append(f"{step.delta_pct:+.1f} %" if step.delta_pct is not None else step.status)
            verdicts.append(result.verdict)
            record = json.loads((out / row["pair"] / "pair.json").read_text(encoding="utf-8"))
            if record.get("confirmation"):
                second = run_compare(out / row["pair"] / CONFIRMATION_DIR / record["confirmation"], [])
                check = next(c for c in second.checks if c.name == "step_time")
                same = "agrees" if agree(step, check) else "disagrees"
                seconds.append(f"{check.delta_pct:+.1f} % ({same})" if check.delta_pct is not None else check.status)
            note = next((n for n in result.notes if n.startswith("slow process: ")), "")
            named |= {m for m in MECHANISMS if f"{m} " in note}
        lines.append(
            f"| {state} | {len(group)} | {', '.join(effects)} | {', '.join(verdicts)} | {', '.join(seconds) or '—'} "
            f"| {', '.join(sorted(named)) or '—'} |"
        )
    walls = [r["wall_s"] for r in rows]
    lines += ["", f"{len(rows)} pairs, median wall time {statistics.median(walls):.0f} s."]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python benchmarks/slow_process.py", description=__doc__.split("\n")[0])
    parser.add_argument("-o", "--output", type=Path, required=True)
    parser.add_argument("--repeats", type=int, default=2, help="pairs per state")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--render-only", action="store_true", help="judge what was collected, collect nothing")
    parser.add_argument("--write-docs", action="store_true", help="replace the section of docs/benchmarks.md")
    args = parser.parse_args(argv)
    args.output.mkdir(parents=True, exist_ok=True)
    if not args.render_only:
        collect(args.output, args.repeats, args.seed)
    text = render(args.output)
    print(text)
    if args.write_docs:
        write_docs(text, REPO / "docs" / "benchmarks.md", DOCS_BEGIN, DOCS_END)


if __name__ == "__main__":
    main()
