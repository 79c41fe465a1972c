"""`canary compare` as users call it: files in, a report out, the exit code that a CI step acts on."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from canary_action.metrics import schema
from canary_action.metrics.io import write_metrics
from canary_action.metrics.schema import NonFiniteEvent, Stability, Status
from tests.factories import make_metrics, make_series
from tests.integration.test_cli import canary

THRESHOLDS = Path(__file__).parents[1] / "fixtures" / "thresholds"
LEGACY = Path(__file__).parents[1] / "fixtures" / "configs" / "legacy"


def save(path: Path, seed: int, step_time_s: float = 0.1, **overrides: Any) -> Path:
    overrides["workload"] = {"dataset_fingerprint": "d" * 64, **overrides.get("workload", {})}
    overrides["config"] = {"seed": 0, **overrides.get("config", {})}
    overrides["run"] = {"run_id": f"{path.stem}", **overrides.get("run", {})}
    same_batches = {schema.NUM_TOKENS: make_series(60)[schema.NUM_TOKENS]}  # one dataset, one seed: same tokens
    metrics = make_metrics(num_steps=60, step_time_s=step_time_s, seed=seed, series=same_batches, **overrides)
    write_metrics(metrics, path)
    return path


@pytest.fixture
def baselines(tmp_path: Path) -> Path:
    folder = tmp_path / "history"
    for i in range(3):
        save(folder / f"base-{i}.json", 100 + i, run={"started_at": f"2026-01-0{i + 1}T00:00:00.000Z"})
    return folder


def test_a_like_run_passes_with_exit_0(tmp_path: Path, baselines: Path) -> None:
    result = canary("compare", save(tmp_path / "cur.json", 1), baselines)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("rlhf-canary PASS — sft-smoke\n")
    assert re.search(r"(?m)^step_time +pass ", result.stdout)
    markdown = canary("compare", save(tmp_path / "cur.json", 1), baselines, "--format", "markdown")
    assert "### ✅ rlhf-canary **pass** — `sft-smoke`" in markdown.stdout
    assert "| step\\_time |" in markdown.stdout


def test_a_slowdown_exits_1_and_names_the_check(tmp_path: Path, baselines: Path) -> None:
    result = canary("compare", save(tmp_path / "cur.json", 1, step_time_s=0.14), baselines, "--json")
    assert result.returncode == 1, result.stderr
    doc = json.loads(result.stdout)
    assert doc["result_schema_version"] == 4
    assert doc["verdict"] == "regression"
    assert doc["checks"][0]["name"] == "step_time"
    assert doc["checks"][0]["status"] == "fail"
    assert len(doc["baselines"]) == 3


def test_a_nan_run_exits_1_even_against_one_baseline(tmp_path: Path, baselines: Path) -> None:
    nan = Stability(non_finite=[NonFiniteEvent(step=9, source="grad", key="gradients", value="nan")], num_nan_steps=1)
    current = save(tmp_path / "cur.json", 1, stability=nan, status=Status(state="stopped_early", reason="non_finite"))
    result = canary("compare", current, baselines / "base-0.json", "--json")
    assert result.returncode == 1
    doc = json.loads(result.stdout)
    assert doc["checks"][0]["name"] == "nan_steps"
    assert doc["suspects"][0]["category"] == "numerics"


def test_a_crashed_run_exits_3(tmp_path: Path, baselines: Path) -> None:
    crashed = Status(state="failed", stage="train", step=3, exception_type="RuntimeError", message="CUDA error")
    result = canary("compare", save(tmp_path / "cur.json", 1, status=crashed), baselines)
    assert result.returncode == 3
    assert "crashed" in result.stdout


def test_output_file_and_tiers(tmp_path: Path, baselines: Path) -> None:
    current = save(tmp_path / "cur.json", 1, step_time_s=0.112)  # +12 %: over default's 10 %, under smoke's 15 %
    out = tmp_path / "report" / "result.json"
    smoke = canary("compare", current, baselines, "--threshold-tier", "smoke", "--json", "-o", out)
    assert smoke.returncode == 0, smoke.stdout + smoke.stderr
    assert json.loads(out.read_text())["thresholds"]["max_step_time_increase_pct"] == 15
    assert f"wrote {out}" in smoke.stderr
    loose = canary("compare", current, baselines, "--threshold-file", THRESHOLDS / "custom.yaml", "--json")
    doc = json.loads(loose.stdout)
    assert doc["thresholds"]["max_step_time_increase_pct"] == 20
    assert doc["threshold_sources"][0] == "tier smoke"


def test_inline_thresholds_of_the_run_apply_last(tmp_path: Path, baselines: Path) -> None:
    current = save(
        tmp_path / "cur.json", 1, step_time_s=0.112, config={"thresholds": {"max_step_time_increase_pct": 30}}
    )
    result = canary("compare", current, baselines, "--json")
    assert result.returncode == 0
    assert json.loads(result.stdout)["thresholds"]["max_step_time_increase_pct"] == 30


def test_the_base_tier_of_a_0_1_nightly_config_replaces_the_tier_asked_for_and_says_so(
    tmp_path: Path, baselines: Path
) -> None:
    """Issue 15 item 1: the thresholds block of 0.1's nightly config, as `canary run` records it in metrics.json."""
    from canary_action.config.load import load_config

    block = load_config(LEGACY / "nightly.yaml").config.model_dump(mode="json")["thresholds"]
    assert block["base_tier"] == "nightly"
    current = save(tmp_path / "cur.json", 1, config={"thresholds": block})
    where = "the thresholds block of config sft-smoke"
    asked = json.loads(canary("compare", current, baselines, "--threshold-tier", "smoke", "--json").stdout)
    assert asked["tier"] == "nightly"
    assert asked["threshold_sources"] == ["tier nightly", where]
    assert asked["thresholds"]["max_step_time_increase_pct"] == 5
    assert asked["thresholds"]["min_step_count"] == 100
    replaced = f"thresholds start from tier nightly, the base_tier of {where}, not tier smoke (the compare-time tier"
    assert [n for n in asked["notes"] if n.startswith(replaced)], asked["notes"]
    # The flag's default was no choice: nothing to say.
    plain = json.loads(canary("compare", current, baselines, "--json").stdout)
    assert plain["tier"] == "nightly"
    assert not [n for n in plain["notes"] if n.startswith("thresholds start from")]
    # Over a file with base_tier smoke: the block's tier, the file's keys unless the block sets them too.
    layered = json.loads(
        canary("compare", current, baselines, "--threshold-file", THRESHOLDS / "custom.yaml", "--json").stdout
    )
    assert layered["tier"] == "nightly"
    assert layered["threshold_sources"] == ["tier nightly", f"file {THRESHOLDS / 'custom.yaml'}", where]
    assert layered["thresholds"]["max_mem_increase_mb"] == 200  # file 750, block 200: the block is later
    assert f"not tier smoke (the base_tier of file {THRESHOLDS / 'custom.yaml'})" in " ".join(layered["notes"])


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--allow-change", "max_lenght"], "did you mean `max_length`"),
        (["--threshold-file", str(THRESHOLDS / "typo.yaml")], "did you mean `max_mem_increase_mb`"),
        (["--threshold-tier", "weekly"], "weekly"),
    ],
)
def test_bad_flags_exit_2(tmp_path: Path, baselines: Path, args: list[str], expected: str) -> None:
    result = canary("compare", save(tmp_path / "cur.json", 1), baselines, *args)
    assert result.returncode == 2, result.stderr
    assert expected in result.stderr
    assert "Traceback" not in result.stderr


