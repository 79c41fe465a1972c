"""The gpu_time check, the step's host/GPU split and the suspects that read it, on recorded CUDA runs.

The step times are real (an H200, tests/fixtures/cuda/README.md); the GPU busy series is added to copies with a
planted change, as the README says: GPU-only slowdowns that step time hides, a host-only slowdown with the
kernels unchanged, and a GPU-bound slowdown that both see (one cause, one failure).
"""

from __future__ import annotations

import json
import math
import random
import shutil
from pathlib import Path
from typing import Any

import pytest

from canary_action.compare.command import run_compare
from canary_action.compare.result import Check, CompareResult
from canary_action.metrics import schema as m
from canary_action.metrics.summarize import summarize
from canary_action.report.render import check_output, render
from canary_action.report.terminal import render_terminal

H200 = Path(__file__).parents[1] / "fixtures" / "cuda" / "h200-2026-11-26"
RUNS = sorted(H200.glob("p70__*.metrics.json"))
GPU_S = 0.1358 / 5  # the profiled run: 135.8 ms of device time over its 5 window steps
KERNELS = 5142.0  # its device-op calls per step


def with_gpu(source: Path, dest: Path, *, factor: float = 1.0, seed: int = 0, share: float | None = None) -> Path:
    """A copy of a recorded metrics.json with a GPU busy series: GPU_S (or `share` of each step) x `factor`,
    1 % noise per step."""
    data: dict[str, Any] = json.loads(source.read_text(encoding="utf-8"))
    rng = random.Random(seed)
    times = data["series"][m.STEP_TIME_S]
    busy = [
        None if t is None else (share * t if share is not None else GPU_S) * factor * math.exp(rng.gauss(0, 0.01))
        for t in times
    ]
    data["series"][m.GPU_BUSY_S] = busy
    data["series"][m.NUM_GPU_KERNELS] = [KERNELS if b is not None else None for b in busy]
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(json.dumps(data), encoding="utf-8")
    return dest


def pair_dir(
    tmp: Path, label: str, *, head_factor: float = 1.0, step_factor: float = 1.0, share: float | None = None
) -> Path:
    """A recorded pair (aa or p10) as `canary pair` wrote it, each side with a GPU series; the head's GPU series
    x `head_factor`, its step times x `step_factor`."""
    [record] = H200.glob(f"pairs__{label}__*__pair.json")
    stem = record.name.removesuffix("__pair.json")
    folder = tmp / label
    folder.mkdir(parents=True)
    shutil.copy(record, folder / "pair.json")
    for side, factor, seed in (("base", 1.0, 1), ("head", head_factor, 2)):
        source = H200 / f"{stem}__{side}__metrics.json"
        copy = with_gpu(source, folder / side / "metrics.json", factor=factor, seed=seed, share=share)
        if step_factor != 1.0 and side == "head":
            data = json.loads(copy.read_text(encoding="utf-8"))
            data["series"][m.STEP_TIME_S] = [
                t * step_factor if t is not None else None for t in data["series"][m.STEP_TIME_S]
            ]
            summary = summarize(data["series"], warmup=data["summary"]["warmup_steps"], profiler_steps=None)
            data["summary"] = summary.model_dump(mode="json")  # derived again from the series, at the same cut
            copy.write_text(json.dumps(data), encoding="utf-8")
    return folder


def checks(result: CompareResult) -> dict[str, Check]:
    return {c.name: c for c in result.checks}


def test_a_gpu_only_slowdown_fails_gpu_time_while_step_time_stays_inside_its_limit(tmp_path: Path) -> None:
    """Separate runs: three recorded H200 runs, the current one's kernels 20 % slower. Its step times are the
    recorded ones (the GPU is a tenth of a host-bound step): step_time cannot see it, gpu_time does."""
    baselines = [with_gpu(path, tmp_path / f"base{i}.json", seed=i) for i, path in enumerate(RUNS[:2])]
    current = with_gpu(RUNS[2], tmp_path / "current.json", factor=1.20, seed=9)
    result = run_compare(current, baselines, tier="smoke")
    by_name = checks(result)
    gpu, step = by_name["gpu_time"], by_name["step_time"]
    assert gpu.status == "fail", gpu.message
    assert gpu.delta_pct == pytest.approx(20, abs=2)
    assert gpu.message.startswith("GPU busy time per step +")
    assert step.status == "pass", step.message
    assert result.verdict == "regression"
    first = result.suspects[0]
    assert first.category == "kernel"
    assert "a kernel regression diluted by host overhead" in first.summary
    assert result.step_split is not None
    assert result.step_split.gpu_s / result.step_split.step_s < 0.2


