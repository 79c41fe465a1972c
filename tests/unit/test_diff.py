"""What changed between two runs: environment fields, config keys, profiled ops."""

from __future__ import annotations

import pytest

from canary_action.compare.diff import IGNORED_CONFIG_KEYS, MAX_VALUE_CHARS, config_changes, env_changes, op_changes
from canary_action.metrics.schema import GPUInfo, ProfiledOp, ProfilerSummary
from tests.factories import make_env

H100 = GPUInfo(index=0, name="NVIDIA H100 80GB HBM3", memory_total_mib=81559.0)
A100 = GPUInfo(index=0, name="NVIDIA A100-SXM4-80GB", memory_total_mib=81920.0)


def profile(*ops: tuple[str, float, float], device_total: float | None = None) -> ProfilerSummary:
    """Ops as (name, cpu_self_ms, device_self_ms) over the whole window."""
    top = [ProfiledOp(name=n, count=10, cpu_self_time_ms=c, device_self_time_ms=d) for n, c, d in ops]
    total = sum(d for _, _, d in ops) if device_total is None else device_total
    return ProfilerSummary(
        trace_path=None,
        start_step=10,
        end_step=14,
        cpu_time_total_ms=sum(c for _, c, _ in ops),
        device_time_total_ms=total,
        top_ops=top,
    )


# --- environment ---------------------------------------------------------------------------------------


def test_equal_environments_have_no_changes() -> None:
    assert env_changes(make_env(), make_env()) == []


def test_env_changes_list_libraries_then_hardware_then_the_rest() -> None:
    before = make_env(torch="2.12.0+cu128", python="3.11.9", gpus=[H100], cpu_count=16)
    after = make_env(torch="2.13.0+cu128", python="3.12.4", gpus=[A100], cpu_count=32)
    changes = env_changes(before, after)
    assert [c.field for c in changes] == ["torch", "gpu", "cpu_count", "python"]
    assert (changes[0].baseline, changes[0].current) == ("2.12.0+cu128", "2.13.0+cu128")
    assert (changes[2].baseline, changes[2].current) == ("16", "32")  # values are strings
    assert all(c.field != "fingerprint_hash" for c in changes)


def test_gpu_names_compare_as_one_joined_field() -> None:
    two = [H100, H100.model_copy(update={"index": 1})]
    changes = env_changes(make_env(gpus=[H100], gpu_count=1), make_env(gpus=two, gpu_count=2))
    by_field = {c.field: c for c in changes}
    assert by_field["gpu"].current == "NVIDIA H100 80GB HBM3, NVIDIA H100 80GB HBM3"
    assert (by_field["gpu_count"].baseline, by_field["gpu_count"].current) == ("1", "2")


def test_a_library_that_appears_shows_none_on_the_baseline_side() -> None:
    (change,) = env_changes(make_env(), make_env(bitsandbytes="0.47.0"))
    assert (change.field, change.baseline, change.current) == ("bitsandbytes", None, "0.47.0")


# --- config --------------------------------------------------------------------------------------------


def test_nested_keys_compare_as_dotted_paths() -> None:
    before = {"profiler": {"enabled": False, "num_steps": 20}, "gradient_checkpointing": False}
    after = {"profiler": {"enabled": True, "num_steps": 20}, "gradient_checkpointing": True}
    changes = config_changes(before, after)
    assert [(c.field, c.baseline, c.current) for c in changes] == [
        ("profiler.enabled", "false", "true"),
        ("gradient_checkpointing", "false", "true"),
    ]


@pytest.mark.parametrize("key", sorted(IGNORED_CONFIG_KEYS))
def test_keys_that_never_affect_the_figures_are_ignored(key: str) -> None:
    section, _, leaf = key.rpartition(".")
    before: dict[str, object] = {section: {leaf: "a"}} if section else {key: "a"}
    after: dict[str, object] = {section: {leaf: "b"}} if section else {key: "b"}
    assert config_changes(before, after) == []


def test_a_key_in_one_config_only_shows_none_on_the_other_side() -> None:
    changes = config_changes({"lr": 1e-4, "old": 1}, {"lr": 1e-4, "new": "x"})
    assert [(c.field, c.baseline, c.current) for c in changes] == [("old", "1", None), ("new", None, "x")]


def test_null_and_missing_read_the_same() -> None:
    assert config_changes({"tokenizer_name": None}, {}) == []
    changes = config_changes({"fault_injection": None}, {"fault_injection": {"sleep_s_per_step": 0.05, "x": None}})
    assert [(c.field, c.baseline, c.current) for c in changes] == [("fault_injection.sleep_s_per_step", "0.0", "0.05")]


