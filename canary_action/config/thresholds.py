"""Comparison thresholds: the keys users of rlhf-canary 0.1 know, their tiers, and how overrides merge.

Merge order (later wins): the tier's defaults <- a thresholds YAML file (whose optional `base_tier` replaces
the tier) <- the config's inline `thresholds:` block.
"""

from __future__ import annotations

from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field

Tier = Literal["default", "smoke", "perf", "nightly"]


class Thresholds(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    max_step_time_increase_pct: float = Field(ge=0, description="Fail when steady-state step time grows more (%).")
    max_tps_drop_pct: float = Field(ge=0, description="Fail when measured tokens/s drops more (%).")
    max_mem_increase_mb: float = Field(ge=0, description="Fail when peak memory grows more (MiB)...")
    max_mem_increase_pct: float = Field(ge=0, description="...and more than this (%).")
    nan_steps_allowed: int = Field(ge=0, description="Steps with a NaN loss or gradient tolerated.")
    inf_steps_allowed: int = Field(ge=0, description="Steps with an infinite loss or gradient tolerated.")
    max_loss_increase_pct: float = Field(ge=0, description="Warn when the tail-mean loss grows more (%).")
    min_step_count: int = Field(ge=1, description="Fewer steady-state steps than this: perf checks are skipped.")


class ThresholdOverrides(BaseModel):
    """Any subset of the threshold keys; unknown keys are rejected."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_step_time_increase_pct: float | None = Field(None, ge=0)
    max_tps_drop_pct: float | None = Field(None, ge=0)
    max_mem_increase_mb: float | None = Field(None, ge=0)
    max_mem_increase_pct: float | None = Field(None, ge=0)
    nan_steps_allowed: int | None = Field(None, ge=0)
    inf_steps_allowed: int | None = Field(None, ge=0)
    max_loss_increase_pct: float | None = Field(None, ge=0)
    min_step_count: int | None = Field(None, ge=1)


class ThresholdFile(ThresholdOverrides):
    """A thresholds YAML file: an optional base tier plus overrides."""

    base_tier: Tier | None = None


TIERS: Final[dict[Tier, Thresholds]] = {
    "default": Thresholds(
        max_step_time_increase_pct=10, max_tps_drop_pct=8, max_mem_increase_mb=500, max_mem_increase_pct=20,
        nan_steps_allowed=0, inf_steps_allowed=0, max_loss_increase_pct=50, min_step_count=20,
    ),
    "smoke": Thresholds(
        max_step_time_increase_pct=15, max_tps_drop_pct=12, max_mem_increase_mb=1000, max_mem_increase_pct=20,
        nan_steps_allowed=0, inf_steps_allowed=0, max_loss_increase_pct=50, min_step_count=10,
    ),
    "perf": Thresholds(
        max_step_time_increase_pct=8, max_tps_drop_pct=5, max_mem_increase_mb=300, max_mem_increase_pct=20,
        nan_steps_allowed=0, inf_steps_allowed=0, max_loss_increase_pct=50, min_step_count=50,
    ),
    "nightly": Thresholds(
        max_step_time_increase_pct=5, max_tps_drop_pct=3, max_mem_increase_mb=200, max_mem_increase_pct=20,
        nan_steps_allowed=0, inf_steps_allowed=0, max_loss_increase_pct=50, min_step_count=100,
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