def test_the_same_runs_without_a_change_pass_gpu_time(tmp_path: Path) -> None:
    baselines = [with_gpu(path, tmp_path / f"base{i}.json", seed=i) for i, path in enumerate(RUNS[:2])]
    current = with_gpu(RUNS[2], tmp_path / "current.json", seed=9)
    assert checks(run_compare(current, baselines, tier="smoke"))["gpu_time"].status == "pass"


def test_a_pair_judges_gpu_time_round_by_round_by_its_own_precision(tmp_path: Path) -> None:
    """The recorded A/A pair, the head's kernels 20 % slower: paired, the minimum-effect rule; step time, from the
    real A/A pair, passes."""
    result = run_compare(pair_dir(tmp_path, "aa", head_factor=1.20), [])
    by_name = checks(result)
    assert result.pairing is not None
    assert by_name["gpu_time"].status == "fail", by_name["gpu_time"].message
    assert "minimum effect" in by_name["gpu_time"].message
    assert by_name["step_time"].status == "pass", by_name["step_time"].message
    same = checks(run_compare(pair_dir(tmp_path / "again", "aa"), []))
    assert same["gpu_time"].status == "pass", same["gpu_time"].message


def test_a_host_slowdown_with_unchanged_kernels_is_named_host_overhead(tmp_path: Path) -> None:
    """The recorded +10 % pair (step times real), its GPU series unchanged: the host grew, not the kernels."""
    result = run_compare(pair_dir(tmp_path, "p10"), [])
    by_name = checks(result)
    assert by_name["step_time"].status == "fail", by_name["step_time"].message
    assert by_name["gpu_time"].status == "pass", by_name["gpu_time"].message
    host = next(s for s in result.suspects if s.category == "host")
    assert host.summary.startswith("host overhead grew (")
    assert "GPU kernels unchanged" in host.summary
    assert "kernel" not in [s.category for s in result.suspects[:1]]


def test_one_gpu_bound_slowdown_fails_once(tmp_path: Path) -> None:
    """A GPU-bound step (the GPU busy 90 % of it) 20 % slower: both checks see it; the GPU's growth is the step's,
    so step_time warns, restating gpu_time."""
    result = run_compare(pair_dir(tmp_path, "aa", head_factor=1.20, step_factor=1.20, share=0.9), [])
    by_name = checks(result)
    assert by_name["gpu_time"].status == "fail"
    assert by_name["step_time"].status == "warn"
    assert "the same cause as the gpu_time failure" in by_name["step_time"].message
    assert [c.name for c in result.checks if c.status == "fail"] == ["gpu_time"]


def test_a_cuda_run_that_did_not_time_the_gpu_says_so_and_a_cpu_run_has_no_row(tmp_path: Path) -> None:
    result = run_compare(RUNS[2], RUNS[:2], tier="smoke")  # recorded before the canary timed the GPU
    gpu = checks(result)["gpu_time"]
    assert (gpu.status, gpu.fix) == ("skip", None)
    assert "not recorded" in gpu.message
    assert result.step_split is None
    from canary_action.compare.verdict import compare
    from canary_action.config.thresholds import TIERS
    from tests.unit.test_host_memory import cpu_run

    assert "gpu_time" not in checks(compare(cpu_run(1), [cpu_run(2)], TIERS["default"]))


def test_every_report_shows_the_host_gpu_split(tmp_path: Path) -> None:
    baselines = [with_gpu(path, tmp_path / f"base{i}.json", seed=i) for i, path in enumerate(RUNS[:2])]
    result = run_compare(with_gpu(RUNS[2], tmp_path / "current.json", factor=1.20, seed=9), baselines, tier="smoke")
    for kind in ("comment", "summary", "markdown"):
        assert "Step split (steady medians): host " in render(result, kind), kind  # type: ignore[arg-type]
    assert "Step split (steady medians): host " in check_output(result)["summary"]
    assert "Step split (steady medians): host " in render_terminal(result)
    assert result.model_dump(mode="json")["step_split"]["gpu_s"] > 0


def test_zero_step_times_split_nothing_and_crash_nothing(tmp_path: Path) -> None:
    """A metrics.json (an artifact's, say) whose steps took no time has no host/GPU split to show."""
    current = with_gpu(RUNS[2], tmp_path / "current.json")
    data = json.loads(current.read_text(encoding="utf-8"))
    data["series"][m.STEP_TIME_S] = [0.0 for _ in data["series"][m.STEP_TIME_S]]
    current.write_text(json.dumps(data), encoding="utf-8")
    result = run_compare(current, [with_gpu(RUNS[0], tmp_path / "base.json")], tier="smoke")
    assert result.step_split is None
    assert "Step split" not in render(result, "comment")