def test_a_missing_current_file_exits_2(tmp_path: Path, baselines: Path) -> None:
    result = canary("compare", tmp_path / "nope.json", baselines)
    assert result.returncode == 2
    assert "does not exist" in result.stderr


def test_the_current_run_may_be_its_run_directory(tmp_path: Path, baselines: Path) -> None:
    run_dir = tmp_path / "runs" / "sft-smoke-1"
    save(run_dir / "metrics.json", 1)
    assert canary("compare", run_dir, baselines).returncode == 0
    empty = tmp_path / "runs" / "empty"
    empty.mkdir()
    result = canary("compare", empty, baselines)
    assert result.returncode == 2
    assert f"{empty} is a folder without a metrics.json" in result.stderr
    assert "pass the run directory `canary run` printed" in result.stderr


def test_compare_and_report_do_not_import_torch(tmp_path: Path, baselines: Path) -> None:
    current = save(tmp_path / "cur.json", 1)
    code = (
        "import sys\n"
        "from canary_action.cli import cli\n"
        "for flags in ([], ['--json']):\n"
        "    try:\n"
        "        cli.main(['compare', sys.argv[1], sys.argv[2], *flags], standalone_mode=False)\n"
        "    except SystemExit:\n"
        "        pass\n"
        "heavy = [m for m in ('torch', 'transformers', 'trl', 'numpy') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, str(current), str(baselines)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr


BAD_BASELINES = Path(__file__).parents[1] / "fixtures" / "baselines"


@pytest.mark.parametrize(
    ("fixture", "expected"),
    [
        ("corrupt.json", "is not valid JSON"),
        ("wrong_version.json", "has schema_version 99"),
        ("not_object.json", "expected a JSON object"),
        ("other_config.json", "is from config 'dpo-smoke'"),
        ("legacy_bad.json", "perf.step_time"),
        ("failed_run.json", "failed run"),
        ("empty_dir", "no baseline found"),
    ],
)
def test_every_bad_baseline_exits_2_with_one_message(tmp_path: Path, fixture: str, expected: str) -> None:
    result = canary(
        "compare", save(tmp_path / "cur.json", 1, run={"config_name": "sft-smoke"}), BAD_BASELINES / fixture
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert expected in result.stderr
    assert result.stderr.count("fix:") == 1
    assert "Traceback" not in result.stderr
    assert result.stdout == ""


def test_an_rlhf_canary_0_1_baseline_is_read(tmp_path: Path) -> None:
    same_workload = {
        "model_name": "EleutherAI/pythia-70m", "dataset_name": "Anthropic/hh-rlhf", "batch_size": 2,
        "gradient_accumulation_steps": 4, "max_length": 256,
    }  # fmt: skip
    a10g = {"gpus": [{"index": 0, "name": "NVIDIA A10G", "memory_total_mib": 23028.0}]}
    current = save(tmp_path / "cur.json", 1, config=same_workload, env=a10g)
    result = canary("compare", current, BAD_BASELINES / "legacy_0_1.json", "--json")
    assert result.returncode in (0, 1), result.stderr
    doc = json.loads(result.stdout)
    assert doc["baselines"][0]["format"] == "rlhf-canary-0.1"
    checks = {c["name"]: c for c in doc["checks"]}
    assert checks["step_time"]["status"] in ("pass", "fail", "warn")
    assert checks["tokens_per_sec"]["status"] == "skip"
    assert any("0.1" in note for note in doc["notes"])


def test_a_t4_0_1_baseline_against_a_cpu_run_is_not_comparable_and_exits_0(tmp_path: Path) -> None:
    # Issue 12: this pair was "comparable, no differences" and failed step_time at +1573 %.
    doc = json.loads((BAD_BASELINES / "legacy_0_1.json").read_text(encoding="utf-8"))
    doc["env"].update(gpu_name="Tesla T4", gpu_memory_gb=14.58)
    t4 = tmp_path / "t4.json"
    t4.write_text(json.dumps(doc), encoding="utf-8")
    same_workload = {
        "model_name": "EleutherAI/pythia-70m", "dataset_name": "Anthropic/hh-rlhf", "batch_size": 2,
        "gradient_accumulation_steps": 4, "max_length": 256,
    }  # fmt: skip
    cpu = {"gpus": [], "gpu_count": 0, "cuda": None, "nccl": None, "gpu_driver": None}
    current = save(tmp_path / "cur.json", 1, config=same_workload, env=cpu, workload={"device": "cpu", "dtype": "fp32"})
    result = canary("compare", current, t4)
    assert result.returncode == 0, result.stderr
    assert "rlhf-canary NEUTRAL" in result.stdout
    assert "not comparable with the baseline (device cuda → cpu)" in result.stdout
    assert re.search(r"(?m)^step_time +not-comparable +— +— +— +—$", result.stdout)
