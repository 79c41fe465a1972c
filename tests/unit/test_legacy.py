"""rlhf-canary 0.1 metrics.json as a baseline: every mapped field, and refusals with a cause and a fix."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from canary_action.compare.legacy import config_name_of, is_legacy, read_legacy
from canary_action.compare.runs import RunData
from canary_action.errors import BaselineError
from canary_action.metrics.schema import GPUInfo, ProfiledOp
from tests.strategies import mutate_somewhere

FIXTURE = Path(__file__).parents[1] / "fixtures" / "baselines" / "legacy_0_1.json"


def legacy_doc(**changes: Any) -> dict[str, Any]:
    """The fixture's document; `perf__dataloader_wait_pct=None` sets a nested key."""
    doc: dict[str, Any] = json.loads(FIXTURE.read_text(encoding="utf-8"))
    for dotted, value in changes.items():
        *parents, key = dotted.split("__")
        node = doc
        for part in parents:
            node = node[part]
        node[key] = value
    return doc


def read(doc: dict[str, Any], path: Path = FIXTURE) -> tuple[RunData, list[str]]:
    return read_legacy(path, doc)


def refusal(doc: dict[str, Any]) -> str:
    with pytest.raises(BaselineError) as caught:
        read(doc)
    message = caught.value.render()
    assert str(FIXTURE) in message
    assert "\n  fix: " in message
    return message


def test_every_mapped_field() -> None:
    doc = legacy_doc()
    run, notes = read(doc)
    perf, timing = doc["perf"], doc["perf"]["step_time"]
    scale = 1 + perf["dataloader_wait_pct"] / 100
    assert run.source == str(FIXTURE)
    assert run.format == "rlhf-canary-0.1"
    assert run.run_id == doc["run_id"]
    assert run.config_name == "dpo_perf"  # from the run id: 0.1's config block has no name
    assert (run.config_hash, run.git_sha, run.workload) == (None, None, None)
    assert run.started_at == "2025-01-05T14:30:00.123456"  # local time, kept as written
    assert run.status.state == "completed"
    assert run.config == doc["config"]
    assert run.num_steps == 1000
    assert run.steady_step_times is None
    assert run.steady_tokens is None
    assert run.step_time_median == pytest.approx(timing["median"] * scale)
    assert run.step_time_mean == pytest.approx(timing["mean"] * scale)
    assert run.first_step_time_s is None
    assert run.tokens_per_s == perf["approx_tokens_per_sec"]
    assert run.tokens_per_s_measured is False
    assert run.peak_allocated_mib == 3456.72
    assert run.peak_reserved_mib is None
    assert run.gpu_utilization_pct == 87.3
    assert run.data_wait_share == pytest.approx(0.032 / 1.032)
    assert run.generation_share is None
    assert (run.num_nan_steps, run.num_inf_steps) == (0, 0)
    assert (run.divergence_step, run.first_non_finite_step, run.num_grad_norm_spikes) == (None, None, None)
    assert (run.loss_steps, run.losses, run.final_loss, run.tail_mean_loss) == ([], [], None, None)
    assert (run.step_times, run.data_wait, run.algo) == ([], [], {})
    assert run.profiler_steps is None
    assert run.ref().gpu == "NVIDIA A10G"
    assert notes == []


def test_environment() -> None:
    env = read(legacy_doc())[0].env
    assert env.python == "3.11.10"
    assert env.platform == "Linux-6.8.0-1019-aws"
    assert env.canary == "0.1"
    assert env.torch == "2.5.1+cu124"
    assert env.cuda == "12.4"
    assert (env.transformers, env.trl) == ("4.47.1", "0.13.0")
    assert env.gpu_count == 1
    assert env.gpus == [GPUInfo(index=0, name="NVIDIA A10G", memory_total_mib=22.49 * 1024)]
    assert env.fingerprint_hash == "e327a600"


def test_several_gpus_are_taken_to_be_alike() -> None:
    env = read(legacy_doc(env__gpu_count=2))[0].env
    assert [(g.index, g.name) for g in env.gpus] == [(0, "NVIDIA A10G"), (1, "NVIDIA A10G")]


def test_a_cpu_run() -> None:
    doc = legacy_doc(env__cuda_available=False, env__cuda_version=None, env__gpu_name=None, env__gpu_count=0)
    doc["env"].update(gpu_memory_gb=None, torch_version="N/A")
    doc["perf"].update(max_mem_mb=0.0, gpu_utilization_avg=None)
    run = read(doc)[0]
    assert run.peak_allocated_mib is None  # 0.1 wrote 0.0: nothing was measured
    assert run.gpu_utilization_pct is None
    assert (run.env.gpus, run.env.torch, run.env.cuda) == ([], None, None)


def test_without_a_wait_share_the_step_time_is_taken_as_written() -> None:
    doc = legacy_doc(perf__dataloader_wait_pct=None)
    run, notes = read(doc)
    assert run.step_time_median == doc["perf"]["step_time"]["median"]
    assert run.data_wait_share is None
    assert len(notes) == 1
    assert "left out the batch fetch" in notes[0]


