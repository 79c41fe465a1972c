"""benchmarks/bisect_runs.py: the repositories it builds, and how it reads what bisect said (docs/benchmarks.md)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from benchmarks import bisect_runs

DATA = Path(__file__).parents[2] / "benchmarks" / "data" / "bisect-2026-11-26-interval-rule"


def row(planted: list[int], findings: list[tuple[int, int, bool]], status: str = "found") -> dict[str, Any]:
    result = {
        "status": status,
        "findings": [
            {"commits": [{"index": i} for i in range(low, high + 1)], "clear": clear} for low, high, clear in findings
        ],
    }
    return {"planted": {str(k): ["loss", 10] for k in planted}, "result": result}


def test_outcomes_are_read_from_what_bisect_claimed() -> None:
    assert bisect_runs.verdict(row([5], [(5, 5, True)])) == "named"
    assert bisect_runs.verdict(row([5], [(4, 5, False)], "not-clear")) == "stopped"
    assert bisect_runs.verdict(row([5], [(6, 6, True)])) == "wrong"
    assert bisect_runs.verdict(row([2, 6], [(2, 2, True), (6, 6, True)], "several")) == "named"
    assert bisect_runs.verdict(row([2, 6], [(2, 2, True), (3, 6, False)], "not-clear")) == "said-several"
    assert bisect_runs.verdict({"planted": {"1": ["loss", 1]}, "result": {"error": "boom"}}) == "error"


def test_a_history_has_the_slowdown_from_its_commit_on(tmp_path: Path) -> None:
    repo = tmp_path / "team"
    shas = bisect_runs.make_history(repo, 4, {2: ("loss", 7), 4: ("collate", 3)})
    assert len(shas) == 5

    def trainer(sha: str) -> str:
        show = ["git", "show", f"{sha}:team_pipeline/trainer.py"]
        return subprocess.run(show, cwd=repo, capture_output=True, text=True, check=True).stdout

    assert "DIAGNOSTIC_REPEATS" not in trainer(shas[1])
    assert "DIAGNOSTIC_REPEATS = 7" in trainer(shas[2])
    assert "VOCAB_CHECKS = 3" in trainer(shas[4])
    assert "DIAGNOSTIC_REPEATS = 7" in trainer(shas[4])


def test_the_recorded_collection_renders() -> None:
    text = bisect_runs.render(DATA)
    assert "| job | load | commits N |" in text
    assert "One planted +15 %: named in" in text
