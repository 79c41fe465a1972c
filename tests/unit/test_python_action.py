"""The python action (python/action.yml) is the Docker action in the job's own Python: the same inputs (plus
`python`), outputs, modes and entrypoint, with rlhf-canary installed by python/install.py beside the job's packages.
Each check is shown to fail on one small change. The action run as the runner runs it: tests/contract/test_adopt.py.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.unit.test_report_action import MARKETPLACE_DESCRIPTION, step_of

ROOT = Path(__file__).resolve().parents[2]
ACTION = yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))
PYTHON = yaml.safe_load((ROOT / "python" / "action.yml").read_text(encoding="utf-8"))
OWN_INPUTS = {"python"}


def problems_of(python: dict[str, Any], action: dict[str, Any]) -> list[str]:
    problems = []
    inputs = python.get("inputs", {})
    if set(inputs) != set(action["inputs"]) | OWN_INPUTS:
        problems.append(f"inputs differ from action.yml's and python: {sorted(set(inputs) ^ set(action['inputs']))}")
    for name, spec in action["inputs"].items():
        mine = inputs.get(name, {})
        if (mine.get("description"), str(mine.get("default"))) != (spec["description"], str(spec["default"])):
            problems.append(f"input {name}: description or default differs from action.yml's")
    outputs = python.get("outputs", {})
    expected = {n: {"description": s["description"], "value": f"${{{{ steps.canary.outputs.{n} }}}}"}
                for n, s in action["outputs"].items()}  # fmt: skip
    if outputs != expected:
        problems.append(
            f"outputs differ from action.yml's, each the canary step's: {sorted(set(outputs) ^ set(expected))}"
        )
    steps = {step.get("id"): step for step in python["runs"]["steps"]}
    env = steps.get("canary", {}).get("env", {})
    wanted = {f"INPUT_{n.upper().replace('-', '_')}": f"${{{{ inputs.{n} }}}}" for n in action["inputs"]}
    if {k: v for k, v in env.items() if k.startswith("INPUT_")} != wanted:
        problems.append("the canary step's INPUT_* env differs from action.yml's inputs")
    install = steps.get("install", {}).get("run", "")
    if '"${GITHUB_ACTION_PATH}/install.py"' not in install or " -I " not in install:
        problems.append("the install step must run python/install.py isolated (-I) with the job's Python")
    run = steps.get("canary", {}).get("run", "")
    if run != '"${CANARY_PYTHON}" -I "${GITHUB_ACTION_PATH}/../entrypoint/main.py"':
        problems.append("the canary step must run the Docker action's entrypoint with the installed Python")
    if env.get("CANARY_PYTHON") != "${{ steps.install.outputs.python }}":
        problems.append("CANARY_PYTHON must be the install step's python output")
    return problems


def test_the_python_action_mirrors_action_yml() -> None:
    assert problems_of(PYTHON, ACTION) == []
    assert len(PYTHON["description"]) <= MARKETPLACE_DESCRIPTION


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        (lambda d: d["inputs"].pop("gpu"), "inputs differ"),
        (lambda d: d["inputs"]["tier"].update({"default": "perf"}), "input tier"),
        (lambda d: d["outputs"].pop("verdict"), "outputs differ"),
        (lambda d: d["outputs"]["verdict"].update({"value": "${{ steps.install.outputs.verdict }}"}), "outputs"),
        (lambda d: step_of(d, "canary")["env"].pop("INPUT_SETUP"), "INPUT_* env"),
        (lambda d: step_of(d, "install").update({"run": "pip install rlhf-canary"}), "install.py"),
        (lambda d: step_of(d, "canary").update({"run": "canary run canary.yaml"}), "entrypoint"),
        (lambda d: step_of(d, "canary")["env"].update({"CANARY_PYTHON": "python3"}), "CANARY_PYTHON"),
    ],
)
def test_a_drifted_python_action_is_found(change: Any, fragment: str) -> None:
    drifted = copy.deepcopy(PYTHON)
    change(drifted)
    found = problems_of(drifted, ACTION)
    assert any(fragment in problem for problem in found), found
