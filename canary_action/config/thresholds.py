"""Comparison thresholds: the keys users of rlhf-canary 0.1 know, the keys of the newer checks, their tiers,
and how overrides merge.

Merge order (later wins): the tier's defaults <- a thresholds YAML file <- the config's inline `thresholds:`
block. Both take the same keys, `base_tier` included; `base_tier` follows the same order: the last layer that
names one replaces the tier chosen before it (the command line's `--threshold-tier`, the action's `tier`), and
every key a layer sets still wins over that tier's value.

Severity: perf, memory and stability limits fail the gate (rank imbalance and communication time, for
multi-process runs, included); learning limits (loss curve, tail loss, algorithm
metrics) and the secondary perf signals (first step, GPU utilisation, data wait, grad-norm spikes) warn,
unless `fail_on_learning` makes the learning ones fail too.
"""

from __future__ import annotations

from typing import Annotated, Final, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from canary_action.config.numbers import NOT_A_BOOL, Count, Number

Tier = Literal["default", "smoke", "perf", "nightly"]
DEFAULT_CONFIDENCE_LEVEL: Final = 0.95  # rlhf-canary 0.1's default, and the level this gate's rates were measured at


def _a_level(value: float) -> float:
    # Exclusive at both ends: at 0.5 or below every change would be "clear"; at 1 none could be.
    if not 0.5 < value < 1:
        percent = f" — did you mean {value / 100:g}?" if 50 < value < 100 else ""
        raise ValueError(f"must be a fraction between 0.5 and 1, exclusive (0.95 for 95 %), got {value:g}{percent}")
    return value


#: The level of the intervals and of the test that a change is real (its interval excludes zero).
ConfidenceLevel = Annotated[float, NOT_A_BOOL, AfterValidator(_a_level)]


