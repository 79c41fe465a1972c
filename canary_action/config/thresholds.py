"""Comparison thresholds: the keys users of rlhf-canary 0.1 know, the keys of the newer checks, their tiers,
and how overrides merge.

Merge order (later wins): the tier's defaults <- a thresholds YAML file (whose optional `base_tier` replaces
the tier) <- the config's inline `thresholds:` block.

Severity: perf, memory and stability limits fail the gate (rank imbalance and communication time, for
multi-process runs, included); learning limits (loss curve, tail loss, algorithm
metrics) and the secondary perf signals (first step, GPU utilisation, data wait, grad-norm spikes) warn,
unless `fail_on_learning` makes the learning ones fail too.
"""

from __future__ import annotations

from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field

from canary_action.config.numbers import Count, Number

Tier = Literal["default", "smoke", "perf", "nightly"]


class Thresholds(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    # rlhf-canary 0.1's keys, same meaning.
    max_step_time_increase_pct: Number = Field(ge=0, description="Fail when steady-state step time grows more (%).")
    max_tps_drop_pct: Number = Field(ge=0, description="Fail when measured tokens/s drops more (%).")
    max_mem_increase_mb: Number = Field(ge=0, description="Fail when a peak memory figure grows more (MiB), or...")
    max_mem_increase_pct: Number = Field(ge=0, description="...more than this (%): either limit fails.")
    nan_steps_allowed: Count = Field(ge=0, description="Steps with a NaN loss or gradient tolerated.")
    inf_steps_allowed: Count = Field(ge=0, description="Steps with an infinite loss or gradient tolerated.")
    max_loss_increase_pct: Number = Field(ge=0, description="Warn when the tail-mean loss grows more (%).")
    min_step_count: Count = Field(ge=1, description="Fewer steady-state steps than this: perf checks are skipped.")
    # Newer checks.
    run_spread_k: Number = Field(
        ge=0, description="Widen the perf limits to k x the comparison's noise SD when that is larger."
    )
    max_first_step_increase_pct: Number = Field(ge=0, description="Warn when the first step (compile) grows more (%).")
    max_gpu_util_drop_pp: Number = Field(ge=0, description="Warn when mean GPU utilisation drops more (points).")
    max_data_wait_increase_pp: Number = Field(ge=0, description="Warn when the data-wait share grows more (points).")
    grad_norm_spikes_allowed: Count = Field(
        ge=0, description="Warn at more grad-norm spikes than the baselines' most, plus this."
    )
    loss_curve_tolerance_pct: Number = Field(
        ge=0, description="Per-step band around the baseline loss (%); warn when over 10 % of steps leave it."
    )
    max_algo_metric_change_pct: Number = Field(
        ge=0, description="Warn when an algorithm metric (reward accuracy, margin, mean reward, KL) worsens more (%)."
    )
    fail_on_learning: bool = Field(description="Learning checks fail the gate instead of warning.")
    # Multi-process runs only. Defaults (the default tier's): a result.json written before these keys existed
    # still loads (`canary report`, report mode reading an older action's artifact).
    max_rank_imbalance_pct: Number = Field(
        10.0,
        ge=0,
        description="Fail when the slowest rank's compute exceeds the median rank's by more (%) than this, "
        "and clearly more than the baselines' did (warn when they were as imbalanced).",
    )
    max_comm_time_increase_pct: Number = Field(
        20.0,
        ge=0,
        description="Fail when the collectives' own time per step grows more (%) (statistical, like step time).",
    )


class ThresholdOverrides(BaseModel):
    """Any subset of the threshold keys; unknown keys are rejected."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_step_time_increase_pct: Number | None = Field(None, ge=0)
    max_tps_drop_pct: Number | None = Field(None, ge=0)
    max_mem_increase_mb: Number | None = Field(None, ge=0)
    max_mem_increase_pct: Number | None = Field(None, ge=0)
    nan_steps_allowed: Count | None = Field(None, ge=0)
    inf_steps_allowed: Count | None = Field(None, ge=0)
    max_loss_increase_pct: Number | None = Field(None, ge=0)
    min_step_count: Count | None = Field(None, ge=1)
    run_spread_k: Number | None = Field(None, ge=0)
    max_first_step_increase_pct: Number | None = Field(None, ge=0)
    max_gpu_util_drop_pp: Number | None = Field(None, ge=0)
    max_data_wait_increase_pp: Number | None = Field(None, ge=0)
    grad_norm_spikes_allowed: Count | None = Field(None, ge=0)
    loss_curve_tolerance_pct: Number | None = Field(None, ge=0)
    max_algo_metric_change_pct: Number | None = Field(None, ge=0)
    fail_on_learning: bool | None = None
    max_rank_imbalance_pct: Number | None = Field(None, ge=0)
    max_comm_time_increase_pct: Number | None = Field(None, ge=0)


class ThresholdFile(ThresholdOverrides):
    """A thresholds YAML file: an optional base tier plus overrides."""

    base_tier: Tier | None = None


_NEWER: Final = {
    "run_spread_k": 3.0, "max_first_step_increase_pct": 50.0, "max_gpu_util_drop_pp": 10.0,
    "max_data_wait_increase_pp": 5.0, "grad_norm_spikes_allowed": 2, "max_algo_metric_change_pct": 20.0,
    "fail_on_learning": False,
}  # fmt: skip

# A straggler X % slower holds every rank back by about X % of the compute, so the imbalance limit is the tier's
# step-time limit. The collectives are a part of the step and noisier than it: twice the step-time limit (a
# 20 % slower all-reduce at a 30 % share of the step costs 6 % of it).
_DISTRIBUTED: Final[dict[Tier, dict[str, float]]] = {
    "default": {"max_rank_imbalance_pct": 10.0, "max_comm_time_increase_pct": 20.0},
    "smoke": {"max_rank_imbalance_pct": 15.0, "max_comm_time_increase_pct": 30.0},
    "perf": {"max_rank_imbalance_pct": 8.0, "max_comm_time_increase_pct": 15.0},
    "nightly": {"max_rank_imbalance_pct": 5.0, "max_comm_time_increase_pct": 10.0},
}

TIERS: Final[dict[Tier, Thresholds]] = {
    "default": Thresholds(
        max_step_time_increase_pct=10, max_tps_drop_pct=8, max_mem_increase_mb=500, max_mem_increase_pct=20,
        nan_steps_allowed=0, inf_steps_allowed=0, max_loss_increase_pct=50, min_step_count=20,
        loss_curve_tolerance_pct=10, **_NEWER, **_DISTRIBUTED["default"],
    ),
    "smoke": Thresholds(
        max_step_time_increase_pct=15, max_tps_drop_pct=12, max_mem_increase_mb=1000, max_mem_increase_pct=20,
        nan_steps_allowed=0, inf_steps_allowed=0, max_loss_increase_pct=50, min_step_count=10,
        loss_curve_tolerance_pct=15, **_NEWER, **_DISTRIBUTED["smoke"],
    ),
    "perf": Thresholds(
        max_step_time_increase_pct=8, max_tps_drop_pct=5, max_mem_increase_mb=300, max_mem_increase_pct=20,
        nan_steps_allowed=0, inf_steps_allowed=0, max_loss_increase_pct=50, min_step_count=50,
        loss_curve_tolerance_pct=10, **_NEWER, **_DISTRIBUTED["perf"],
    ),
    "nightly": Thresholds(
        max_step_time_increase_pct=5, max_tps_drop_pct=3, max_mem_increase_mb=200, max_mem_increase_pct=20,
        nan_steps_allowed=0, inf_steps_allowed=0, max_loss_increase_pct=50, min_step_count=100,
        loss_curve_tolerance_pct=10, **_NEWER, **_DISTRIBUTED["nightly"],
    ),
}  # fmt: skip

#: max_steps of the ready configs per tier (rlhf-canary 0.1's tiers).
TIER_STEPS: Final[dict[Tier, int]] = {"default": 100, "smoke": 100, "perf": 500, "nightly": 2000}


def resolve(
    tier: Tier = "default", file: ThresholdFile | None = None, inline: ThresholdOverrides | None = None
) -> Thresholds:
    """Merge in the documented order: tier <- file (its base_tier replaces `tier`) <- inline block."""
    base = TIERS[file.base_tier if file is not None and file.base_tier is not None else tier]
    merged = base.model_dump()
    for layer in (file, inline):
        if layer is not None:
            merged.update(layer.model_dump(exclude_none=True, exclude={"base_tier"}))
    return Thresholds(**merged)
