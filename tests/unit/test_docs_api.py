"""docs/api.md: every public function has an example, and the examples run, in order, as a reader would."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from canary_action import api

ROOT = Path(__file__).parents[2]
DOC = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
BLOCKS = re.findall(r"^```python\n(.*?)^```$", DOC, flags=re.MULTILINE | re.DOTALL)
FUNCTIONS = sorted(name for name in api.__all__ if callable(api.__dict__[name]) and name[0].islower())


def test_every_public_function_has_a_section_and_an_example() -> None:
    sections = re.findall(r"^## (\w+)$", DOC, flags=re.MULTILINE)
    assert sorted(sections) == FUNCTIONS
    code = "\n".join(BLOCKS)
    for name in FUNCTIONS:
        assert f"api.{name}(" in code, name
    for name in api.__all__:  # the exported types are named on the page too
        assert f"`{name}" in DOC or f"api.{name}" in DOC, name


@pytest.mark.training
def test_the_examples_run_in_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "configs" / "tiny").mkdir(parents=True)
    shutil.copy(ROOT / "configs" / "tiny" / "sft.yaml", tmp_path / "configs" / "tiny" / "sft.yaml")
    shutil.copy(ROOT / "tests" / "fixtures" / "baselines" / "legacy_0_1.json", tmp_path / "old-metrics.json")
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": "docs_api"}
    for number, block in enumerate(BLOCKS, 1):
        exec(compile(block, f"docs/api.md block {number}", "exec"), namespace)
    assert (tmp_path / "runs").is_dir()  # relative paths: the reader's folder
    crashed = namespace["crashed"]
    assert isinstance(crashed, api.Metrics)
    assert crashed.status.state == "failed"
