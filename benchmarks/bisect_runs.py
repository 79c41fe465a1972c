"""`canary bisect` on real runs: throwaway git repositories of a team's canary (benchmarks/lockstep.py's team
pipeline) with a short history, one commit of which adds needless work to the team's compute_loss (+15 %), or two
commits that each add some (two regressions); bisect must name them, on a quiet machine and beside a bursty CPU
hog.

    python benchmarks/bisect_runs.py collect -o benchmarks/data/bisect-2026-11-26
    python benchmarks/bisect_runs.py render benchmarks/data/bisect-2026-11-26 --write-docs

`collect` calibrates first (lockstep.py's way: the median step of one quiet A/A pair and the time of one
diagnostic, so that +X % is X % x step / diagnostic repetitions), then runs every job of the plan in one random
order. A job builds a repository of N commits after the good one (docs, config comments, a helper module: no
change of speed) with the slowdown planted at random positions, and runs `canary bisect canary.yaml --good FIRST
--bad LAST --json` in it as a user would, timed from start to end, then throws the repository away.
manifest.jsonl lists every job: where the slowdowns were, what bisect said (its bisect.json), its pairs and wall
time.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

sys.path.insert(0, str(Path(__file__).resolve().parent))
import lockstep  # the team pipeline and the hog, shared with the lockstep benchmark)

MANIFEST: Final = "manifest.jsonl"
DOCS_BEGIN: Final = "<!-- bisect:begin -->"
DOCS_END: Final = "<!-- bisect:end -->"
#: (commits after the good one, planted slowdowns in %, load), one entry per job.
PLAN: Final = [
    *[(8, (15,), "quiet")] * 3, *[(16, (15,), "quiet")] * 2, *[(8, (15,), "hog")] * 2, *[(16, (15,), "hog")] * 3,
    (12, (15, 15), "quiet"), (12, (15, 15), "hog"),
]  # fmt: skip
STEPS: Final = 60
HARMLESS: Final = [
    ("README.md", "docs: say how to run the canary locally\n"),
    ("team_pipeline/settings.py", "LOG_EVERY = {k}\n"),
    ("canary.yaml.notes", "the canary's config is reviewed by the infra team ({k})\n"),
    ("team_pipeline/helpers.py", "def describe():\n    return 'team pipeline, revision {k}'\n"),
]
GIT_ENV: Final = {
    "GIT_AUTHOR_NAME": "Team", "GIT_AUTHOR_EMAIL": "team@example.com", "GIT_COMMITTER_NAME": "Team",
    "GIT_COMMITTER_EMAIL": "team@example.com", "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1",
}  # fmt: skip


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, **GIT_ENV}
    return subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True, text=True).stdout


def trainer_text(counts: Sequence[tuple[str, int]]) -> str:
    """The team's trainer.py with each (kind, repetitions) slowdown of lockstep.SLOWDOWNS in it."""
    constants, collate, loss = "", "", ""
    for kind, count in counts:
        extra_constants, extra_collate, extra_loss = lockstep.SLOWDOWNS[kind]
        constants += extra_constants.format(count=count)
        collate, loss = collate + extra_collate, loss + extra_loss
    return lockstep.TEAM_TRAINER.format(constants=constants, collate_work=collate, loss_work=loss)


def make_history(repo: Path, n: int, planted: dict[int, tuple[str, int]], seed: int = 0) -> list[str]:
    """A repository whose first commit is the team's canary (good) and whose next n commits change harmless files,
    except that commit k in `planted` adds its (kind, repetitions) slowdown. The SHAs, oldest first."""
    rng = random.Random(seed)
    lockstep.make_tree(repo.parent, repo.name)
    (repo / ".gitignore").write_text("canary-bisect/\n__pycache__/\n", encoding="utf-8")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "team pipeline: the SFT canary")
    shas = [git(repo, "rev-parse", "HEAD").strip()]
    active: list[tuple[str, int]] = []
    for k in range(1, n + 1):
        if k in planted:
            kind, count = planted[k]
            active.append((kind, count))
            (repo / "team_pipeline" / "trainer.py").write_text(trainer_text(active), encoding="utf-8")
            subject = (
                "trainer: recompute the dashboard diagnostic in compute_loss"
                if kind == "loss"
                else ("collator: validate the token table for every batch")
            )
        else:
            path, text = rng.choice(HARMLESS)
            target = repo / path
            previous = target.read_text(encoding="utf-8") if target.exists() else ""
            target.write_text(previous + text.format(k=k), encoding="utf-8")
            subject = f"{path.split('/')[-1].split('.')[0]}: housekeeping {k}"
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", subject)
        shas.append(git(repo, "rev-parse", "HEAD").strip())
    return shas


def run_bisect(repo: Path, good: str, bad: str) -> tuple[dict[str, Any], float, int]:
    start = time.perf_counter()
    done = subprocess.run(
        lockstep.canary("bisect", "canary.yaml", "--good", good, "--bad", bad, "--json", "--set", f"max_steps={STEPS}"),
        cwd=repo, capture_output=True, text=True, check=False,
    )  # fmt: skip
    wall = time.perf_counter() - start
    if done.returncode != 0:
        return {"error": done.stderr[-3000:]}, wall, done.returncode
    return json.loads(done.stdout), wall, 0


def calibrate(out: Path) -> dict[str, Any]:
    base = lockstep.make_tree(out / "trees", "base")
    pair, _ = lockstep.run_pair(base, base, out / "calibration")
    step_s = json.loads((pair / "base" / "metrics.json").read_text())["summary"]["step_time_s"]["median"]
    units = {"loss": lockstep.unit_s(base, "probe_diagnostic"), "collate": lockstep.unit_s(base, "vocab_check")}
    return {"step_s": step_s, "units_s": units, "steps": STEPS}


