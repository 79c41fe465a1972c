"""Every ready canary under configs/ validates: the directory is a public surface, frozen by this test."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from canary_action.compare.perf import steps_needed
from canary_action.compare.runs import RunData, from_metrics
from canary_action.compare.window import common_warmup
from canary_action.config import load_config
from canary_action.config.thresholds import TIERS
from tests.factories import make_metrics

CONFIGS = Path(__file__).parents[2] / "configs"
# Recursive: the ready canaries are grouped in folders (tiny/, smoke/, perf/, nightly/, ...).
FILES = sorted(CONFIGS.glob("**/*.yaml"))


def test_configs_dir_is_not_empty() -> None:
    assert FILES, f"no *.yaml under {CONFIGS}: the parametrized test below would check nothing"


def test_configs_use_the_yaml_extension() -> None:
    # A .yml file would escape the glob above, and so this check.
    assert not sorted(CONFIGS.glob("**/*.yml"))


@pytest.mark.parametrize("path", FILES, ids=lambda path: str(path.relative_to(CONFIGS)))
def test_config_validates_without_notices(path: Path) -> None:
    loaded = load_config(path)
    # A ready config relies on no legacy leniency: nothing dropped, nothing defaulted on its behalf.
    assert loaded.notices == []


def test_config_names_are_unique() -> None:
    # The name keys the baseline artifact and the sticky comment: two configs must not share one.
    names = [load_config(path).config.name for path in FILES]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    assert not duplicates


TIER_LINE = re.compile(r"^# tier: (default|smoke|perf|nightly) ", re.M)


@pytest.mark.parametrize("path", FILES, ids=lambda path: str(path.relative_to(CONFIGS)))
def test_each_config_runs_long_enough_for_the_tier_its_comment_names(path: Path) -> None:
    # Issue 12: tiny/grpo.yaml ran 12 steps, so no tier could ever judge its step time, and the verdict said pass.
    named = TIER_LINE.search(path.read_text(encoding="utf-8"))
    assert named, f"{path.name}: say which tier judges it in a '# tier: NAME (...)' comment line"
    tier = TIERS[named.group(1)]  # type: ignore[index]
    config = load_config(path).config
    profiled = config.profiler.num_steps if config.profiler.enabled else 0
    assert config.max_steps - profiled >= steps_needed(tier.min_step_count)
    # The comparison's warm-up cut leaves min_step_count steady steps in a run this long, whatever was detected.
    warmup = common_warmup([_run_of(config.max_steps, detected=config.max_steps // 2)], tier.min_step_count)
    assert warmup is not None
    assert config.max_steps - profiled - warmup.steps >= tier.min_step_count


def _run_of(num_steps: int, *, detected: int) -> RunData:
    metrics = make_metrics(num_steps=num_steps)
    assert metrics.summary is not None
    summary = metrics.summary.model_copy(update={"warmup_steps": detected})
    return from_metrics(metrics.model_copy(update={"summary": summary}), "run")
