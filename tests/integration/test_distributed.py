"""Two-process canaries on the CPU (gloo DDP), end to end through `canary run` as a user calls it.

Three runs of configs/tiny/ddp.yaml, each shared by the tests that read it (about 50 s together on two cores):
a plain run, a planted straggler on rank 1, and a planted crash.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from canary_action.metrics import schema as m
from canary_action.metrics.io import read_metrics
from tests.factories import NO_HELDOUT

pytestmark = pytest.mark.training

ROOT = Path(__file__).parents[2]
DDP = ROOT / "configs" / "tiny" / "ddp.yaml"
STEPS = 20


def canary_run(
    directory: Path, *overrides: str, steps: int = STEPS, heldout: bool = False
) -> tuple[subprocess.CompletedProcess[str], m.Metrics]:
    # device=cpu: the gloo path, also where a GPU is visible (ddp.yaml would take two GPUs there).
    quiet = () if heldout else NO_HELDOUT[1:]
    sets = [arg for override in (f"max_steps={steps}", "device=cpu", *overrides, *quiet) for arg in ("--set", override)]
    cli = [sys.executable, "-c", "from canary_action.cli import main; main()"]
    command = [*cli, "run", str(DDP), "-o", str(directory)]
    done = subprocess.run([*command, *sets], capture_output=True, text=True, cwd=ROOT, timeout=600, check=False)
    [path] = directory.glob("*/metrics.json")  # one metrics.json for the whole run, whatever happened
    return done, read_metrics(path)


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], m.Metrics]:
    return canary_run(tmp_path_factory.mktemp("plain"), heldout=True)


@pytest.fixture(scope="module")
def straggler(tmp_path_factory: pytest.TempPathFactory) -> m.Metrics:
    done, metrics = canary_run(
        tmp_path_factory.mktemp("straggler"), "fault_injection.slow_rank=1", "fault_injection.slow_rank_sleep_s=0.05"
    )
    assert done.returncode == 0, done.stderr
    return metrics


def test_two_ranks_merge_into_one_metrics_json(plain: tuple[subprocess.CompletedProcess[str], m.Metrics]) -> None:
    done, metrics = plain
    assert done.returncode == 0, done.stderr
    assert metrics.status.state == "completed"
    # Issue 32: rank 0 saved the weights; the launcher's evaluator scored them (one evaluation for the run).
    assert metrics.heldout is not None
    assert (metrics.heldout.status, metrics.heldout.metric) == ("evaluated", "next_token"), metrics.heldout
    assert metrics.series[m.STEP] == [float(s) for s in range(1, STEPS + 1)]
    assert metrics.summary is not None
    assert metrics.summary.num_steps == STEPS
    assert metrics.workload is not None
    assert metrics.workload.device == "cpu"
    assert metrics.config["num_processes"] == 2
    assert metrics.config["distributed"]["strategy"] == "ddp"
    dist = metrics.distributed
    assert dist is not None
    assert (dist.world_size, dist.strategy, dist.backend) == (2, "ddp", "gloo")
    assert [r.rank for r in dist.ranks] == [0, 1]
    assert "processes       2 (ddp, gloo)" in done.stdout


def test_every_rank_has_its_columns_and_measured_communication(
    plain: tuple[subprocess.CompletedProcess[str], m.Metrics],
) -> None:
    _, metrics = plain
    for rank in (0, 1):
        for what in ("compute_s", "comm_s"):
            column = metrics.series[f"{m.RANK_PREFIX}{rank}/{what}"]
            assert len(column) == STEPS
            assert all(v is not None and math.isfinite(v) and v > 0 for v in column), (rank, what)
    assert metrics.distributed is not None
    for summary in metrics.distributed.ranks:
        assert summary.comm_median_s is not None
        assert summary.comm_median_s > 0
        assert summary.compute_median_s is not None
        assert summary.step_time_median_s is not None
        assert summary.compute_median_s < summary.step_time_median_s
        assert summary.host_rss_peak_mib is not None
    assert metrics.distributed.comm_share is not None
    assert not [w for w in metrics.measurement_warnings if "communication time not measured" in w]


def test_a_planted_straggler_is_the_slowest_rank_and_the_others_wait_for_it(straggler: m.Metrics) -> None:
    dist = straggler.distributed
    assert dist is not None
    assert dist.slowest_rank == 1
    assert dist.rank_imbalance_pct is not None
    # 50 ms asleep on ~60-90 ms of compute: +59 % on a quiet machine, 42 % with four CPU-bound neighbours (rank
    # 0's own compute grows with the load, the sleep does not); the check's limit is 10 %.
    assert dist.rank_imbalance_pct > 25
    rank0, rank1 = dist.ranks
    assert rank0.comm_median_s is not None
    assert rank1.comm_median_s is not None
    assert rank0.comm_median_s > rank1.comm_median_s + 0.025  # rank 0 spends rank 1's sleep in the all-reduce
    assert straggler.config["fault_injection"]["slow_rank"] == 1


def test_a_crash_still_writes_metrics_and_exits_3(tmp_path: Path) -> None:
    done, metrics = canary_run(tmp_path, "fault_injection.crash_at_step=2", steps=4)

    assert done.returncode == 3, done.stderr
    assert "PlantedCrashError during train" in done.stderr
    assert "Traceback" not in done.stderr.split("canary training failed")[-1]
    assert (metrics.status.state, metrics.status.stage, metrics.status.step) == ("failed", "train", 2)
    assert metrics.status.exception_type == "PlantedCrashError"
    assert metrics.series[m.STEP] == [1.0]  # the step measured before the crash survives
    assert metrics.distributed is not None
    assert metrics.distributed.world_size == 2
    run_dir = next(tmp_path.glob("*/metrics.json")).parent
    assert (run_dir / "error.log").read_text().startswith("Traceback")


def test_compare_finds_the_straggler_as_imbalance_with_communication_first(
    plain: tuple[subprocess.CompletedProcess[str], m.Metrics], straggler: m.Metrics, tmp_path: Path
) -> None:
    """The gate end to end: the plain run is the baseline, the straggler the pull request."""
    from canary_action.metrics.io import write_metrics

    write_metrics(plain[1], tmp_path / "baseline.json")
    write_metrics(straggler, tmp_path / "current.json")
    cli = [sys.executable, "-c", "from canary_action.cli import main; main()"]
    command = [*cli, "compare", str(tmp_path / "current.json"), str(tmp_path / "baseline.json"), "--json"]
    done = subprocess.run([*command, "--threshold-tier", "smoke"], capture_output=True, text=True, check=False)
    assert done.returncode == 1, done.stderr
    result = json.loads(done.stdout)
    imbalance = next(c for c in result["checks"] if c["name"] == "rank_imbalance")
    assert imbalance["status"] == "fail"
    top = result["suspects"][0]
    assert top["category"] == "communication"
    assert top["evidence"][0].startswith("rank 1's compute")
