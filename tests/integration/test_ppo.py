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


def test_ppo_takes_turns_in_a_lockstep_pair(tmp_path: Path) -> None:
    """TRL's old PPO loop ignores should_training_stop between steps; the pair's turns still hold it."""
    from canary_action.metrics.io import read_metrics
    from canary_action.train.launch.pair import run_pair

    repo = Path(__file__).parents[2]
    outcome = run_pair(repo, repo, Path("configs/tiny/ppo.yaml"), output_dir=tmp_path, overrides=["max_steps=4"])
    assert outcome.error is None
    for path in (outcome.base, outcome.head):
        metrics = read_metrics(path)
        assert metrics.status.state == "completed"
        assert metrics.series[m.PAIR_ROUND] == [0.0, 0.0, 1.0, 1.0]


def test_legacy_flat_ppo_config_runs_unchanged(tmp_path: Path) -> None:
    metrics = run_canary(load_config(LEGACY / "ppo.yaml"), tmp_path).metrics
    assert metrics.status.state == "completed"
