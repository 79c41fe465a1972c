"""Issue 35 (found by the adoption walk-through): a team package that the run's code tree holds but that the
environment has installed is imported from the installed copy (the tree comes after the installed packages), so a
pull request's changes to it would never be trained and a pair would compare that copy with itself: refused with
the fix, unless the copy was installed from the tree for this run or the tree's own copy is the one imported."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from canary_action.errors import ConfigError
from canary_action.train.rewards import find_module


def _package(root: Path, name: str) -> Path:
    (root / name).mkdir(parents=True)
    (root / name / "__init__.py").write_text("", encoding="utf-8")
    (root / name / "canary.py").write_text("def build_trainer(context):\n    return None\n", encoding="utf-8")
    return root / name


@pytest.fixture
def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """A tree holding acme_shadow_rl, and an installed copy of it first on the import path."""
    tree, site = tmp_path / "checkout", tmp_path / "site-packages"
    _package(tree, "acme_shadow_rl")
    _package(site, "acme_shadow_rl")
    monkeypatch.setattr(sys, "path", [str(site), *sys.path, str(tree)])
    monkeypatch.setenv("CANARY_CODE_TREE", str(tree))
    monkeypatch.delenv("CANARY_SETUP_PREFIX", raising=False)
    for name in [n for n in sys.modules if n.startswith("acme_shadow_rl")]:
        monkeypatch.delitem(sys.modules, name)
    return tree, site


def test_an_installed_copy_of_the_trees_package_is_refused(installed: tuple[Path, Path]) -> None:
    site = installed[1]
    with pytest.raises(ConfigError) as refused:
        find_module("acme_shadow_rl.canary:build_trainer", key="trainer_factory")
    message = refused.value.message
    assert f"acme_shadow_rl is imported from {site / 'acme_shadow_rl'}, an installed copy" in message
    assert "holds acme_shadow_rl" in message
    assert "`pip install --no-deps .`" in refused.value.fix


def test_a_copy_installed_for_this_run_or_the_trees_own_is_fine(
    installed: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    tree, site = installed
    monkeypatch.setenv("CANARY_SETUP_PREFIX", str(site.parent))  # the setup command installed it from the tree
    find_module("acme_shadow_rl.canary:build_trainer", key="trainer_factory")
    monkeypatch.delenv("CANARY_SETUP_PREFIX")
    monkeypatch.setattr(sys, "path", [str(tree), *[p for p in sys.path if p != str(site)]])
    for name in [n for n in sys.modules if n.startswith("acme_shadow_rl")]:
        monkeypatch.delitem(sys.modules, name)  # a fresh process: nothing imported yet
    find_module("acme_shadow_rl.canary:build_trainer", key="trainer_factory")  # the tree's own copy


def test_a_package_the_tree_does_not_hold_is_not_this_checks_business(
    installed: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CANARY_CODE_TREE", str(installed[0].parent / "elsewhere"))
    find_module("acme_shadow_rl.canary:build_trainer", key="trainer_factory")
