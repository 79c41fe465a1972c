"""Value-model PPO: runs only where the installed TRL ships it (trl <= 1.12). CI builds that environment."""

from __future__ import annotations

from pathlib import Path

import pytest

from canary_action.config.load import load_config
from canary_action.metrics import schema as m
from canary_action.train.launch import run_canary

pytestmark = pytest.mark.ppo
pytest.importorskip("trl.experimental.ppo", reason="this TRL has no value-model PPO; CI runs this file on trl 1.12")

CONFIGS = Path(__file__).parents[2] / "configs" / "tiny"
LEGACY = Path(__file__).parents[2] / "tests" / "fixtures" / "configs" / "legacy"


def test_ppo_runs_and_records_its_metrics(tmp_path: Path) -> None:
    metrics = run_canary(load_config(CONFIGS / "ppo.yaml", ["max_steps=3"]), tmp_path).metrics
    assert metrics.status.state == "completed"
    assert metrics.series[m.STEP] == [1.0, 2.0, 3.0]
    for key in ("objective/kl", "loss/policy_avg", "loss/value_avg", "policy/clipfrac_avg"):
        assert all(v is not None for v in metrics.series[m.ALGO_PREFIX + key]), key
    assert all((n or 0) > 0 for n in metrics.series[m.NUM_TOKENS])


def test_legacy_flat_ppo_config_runs_unchanged(tmp_path: Path) -> None:
    metrics = run_canary(load_config(LEGACY / "ppo.yaml"), tmp_path).metrics
    assert metrics.status.state == "completed"
