"""Root-cause ranking: planted causes come out first, with the measurements that point at them."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from canary_action.compare.diff import config_changes, env_changes, op_changes
from canary_action.compare.result import Check, CheckGroup, CheckStatus, Suspect
from canary_action.compare.runs import RunData, from_metrics
from canary_action.compare.suspects import MAX_SUSPECTS, rank_suspects
from canary_action.config.load import parse_config
from canary_action.metrics import schema
from canary_action.metrics.schema import NonFiniteEvent, ProfiledOp, ProfilerSummary, Stability
from tests.factories import make_metrics, make_series

STEPS = 40
GROUPS: dict[str, CheckGroup] = {"max_memory": "memory", "max_memory_reserved": "memory", "run_status": "stability",
                                 "nan_steps": "stability", "loss_curve": "learning"}  # fmt: skip


def run(
    seed: int,
    *,
    wait: float = 0.0,
    compute: float = 0.0,
    config: Mapping[str, Any] | None = None,
    env: Mapping[str, Any] | None = None,
    columns: Mapping[str, Sequence[float | None]] | None = None,
    **overrides: Any,
) -> RunData:
    """A 40-step run; `wait`/`compute` seconds added to every step after the first."""
    series = make_series(STEPS, seed=seed)
    series[schema.STEP_TIME_S] = _shift(series[schema.STEP_TIME_S], wait + compute)
    series[schema.DATA_WAIT_S] = _shift(series[schema.DATA_WAIT_S], wait)
    series.update({name: list(values) for name, values in (columns or {}).items()})
    metrics = make_metrics(
        num_steps=STEPS,
        seed=seed,
        series=series,
        config={"seed": 0, **(config or {})},  # one seed for all, or it shows as a changed key
        env=env or {},
        workload={"dataset_fingerprint": "same-examples"},
        **overrides,
    )
    return from_metrics(metrics, f"run-{seed}.json")


def _shift(values: list[float | None], by: float) -> list[float | None]:
    return [v if i == 0 or v is None else v + by for i, v in enumerate(values)]


def check(name: str, status: CheckStatus = "fail", unit: str = "") -> Check:
    return Check(name=name, group=GROUPS.get(name, "perf"), status=status, unit=unit, message=f"{name} moved")


def rank(current: RunData, baselines: Sequence[RunData], checks: Sequence[Check]) -> list[Suspect]:
    newest = baselines[0]
    ops = op_changes(newest.profiler, newest.profiler_steps, current.profiler, current.profiler_steps)
    suspects = rank_suspects(
        current,
        baselines,
        checks,
        env_changes(newest.env, current.env),
        config_changes(newest.config, current.config),
        ops,
    )
    _assert_well_formed(suspects, checks)
    return suspects


def _assert_well_formed(suspects: Sequence[Suspect], checks: Sequence[Check]) -> None:
    flagged = {c.name for c in checks if c.status in {"fail", "warn"}}
    assert len(suspects) <= MAX_SUSPECTS
    assert len({s.category for s in suspects}) == len(suspects)
    for s in suspects:
        assert 0 <= s.confidence <= 1
        assert s.summary
        assert s.evidence
        assert 2 <= len(s.next_steps) <= 3
        assert set(s.explains) <= flagged


def categories(suspects: Sequence[Suspect]) -> list[str]:
    return [s.category for s in suspects]


def find(suspects: Sequence[Suspect], category: str) -> Suspect:
    return next(s for s in suspects if s.category == category)


BASELINES = [run(s) for s in (1, 2, 3)]
SLOW = [check("step_time", unit="s"), check("tokens_per_sec", unit="tok/s")]


def test_no_suspects_without_a_failing_or_warning_check() -> None:
    current = run(4, wait=0.04, env={"torch": "2.14.0"}, config={"gradient_checkpointing": True})
    checks = [check("step_time", "pass"), check("max_memory", "skip"), check("loss_curve", "not-comparable")]
    assert rank(current, BASELINES, checks) == []


def test_a_data_wait_slowdown_ranks_the_dataloader_first_with_its_share() -> None:
    suspects = rank(run(4, wait=0.037), BASELINES, SLOW)
    top = suspects[0]
    assert top.category == "dataloader"
    assert top.confidence > 0.7
    line = next(e for e in top.evidence if "data wait" in e)
    share = re.search(r"explains (\d+) %", line)
    assert share is not None
    assert int(share.group(1)) >= 90
    assert set(top.explains) == {"step_time", "tokens_per_sec"}
    assert "kernel" not in categories(suspects)  # compute did not move


def test_a_planted_slow_data_pipeline_leads_with_the_measured_wait_not_the_key() -> None:
    # The root-cause tutorial's dataloader bottleneck: the fault's config key is weaker evidence than the data
    # wait it caused, which names the mechanism.
    unplanted = {"fault_injection": {"slow_data_s_per_step": 0.0}}
    baselines = [run(s, config=unplanted) for s in (1, 2, 3)]
    planted = run(4, wait=0.3, config={"fault_injection": {"slow_data_s_per_step": 0.3}})
    suspects = rank(planted, baselines, SLOW)
    assert [s.category for s in suspects[:2]] == ["dataloader", "config"]
    assert "slow_data_s_per_step" in suspects[1].summary


def test_gradient_checkpointing_turned_on_ranks_config_first() -> None:
    baselines = [run(s, config={"gradient_checkpointing": False}) for s in (1, 2, 3)]
    current = run(4, compute=0.03, config={"gradient_checkpointing": True})
    top = rank(current, baselines, SLOW)[0]
    assert top.category == "config"
    assert "gradient_checkpointing" in top.summary
    assert "turned on" in top.summary
    assert "gradient_checkpointing false → true" in top.evidence
    assert "step_time" in top.explains


def test_a_torch_bump_with_compute_growth_names_the_versions() -> None:
    baselines = [run(s, env={"torch": "2.12.0+cu128"}) for s in (1, 2, 3)]
    current = run(4, compute=0.03, env={"torch": "2.13.0+cu128"})
    suspects = rank(current, baselines, SLOW)
    assert suspects[0].category in {"dependency", "kernel"}
    assert {"dependency", "kernel"} <= set(categories(suspects[:2]))
    for s in suspects[:2]:
        assert "torch 2.12.0+cu128 → 2.13.0+cu128" in s.evidence
    assert any("torch==2.12.0+cu128" in step for step in find(suspects, "dependency").next_steps)
    assert any("compute" in e for e in find(suspects, "kernel").evidence)


def profiled(mm_ms: float) -> ProfilerSummary:
    ops = [
        ProfiledOp(name="aten::mm", count=500, cpu_self_time_ms=20.0, device_self_time_ms=mm_ms),
        ProfiledOp(name="aten::add", count=500, cpu_self_time_ms=5.0, device_self_time_ms=40.0),
    ]
    return ProfilerSummary(
        trace_path="trace.json", start_step=30, end_step=34, cpu_time_total_ms=25.0,
        device_time_total_ms=mm_ms + 40.0, top_ops=ops,
    )  # fmt: skip


def test_profiled_op_growth_names_the_op() -> None:
    baselines = [run(s, profiler=profiled(200.0)) for s in (1, 2, 3)]
    current = run(4, compute=0.03, profiler=profiled(325.0))  # +25 ms per profiled step
    top = rank(current, baselines, SLOW)[0]
    assert top.category == "kernel"
    assert "aten::mm" in top.summary
    assert any("aten::mm" in e and "+25.00 ms/step" in e for e in top.evidence)
    assert not any("aten::add" in e for e in top.evidence)  # unchanged


def test_a_nan_run_ranks_numerics_first_whatever_else_moved() -> None:
    baselines = [run(s, env={"torch": "2.12.0"}, config={"dtype": "bf16"}) for s in (1, 2, 3)]
    events = [
        NonFiniteEvent(step=17, source="loss", key="loss", value="nan"),
        NonFiniteEvent(step=17, source="grad", key="gradients", value="nan"),
    ]
    current = run(
        4,
        compute=0.05,
        env={"torch": "2.13.0"},
        config={"dtype": "fp16"},
        stability=Stability(non_finite=events, num_nan_steps=1),
        status={"state": "stopped_early", "reason": "non_finite", "step": 17},
    )
    checks = [*SLOW, check("nan_steps", unit="steps"), check("loss_curve", "warn", unit="loss")]
    suspects = rank(current, baselines, checks)
    top = suspects[0]
    assert top.category == "numerics"
    assert any("step 17" in e and "loss" in e and "gradients" in e for e in top.evidence)
    assert "dtype bf16 → fp16" in top.evidence
    assert {"nan_steps", "loss_curve"} <= set(top.explains)


def test_reserved_growing_far_beyond_allocated_points_at_the_allocator() -> None:
    reserved = [2048.0 + (256.0 if i else 0.0) + 1500.0 for i in range(STEPS)]
    current = run(4, columns={schema.PEAK_RESERVED_MIB: reserved})
    top = rank(current, BASELINES, [check("max_memory_reserved", unit="MiB")])[0]
    assert top.category == "memory"
    assert "fragmentation" in top.summary
    assert any("reserved" in e and "+1500" in e for e in top.evidence)
    assert any("expandable_segments" in s for s in top.next_steps)


def test_allocated_growth_with_a_larger_batch_blames_the_config_and_memory() -> None:
    baselines = [run(s, config={"batch_size": 2}) for s in (1, 2, 3)]
    allocated = [1800.0 + (150.0 if i else 0.0) + 600.0 for i in range(STEPS)]
    reserved = [2048.0 + (256.0 if i else 0.0) + 640.0 for i in range(STEPS)]
    current = run(
        4,
        config={"batch_size": 4},
        columns={schema.PEAK_ALLOCATED_MIB: allocated, schema.PEAK_RESERVED_MIB: reserved},
    )
    suspects = rank(current, baselines, [check("max_memory", unit="MiB"), check("max_memory_reserved", unit="MiB")])
    assert categories(suspects)[:2] == ["config", "memory"]
    assert "batch_size raised (2 → 4)" in suspects[0].summary
    assert set(suspects[0].explains) == {"max_memory", "max_memory_reserved"}
    memory = find(suspects, "memory")
    assert "fragmentation" not in memory.summary
    assert any("peak allocated" in e and "+600 MiB" in e for e in memory.evidence)


def test_fewer_tokens_from_the_same_data_after_a_tokenizers_bump_is_tokenization() -> None:
    baselines = [run(s, env={"tokenizers": "0.23.3"}) for s in (1, 2, 3)]
    tokens = [0.85 * (t or 0.0) for t in make_series(STEPS, seed=4)[schema.NUM_TOKENS]]
    current = run(4, env={"tokenizers": "0.24.0"}, columns={schema.NUM_TOKENS: tokens})
    suspects = rank(current, baselines, [check("tokens_per_sec", unit="tok/s")])
    top = suspects[0]
    assert top.category == "tokenization"
    assert any("tokens per step" in e and "same data" in e for e in top.evidence)
    assert "tokenizers 0.23.3 → 0.24.0" in top.evidence
    assert "dependency" in categories(suspects)


def test_periodic_stalls_point_at_io() -> None:
    times = make_series(STEPS, seed=4)[schema.STEP_TIME_S]
    stalled = [t + 0.5 if t is not None and (i + 1) % 8 == 0 else t for i, t in enumerate(times)]
    suspects = rank(run(4, columns={schema.STEP_TIME_S: stalled}), BASELINES, [check("step_time", "warn", "s")])
    top = suspects[0]
    assert top.category == "io"
    assert any("over 2× the median" in e for e in top.evidence)
    assert "kernel" not in categories(suspects)  # the stalls sit in compute time: counted once, as io


def test_an_out_of_memory_crash_points_at_memory() -> None:
    status = {"state": "failed", "stage": "train", "step": 3, "exception_type": "OutOfMemoryError",
              "message": "CUDA out of memory. Tried to allocate 2.00 GiB"}  # fmt: skip
    top = rank(run(4, status=status), BASELINES, [check("run_status")])[0]
    assert top.category == "memory"
    assert top.explains == ["run_status"]
    assert any("OutOfMemoryError" in e for e in top.evidence)


def test_a_data_wait_share_check_suffices_when_the_baseline_kept_no_steps() -> None:
    old = [dataclasses.replace(b, steady_step_times=None) for b in BASELINES]  # like rlhf-canary 0.1
    top = rank(run(4, wait=0.03), old, [check("data_wait_share", unit="%")])[0]
    assert top.category == "dataloader"
    assert top.explains == ["data_wait_share"]


def test_unknown_only_when_nothing_has_evidence() -> None:
    suspects = rank(run(4), BASELINES, [check("step_time", unit="s")])
    assert categories(suspects) == ["unknown"]
    assert suspects[0].confidence < 0.5
    assert any("rerun" in s for s in suspects[0].next_steps)
    assert any("profiler.enabled: true" in s for s in suspects[0].next_steps)


def test_many_causes_are_capped_and_sorted_by_confidence() -> None:
    baselines = [run(s, env={"torch": "2.12.0", "trl": "1.15.0"}, config={"max_length": 256}) for s in (1, 2, 3)]
    current = run(
        4, wait=0.02, compute=0.03, env={"torch": "2.13.0", "trl": "1.16.0", "nccl": "2.28.0", "cpu_count": 8},
        config={"max_length": 512, "learning_rate": 1e-3},
        columns={schema.PEAK_RESERVED_MIB: [4000.0] * STEPS},
    )  # fmt: skip
    checks = [*SLOW, check("max_memory_reserved", unit="MiB"), check("loss_curve", "warn", unit="loss")]
    suspects = rank(current, baselines, checks)
    assert len(suspects) == MAX_SUSPECTS
    confidences = [s.confidence for s in suspects]
    assert confidences == sorted(confidences, reverse=True)


@pytest.mark.parametrize("status", ["fail", "warn"])
def test_a_warning_is_explained_like_a_failure(status: CheckStatus) -> None:
    suspects = rank(run(4, wait=0.037), BASELINES, [check("step_time", status, "s")])
    assert suspects[0].category == "dataloader"
    assert suspects[0].explains == ["step_time"]


def test_slower_generation_points_at_the_kernels_and_says_generation() -> None:
    def online(seed: int, extra: float) -> RunData:
        times = _shift(make_series(STEPS, seed=seed)[schema.STEP_TIME_S], extra)
        generation = [0.5 * (t or 0.0) + (extra if i else 0.0) for i, t in enumerate(times)]
        return run(seed, columns={schema.STEP_TIME_S: times, schema.GENERATION_S: generation})

    top = rank(online(4, 0.05), [online(s, 0.0) for s in (1, 2, 3)], SLOW)[0]
    assert top.category == "kernel"
    assert "generation" in top.summary
    assert any(e.startswith("generation per step") for e in top.evidence)


def test_a_changed_gpu_count_points_at_communication() -> None:
    baselines = [run(s, env={"gpu_count": 1, "nccl": "2.27.3"}) for s in (1, 2, 3)]
    current = run(4, compute=0.03, env={"gpu_count": 2, "nccl": "2.28.1"})
    suspects = rank(current, baselines, SLOW)
    communication = find(suspects, "communication")
    assert {"gpu_count 1 → 2", "nccl 2.27.3 → 2.28.1"} <= set(communication.evidence)


@pytest.mark.parametrize(("max_steps", "advice"), [
    (100, "rerun with profiler.enabled: true to see which ops slowed"),
    (50, "rerun with profiler.enabled: true, profiler.start_step: 39, profiler.num_steps: 12 to see which ops slowed"),
])  # fmt: skip
def test_the_profiler_advice_fits_its_window_in_the_run(max_steps: int, advice: str) -> None:
    """A config whose window ends past max_steps is refused: the advice must not lead there."""
    baselines = [dataclasses.replace(b, config={**b.config, "max_steps": max_steps}) for b in BASELINES]
    suspects = rank(run(4, config={"max_steps": max_steps}), baselines, [check("step_time", unit="s")])
    assert advice in suspects[0].next_steps
    if max_steps < 69:
        data = {"name": "t", "training_type": "dpo", "max_steps": max_steps,
                "profiler": {"enabled": True, "start_step": 39, "num_steps": 12}}  # fmt: skip
        assert parse_config(data, source="advice").config.profiler.enabled  # the advice loads