class Thresholds(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

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
    # CUDA runs that timed the GPU. A default, like the two above.
    max_gpu_time_increase_pct: Number = Field(
        10.0,
        ge=0,
        description="Fail when the GPU's own busy time per steady step (kernels, copies) grows more (%) "
        "(statistical, like step time).",
    )
    # Lockstep pairs. A default, like the two above: a result.json written before it still loads.
    paired_min_effect_pct: Number = Field(
        3.0,
        ge=0,
        description="Lockstep pairs: fail when step time, tokens/s or GPU time is clearly worse by more than this "
        "(%), raised to run_spread_k x the pair's own noise SD when that is larger; the separate-run limits "
        "(max_step_time_increase_pct, max_tps_drop_pct, max_gpu_time_increase_pct) do not apply to a pair.",
    )
    # Correctness (held-out evaluation, numerics in a pair). Defaults, like the above: an older result.json loads.
    heldout_min_effect_pct: Number = Field(
        5.0,
        ge=0,
        description="Fail when the held-out metric is clearly worse than the reference's (the pair's base side, or "
        "the baselines) by more than this share (%) of what the reference learned from the starting model.",
    )
    fail_on_numerics_change: bool = Field(
        False,
        description="Lockstep pairs: a change of the training numerics (losses, gradients, weights beyond rounding) "
        "fails until a maintainer accepts it for the commit (accept-numerics-change); false: it warns, and the "
        "held-out evaluation judges whether the model learns worse.",
    )
    # rlhf-canary 0.1's key. A default, like the two above: a result.json written before it still loads.
    confidence_level: ConfidenceLevel = Field(
        DEFAULT_CONFIDENCE_LEVEL,
        description="Level of the statistical checks' intervals and of their test: a change counts as clear only "
        "when its interval excludes zero (a fraction, 0.5 < level < 1; 0.99 makes a false alarm rarer and a "
        "small regression harder to catch).",
    )


class ThresholdOverrides(BaseModel):
    """Any subset of the threshold keys; unknown keys are rejected."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

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
    max_gpu_time_increase_pct: Number | None = Field(None, ge=0)
    paired_min_effect_pct: Number | None = Field(None, ge=0)
    heldout_min_effect_pct: Number | None = Field(None, ge=0)
    fail_on_numerics_change: bool | None = None
    confidence_level: ConfidenceLevel | None = None


class ThresholdFile(ThresholdOverrides):
    """A thresholds YAML file, or a config's inline `thresholds:` block: an optional base tier plus overrides."""

    base_tier: Tier | None = Field(
        None, description="The tier these overrides start from; it replaces the one chosen before (see resolve)."
    )


_NEWER: Final = {
    "run_spread_k": 3.0, "max_first_step_increase_pct": 50.0, "max_gpu_util_drop_pp": 10.0,
    "max_data_wait_increase_pp": 5.0, "grad_norm_spikes_allowed": 2, "max_algo_metric_change_pct": 20.0,
    "fail_on_learning": False, "paired_min_effect_pct": 3.0,
}  # fmt: skip

# Limits derived from the tier's step-time limit. A straggler X % slower holds every rank back by about X % of the
# compute, so the imbalance limit is the step-time limit. The collectives are a part of the step and noisier than
# it: twice the step-time limit (a 20 % slower all-reduce at a 30 % share of the step costs 6 % of it). The GPU's
# busy time is measured per step like the step itself and about as steady (summed kernel times, no host gaps):
# the step-time limit.
_FROM_STEP_TIME: Final[dict[Tier, dict[str, float]]] = {
    "default": {"max_rank_imbalance_pct": 10.0, "max_comm_time_increase_pct": 20.0, "max_gpu_time_increase_pct": 10.0},
    "smoke": {"max_rank_imbalance_pct": 15.0, "max_comm_time_increase_pct": 30.0, "max_gpu_time_increase_pct": 15.0},
    "perf": {"max_rank_imbalance_pct": 8.0, "max_comm_time_increase_pct": 15.0, "max_gpu_time_increase_pct": 8.0},
    "nightly": {"max_rank_imbalance_pct": 5.0, "max_comm_time_increase_pct": 10.0, "max_gpu_time_increase_pct": 5.0},
}

TIERS: Final[dict[Tier, Thresholds]] = {
    "default": Thresholds(
        max_step_time_increase_pct=10, max_tps_drop_pct=8, max_mem_increase_mb=500, max_mem_increase_pct=20,
        nan_steps_allowed=0, inf_steps_allowed=0, max_loss_increase_pct=50, min_step_count=20,
        loss_curve_tolerance_pct=10, **_NEWER, **_FROM_STEP_TIME["default"],
    ),
    "smoke": Thresholds(
        max_step_time_increase_pct=15, max_tps_drop_pct=12, max_mem_increase_mb=1000, max_mem_increase_pct=20,
        nan_steps_allowed=0, inf_steps_allowed=0, max_loss_increase_pct=50, min_step_count=10,
        loss_curve_tolerance_pct=15, **_NEWER, **_FROM_STEP_TIME["smoke"],
    ),
    "perf": Thresholds(
        max_step_time_increase_pct=8, max_tps_drop_pct=5, max_mem_increase_mb=300, max_mem_increase_pct=20,
        nan_steps_allowed=0, inf_steps_allowed=0, max_loss_increase_pct=50, min_step_count=50,
        loss_curve_tolerance_pct=10, **_NEWER, **_FROM_STEP_TIME["perf"],
    ),
    "nightly": Thresholds(
        max_step_time_increase_pct=5, max_tps_drop_pct=3, max_mem_increase_mb=200, max_mem_increase_pct=20,
        nan_steps_allowed=0, inf_steps_allowed=0, max_loss_increase_pct=50, min_step_count=100,
        loss_curve_tolerance_pct=10, **_NEWER, **_FROM_STEP_TIME["nightly"],
    ),
}  # fmt: skip

#: max_steps of the ready configs per tier (rlhf-canary 0.1's tiers).
TIER_STEPS: Final[dict[Tier, int]] = {"default": 100, "smoke": 100, "perf": 500, "nightly": 2000}


def base_tier(tier: Tier, *layers: ThresholdOverrides | None) -> Tier:
    """The tier the merge starts from: the last layer's `base_tier`, else `tier`."""
    for layer in reversed(layers):
        if isinstance(layer, ThresholdFile) and layer.base_tier is not None:
            return layer.base_tier
    return tier


def resolve(
    tier: Tier = "default", file: ThresholdOverrides | None = None, inline: ThresholdOverrides | None = None
) -> Thresholds:
    """Merge in the documented order, later winning: tier <- file <- inline block. A layer's base_tier replaces
    the tier named before it (the last one that names one wins); every key a layer sets wins over that tier."""
    merged = TIERS[base_tier(tier, file, inline)].model_dump()
    for layer in (file, inline):
        if layer is not None:
            merged.update(layer.model_dump(exclude_none=True, exclude={"base_tier"}))
    return Thresholds(**merged)
