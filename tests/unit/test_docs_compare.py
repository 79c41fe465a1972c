"""docs/compare.md states the thresholds and the checks; these tests keep it equal to the code."""

from __future__ import annotations

import re
from pathlib import Path

from canary_action.compare.command import run_compare
from canary_action.compare.result import CompareResult
from canary_action.compare.verdict import compare
from canary_action.config.thresholds import TIERS, Thresholds
from tests.unit.test_compare import history, run
from tests.unit.test_correctness_compare import evaluation, pair
from tests.unit.test_distributed_compare import dist_history, dist_run
from tests.unit.test_host_memory import cpu_run

DOC = (Path(__file__).parents[2] / "docs" / "compare.md").read_text(encoding="utf-8")


def table_rows(first_header: str) -> list[list[str]]:
    lines = DOC[DOC.index(f"| {first_header} |") :].splitlines()
    rows = []
    for line in lines[2:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


def test_the_thresholds_table_has_every_key_with_its_tier_values() -> None:
    documented: dict[str, list[str]] = {}
    for row in table_rows("key"):
        for key in re.findall(r"`(\w+)`", row[0]):
            documented[key] = row[1:5]
    assert set(documented) == set(Thresholds.model_fields)
    for key, cells in documented.items():
        expected = [TIERS[tier].model_dump()[key] for tier in ("default", "smoke", "perf", "nightly")]
        shown = [str(v).lower() if isinstance(v, bool) else f"{v:g}" for v in expected]
        assert cells == shown, key


def gpu_timed_runs(tmp: Path) -> tuple[Path, list[Path]]:
    from tests.unit.test_gpu_compare import RUNS, with_gpu

    return with_gpu(RUNS[2], tmp / "current.json"), [with_gpu(RUNS[0], tmp / "base.json")]


def test_the_checks_table_names_every_check_the_comparison_makes(tmp_path: Path) -> None:
    documented = {name for row in table_rows("check") for name in re.findall(r"`(\w+)`", row[0])}
    algo = {"algo/rewards/accuracies": [0.5] * 60, "algo/rewards/margins": [0.1] * 60, "algo/reward": [1.0] * 60,
            "algo/kl": [0.01] * 60}  # fmt: skip
    made: CompareResult = compare(run(1, series=algo), history(2, series=algo), TIERS["default"])
    multi = compare(dist_run(1), dist_history(2), TIERS["default"])  # + the checks of multi-process runs
    cpu = compare(cpu_run(1), [cpu_run(2), cpu_run(3)], TIERS["default"])  # + the checks of CPU runs
    timed = run_compare(*gpu_timed_runs(tmp_path))  # + the checks of CUDA runs that timed the GPU
    paired = run_compare(pair(tmp_path / "pair", evaluation()), [])  # + the checks of lockstep pairs
    assert {c.name for r in (made, multi, cpu, timed, paired) for c in r.checks} == documented
