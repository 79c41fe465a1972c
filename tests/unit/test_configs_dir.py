"""Every ready canary under configs/ validates: the directory is a public surface, frozen by this test."""

from __future__ import annotations

from pathlib import Path

import pytest

from canary_action.config import load_config

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
