"""Issue 35: rlhf-canary runs in a team's own environment and never replaces its training stack, so a version
outside the `[train]` extra's range is found before training, named with the range and the fix."""

from __future__ import annotations

import importlib.metadata

import pytest

from canary_action import extras
from canary_action.cli import exit_code
from canary_action.errors import UnsupportedStackError


def _installed_as(monkeypatch: pytest.MonkeyPatch, **versions: str) -> None:
    real = importlib.metadata.version

    def version(name: str) -> str:
        return versions.get(name.lower(), real(name))

    monkeypatch.setattr(importlib.metadata, "version", version)


def test_the_installed_stack_is_in_range() -> None:
    assert extras.unsupported_versions() == []
    extras.require_training_stack("`canary run`")


def test_an_old_trl_is_named_with_the_range_and_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    _installed_as(monkeypatch, trl="0.19.1", transformers="4.40.0")
    assert extras.unsupported_versions() == [
        "transformers 4.40.0 is outside the supported range >=4.56",
        "trl 0.19.1 is outside the supported range <2,>=1.0",
    ]
    with pytest.raises(UnsupportedStackError) as refused:
        extras.require_training_stack("`canary run`")
    text = refused.value.render()
    assert "`canary run` trains, and this environment's transformers 4.40.0 is outside" in text
    assert "never replaces your training stack" in text
    assert "docs/adopt.md" in text
    assert exit_code(refused.value) == 2  # bad input, as a missing extra is


def test_a_core_requirement_and_an_unparsable_version(monkeypatch: pytest.MonkeyPatch) -> None:
    _installed_as(monkeypatch, pydantic="1.10.0", torch="not-a-version")
    # pip holds the core's ranges (pydantic); a version nobody can compare is out of range, not in it.
    assert extras.unsupported_versions() == ["torch not-a-version is outside the supported range >=2.4"]


def test_an_uninstalled_source_tree_declares_no_range(monkeypatch: pytest.MonkeyPatch) -> None:
    def requires(name: str) -> list[str]:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "requires", requires)
    assert extras.unsupported_versions() == []