def collect(out: Path, seed: int) -> None:
    out.mkdir(parents=True, exist_ok=True)
    calibration = calibrate(out)
    (out / "calibration.json").write_text(json.dumps(calibration, indent=2), encoding="utf-8")
    rng = random.Random(seed)
    jobs = list(PLAN)
    rng.shuffle(jobs)
    kinds = ["loss", "collate"]
    with (out / MANIFEST).open("a", encoding="utf-8") as manifest:
        for number, (n, sizes, load) in enumerate(jobs, 1):
            positions = sorted(rng.sample(range(1, n + 1), len(sizes)))
            planted = {}
            for i, (at, size) in enumerate(zip(positions, sizes, strict=True)):
                kind = kinds[i % 2]
                planted[at] = (kind, round(size / 100 * calibration["step_s"] / calibration["units_s"][kind]))
            with tempfile.TemporaryDirectory(prefix="bisect-job-") as scratch:  # a repository per job, thrown away
                repo = Path(scratch) / "team"
                shas = make_history(repo, n, planted, seed=number)
                with lockstep.hog(load == "hog"):
                    result, wall, code = run_bisect(repo, shas[0], shas[-1])
            row = {"job": number, "n": n, "load": load, "planted": {str(k): v for k, v in planted.items()},
                   "sizes_pct": list(sizes), "exit": code, "wall_s": round(wall, 1), "result": result,
                   "started": time.strftime("%H:%M:%S")}  # fmt: skip
            manifest.write(json.dumps(row) + "\n")
            manifest.flush()
            print(f"[{number}/{len(jobs)}] n={n} {load} planted {sorted(planted)}: {verdict(row)} {wall:.0f} s",
                  file=sys.stderr, flush=True)  # fmt: skip


def verdict(row: dict[str, Any]) -> str:
    """How the job came out: `named` (every planted commit named clearly, nothing else), `said-several` (two
    planted: one named or none, the report says more than one change), `stopped` (no wrong claim, not narrowed),
    `wrong` (a clear claim of a commit that was not planted), `error`."""
    result = row["result"]
    if "findings" not in result:
        return "error"
    planted = {int(k) for k in row["planted"]}
    clear = {f["commits"][0]["index"] for f in result["findings"] if f["clear"]}
    if clear - planted:
        return "wrong"
    if clear == planted:
        return "named"
    if len(planted) > 1 and (len(result["findings"]) > 1 or result["status"] == "several"):
        return "said-several"
    return "stopped"


def render(data: Path) -> str:
    calibration = json.loads((data / "calibration.json").read_text())
    rows = [json.loads(line) for line in (data / MANIFEST).read_text().splitlines() if line]
    lines = [
        f"Collected {time.strftime('%Y-%m-%d', time.gmtime((data / MANIFEST).stat().st_mtime))} on this 2-core "
        f"shared VM: the team canary at {calibration['steps']} steps per side, quiet step "
        f"{calibration['step_s'] * 1000:.0f} ms; one diagnostic {calibration['units_s']['loss'] * 1000:.3f} ms, one "
        f"vocabulary check {calibration['units_s']['collate'] * 1000:.3f} ms.",
        "",
        "| job | load | commits N | planted at | bisect said | outcome | pairs (budget log2 N + 2) | wall |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        result = row["result"]
        said = "; ".join(
            (f"#{f['commits'][0]['index']} {f['after']['pct'] - f['before']['pct']:+.1f} %" if f["clear"]
             else f"#{f['commits'][0]['index']}..#{f['commits'][-1]['index']} not narrowed")
            for f in result.get("findings", [])
        ) or result.get("status", "error")  # fmt: skip
        planted = ", ".join(f"#{k} ({v[0]})" for k, v in row["planted"].items())
        budget = math.log2(row["n"]) + 2
        lines.append(
            f"| {row['job']} | {row['load']} | {row['n']} | {planted} | {said} | {verdict(row)} | "
            f"{result.get('pairs', '—')} ({budget:.1f}) | {row['wall_s'] / 60:.1f} min |"
        )
    single = [r for r in rows if len(r["planted"]) == 1]
    named = sum(verdict(r) == "named" for r in single)
    wrong = sum(verdict(r) == "wrong" for r in rows)
    within = sum(r["result"].get("pairs", 99) <= math.log2(r["n"]) + 2 for r in single)
    lines += [
        "",
        f"One planted +15 %: named in **{named} of {len(single)}** runs; pairs within log2 N + 2 in {within} of "
        f"{len(single)}. A clear claim of a wrong commit: {wrong} of {len(rows)} runs (all jobs).",
    ]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    collect_parser = commands.add_parser("collect", help="run the plan")
    collect_parser.add_argument("-o", "--output", type=Path, required=True)
    collect_parser.add_argument("--seed", type=int, default=27)
    render_parser = commands.add_parser("render", help="the table for docs/benchmarks.md")
    render_parser.add_argument("data", type=Path)
    render_parser.add_argument("--write-docs", action="store_true")
    args = parser.parse_args(argv)
    if args.command == "collect":
        collect(args.output, args.seed)
        return
    table = render(args.data)
    if not args.write_docs:
        print(table, end="")
        return
    docs = lockstep.REPO / "docs" / "benchmarks.md"
    text = docs.read_text(encoding="utf-8")
    head, _, rest = text.partition(DOCS_BEGIN)
    _, _, tail = rest.partition(DOCS_END)
    docs.write_text(f"{head}{DOCS_BEGIN}\n{table}{DOCS_END}{tail}", encoding="utf-8")


if __name__ == "__main__":
    main()