def test_a_section_switched_on_shows_only_the_keys_set_away_from_their_defaults() -> None:
    # Issue 12: one planted NaN made slow_rank_sleep_s "none → 0.05" appear as a change, and as evidence.
    resolved = {"nan_loss_at_step": 5, "crash_at_step": None, "sleep_s_per_step": 0.0, "slow_rank": None,
                "slow_rank_sleep_s": 0.05}  # fmt: skip
    changes = config_changes({"lr": 1, "fault_injection": None}, {"lr": 1, "fault_injection": resolved})
    assert [(c.field, c.baseline, c.current) for c in changes] == [("fault_injection.nan_loss_at_step", None, "5")]
    back = config_changes({"distributed": {"strategy": "ddp"}}, {"distributed": None})
    assert back == []  # the defaults on both sides: nothing moved


def test_values_render_compactly_and_are_clipped() -> None:
    long = [f"module_{i}" for i in range(30)]
    changes = config_changes({"lora_target_modules": ["q_proj", "v_proj"]}, {"lora_target_modules": long})
    assert changes[0].baseline == '["q_proj","v_proj"]'
    assert changes[0].current is not None
    assert len(changes[0].current) <= MAX_VALUE_CHARS
    assert changes[0].current.endswith("…")


# --- profiled ops --------------------------------------------------------------------------------------


def test_op_times_are_per_profiled_step_and_growth_comes_first() -> None:
    before = profile(("aten::mm", 5.0, 50.0), ("aten::add", 2.0, 20.0), ("aten::copy_", 1.0, 10.0))
    after = profile(("aten::mm", 5.0, 90.0), ("aten::add", 2.0, 5.0), ("aten::gelu", 1.0, 12.0))
    changes = op_changes(before, 5, after, 4)  # different window lengths: compare per step
    by_name = {c.name: c for c in changes}
    assert by_name["aten::mm"].baseline_ms == pytest.approx(10.0)
    assert by_name["aten::mm"].current_ms == pytest.approx(22.5)
    assert by_name["aten::mm"].delta_ms == pytest.approx(12.5)
    assert all(c.device for c in changes)
    deltas = [c.delta_ms for c in changes]
    assert deltas == sorted(deltas, reverse=True)
    assert changes[-1].delta_ms < 0  # shrinking ops are listed too


def test_an_op_in_one_window_only_has_none_on_the_other_side_and_the_least_change_it_can_have() -> None:
    # Per step: before mm 10, old 8 (its cut: 8); after mm 10, new 3 (its cut: 3). `old` is below 3 ms now, so
    # it fell by at least 5; `new` may have been just under 8 ms before: no growth can be claimed.
    before = profile(("aten::mm", 1.0, 20.0), ("aten::old", 1.0, 16.0))
    after = profile(("aten::mm", 1.0, 20.0), ("aten::new", 1.0, 6.0))
    by_name = {c.name: c for c in op_changes(before, 2, after, 2)}
    assert (by_name["aten::old"].baseline_ms, by_name["aten::old"].current_ms) == (pytest.approx(8.0), None)
    assert by_name["aten::old"].delta_ms == pytest.approx(-5.0)
    assert "aten::new" not in by_name
    # The other way round: a new op above everything the baseline listed grew by at least its excess.
    by_name = {c.name: c for c in op_changes(after, 2, before, 2)}
    assert (by_name["aten::old"].baseline_ms, by_name["aten::old"].current_ms) == (None, pytest.approx(8.0))
    assert by_name["aten::old"].delta_ms == pytest.approx(5.0)
    assert "aten::new" not in by_name


def test_cpu_times_are_used_when_no_window_has_device_time() -> None:
    changes = op_changes(profile(("aten::mm", 4.0, 0.0)), 2, profile(("aten::mm", 8.0, 0.0)), 2)
    assert len(changes) == 1
    assert not changes[0].device
    assert changes[0].delta_ms == pytest.approx(2.0)


def test_only_the_top_movers_are_kept_and_unmoved_ops_are_left_out() -> None:
    ops = [(f"op{i}", 1.0, float(i)) for i in range(20)]
    before = profile(*ops, ("same", 1.0, 7.0))
    after = profile(*[(n, c, d * 2) for n, c, d in ops], ("same", 1.0, 7.0))
    changes = op_changes(before, 1, after, 1, top=3)
    assert [c.name for c in changes] == ["op19", "op18", "op17"]


@pytest.mark.parametrize(("before_steps", "after_steps"), [(None, 5), (5, None), (0, 5)])
def test_no_op_changes_without_both_windows_and_their_lengths(
    before_steps: int | None, after_steps: int | None
) -> None:
    window = profile(("aten::mm", 1.0, 2.0))
    assert op_changes(window, before_steps, window.model_copy(), after_steps) == []
    assert op_changes(None, 5, window, 5) == []
    assert op_changes(window, 5, None, 5) == []


def test_a_baseline_from_before_num_processes_reads_as_one_process() -> None:
    from canary_action.compare.diff import config_changes

    assert config_changes({"batch_size": 2}, {"batch_size": 2, "num_processes": 1}) == []
    [change] = config_changes({"batch_size": 2}, {"batch_size": 2, "num_processes": 2})
    assert (change.field, change.baseline, change.current) == ("num_processes", "1", "2")