def test_absent_optional_perf_keys() -> None:
    doc = legacy_doc()
    del doc["perf"]["gpu_utilization_avg"], doc["perf"]["dataloader_wait_pct"]
    run = read(doc)[0]
    assert (run.gpu_utilization_pct, run.data_wait_share) == (None, None)


def test_median_falls_back_to_p50_and_no_steps_means_no_time() -> None:
    assert (
        read(legacy_doc(perf__step_time__median=None, perf__dataloader_wait_pct=0.0))[0].step_time_median
        == (legacy_doc()["perf"]["step_time"]["p50"])
    )
    empty = dict.fromkeys(["mean", "median", "p50", "p95", "p99", "min", "max", "std"]) | {"count": 0}
    run = read(legacy_doc(perf__step_time=empty, status="timeout"))[0]
    assert (run.step_time_median, run.step_time_mean, run.num_steps) == (None, None, 0)


@pytest.mark.parametrize(
    ("status", "state", "reason"), [("completed", "completed", None), ("timeout", "stopped_early", "timeout"),
                                    ("failed", "failed", None)],
)  # fmt: skip
def test_status(status: str, state: str, reason: str | None) -> None:
    run = read(legacy_doc(status=status))[0]
    assert (run.status.state, run.status.reason) == (state, reason)


def test_profiler_ops_are_merged_by_name() -> None:
    profile = read(legacy_doc())[0].profiler
    assert profile is not None
    ops = {op.name: op for op in profile.top_ops}
    assert ops["aten::mm"] == ProfiledOp(
        name="aten::mm", count=9120, cpu_self_time_ms=620.4, device_self_time_ms=2841.2
    )
    assert ops["aten::copy_"].device_self_time_ms == 0.0  # only in the CPU list
    assert ops["aten::addmm"].cpu_self_time_ms == 0.0  # only in the CUDA list
    assert len(ops) == 8
    assert profile.top_ops[0].name == "aten::mm"  # by device time
    assert profile.device_time_total_ms == 7312.4  # self times: ours exactly
    assert profile.cpu_time_total_ms == pytest.approx(1944.0 + 620.4 + 588.1 + 97.2)
    assert (profile.start_step, profile.end_step) == (0, 0)
    assert profile.trace_path is not None


def test_no_profile_and_a_failed_profile() -> None:
    assert read(legacy_doc(profiler=None))[0].profiler is None
    failed = {"trace_path": None, "cuda_time_total_ms": 0.0, "cpu_time_total_ms": 0.0,
              "self_cuda_time_total_ms": 0.0, "top_cuda_ops": [], "top_cpu_ops": []}  # fmt: skip
    assert read(legacy_doc(profiler=failed))[0].profiler is None


@pytest.mark.parametrize(
    ("run_id", "name"),
    [("dpo_smoke_1736087400_ab12cd34", "dpo_smoke"), ("x_1_00000000", "x"), ("nightly", ""), ("a_1_XYZ", "")],
)
def test_config_name_from_the_run_id(run_id: str, name: str) -> None:
    assert config_name_of(run_id) == name


def test_is_legacy() -> None:
    assert is_legacy(legacy_doc())
    assert not is_legacy({**legacy_doc(), "schema_version": 1})
    assert not is_legacy({"run_id": "x", "perf": {}})
    assert not is_legacy([legacy_doc()])


def test_a_missing_key() -> None:
    doc = legacy_doc()
    del doc["perf"]["step_time"]
    message = refusal(doc)
    assert "looks like an rlhf-canary 0.1 metrics.json" in message
    assert "\n  - perf.step_time: Field required" in message


@pytest.mark.parametrize(
    ("change", "where"),
    [
        ({"perf__step_time__count": "990"}, "perf.step_time.count"),  # strict: no strings for numbers
        ({"env__cuda_available": 1}, "env.cuda_available"),
        ({"perf__max_mem_mb": -1.0}, "perf.max_mem_mb"),
        ({"status": "crashed"}, "status"),
        ({"timestamp": "yesterday"}, "timestamp"),
        ({"env__gpu_count": 10**9}, "env.gpu_count"),  # one GPUInfo per GPU: bounded
        ({"stability__loss_values": [0.5] * 101}, "stability.loss_values"),
        ({"perf__surprise": 1}, "perf.surprise"),
    ],
)
def test_refused_values(change: dict[str, Any], where: str) -> None:
    assert f"\n  - {where}: " in refusal(legacy_doc(**change))


def test_many_errors_are_cut_short_and_keys_cannot_forge_log_lines() -> None:
    doc = legacy_doc()
    doc.update({f"x{i}\n::error::": i for i in range(7)})
    message = refusal(doc)
    assert "7 errors" in message
    assert "... and 2 more" in message
    assert "\n::error" not in message


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_mutated_document_is_read_or_refused(data: st.DataObject) -> None:
    doc = legacy_doc()
    mutate_somewhere(doc, data)
    try:
        outcome = read(copy.deepcopy(doc))[0].format
    except BaselineError as e:
        outcome = e.render()
    assert outcome == "rlhf-canary-0.1" or "\n  fix: " in outcome
