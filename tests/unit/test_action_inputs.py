"""action.yml is a public surface: it must equal the typed inputs model, and inputs must parse strictly."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

import canary_action
from canary_action.errors import UsageError
from canary_action.github.inputs import EXPRESSION_DEFAULTS, OUTPUTS, ActionInputs, input_name, read_inputs

ACTION = yaml.safe_load((Path(__file__).parents[2] / "action.yml").read_text(encoding="utf-8"))


def mismatches(action: dict[str, Any]) -> list[str]:
    """Every way action.yml differs from the model (names, descriptions, defaults, outputs, image version)."""
    found = []
    declared = action.get("inputs", {})
    expected = {input_name(f): (f, info) for f, info in ActionInputs.model_fields.items()}
    found += [f"input {n} is not in the model" for n in sorted(set(declared) - set(expected))]
    found += [f"input {n} is missing from action.yml" for n in sorted(set(expected) - set(declared))]
    for name in sorted(set(declared) & set(expected)):
        field, info = expected[name]
        spec = declared[name]
        default = EXPRESSION_DEFAULTS.get(field, "" if info.default is None else str(info.default))
        if spec.get("description") != info.description:
            found.append(f"input {name}: description differs from the model's")
        if str(spec.get("default")) != default:
            found.append(f"input {name}: default {spec.get('default')!r}, the model's is {default!r}")
        if spec.get("required", False):
            found.append(f"input {name}: required, but every input has a default")
    outputs = {name: spec.get("description") for name, spec in action.get("outputs", {}).items()}
    if outputs != OUTPUTS:
        found.append(f"outputs differ: {sorted(set(outputs) ^ set(OUTPUTS)) or 'descriptions'}")
    image = action.get("runs", {}).get("image", "")
    if not image.endswith(f":{canary_action.__version__}"):
        found.append(f"image {image!r} is not tagged with the package version {canary_action.__version__}")
    return found


def test_action_yml_equals_the_inputs_model() -> None:
    assert mismatches(ACTION) == []
    assert ACTION["runs"]["using"] == "docker"


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda a: a["inputs"].pop("tier"), "input tier is missing"),
        (lambda a: a["inputs"].update({"extra": {"description": "x"}}), "input extra is not in the model"),
        (lambda a: a["inputs"]["baseline-runs"].update({"default": "3"}), "default '3'"),
        (lambda a: a["inputs"]["mode"].update({"description": "other"}), "mode: description"),
        (lambda a: a["outputs"].pop("verdict"), "outputs differ"),
        (lambda a: a["runs"].update({"image": "docker://ghcr.io/x/y:0.0.1"}), "not tagged"),
    ],
)
def test_a_drifted_action_yml_is_caught(change: Any, expected: str) -> None:
    drifted = copy.deepcopy(ACTION)
    change(drifted)
    assert any(expected in m for m in mismatches(drifted)), mismatches(drifted)


def test_both_spellings_are_read_and_the_runners_wins() -> None:
    inputs, notices = read_inputs({"INPUT_BASELINE-RUNS": "3", "INPUT_BASELINE_RUNS": "4", "INPUT_FAIL_ON": "never"})
    assert inputs.baseline_runs == 3
    assert inputs.fail_on == "never"
    assert notices == ["input baseline-runs is set twice, differently; using INPUT_BASELINE-RUNS (the runner's)"]


def test_empty_inputs_take_the_defaults() -> None:
    inputs, notices = read_inputs({f"INPUT_{input_name(f).upper()}": "" for f in ActionInputs.model_fields})
    assert inputs == ActionInputs()
    assert notices == []


def test_values_are_parsed_strictly_with_the_input_named() -> None:
    with pytest.raises(UsageError) as caught:
        read_inputs({"INPUT_TIER": "smok", "INPUT_BASELINE-RUNS": "five", "INPUT_COMMENT": "sometimes"})
    message = caught.value.render()
    assert "tier: 'smok' is not one of default, smoke, perf, nightly — did you mean 'smoke'?" in message
    assert "baseline-runs:" in message
    assert "comment: 'sometimes'" in message
    assert "fix:" in message
    with pytest.raises(UsageError, match="baseline-runs"):
        read_inputs({"INPUT_BASELINE-RUNS": "50"})


def test_the_token_never_shows_in_the_object() -> None:
    inputs, _ = read_inputs({"INPUT_GITHUB-TOKEN": "ghs_secret123"})
    assert "ghs_secret123" not in repr(inputs)
    assert "ghs_secret123" not in str(inputs.model_dump())
    assert inputs.github_token is not None
    assert inputs.github_token.get_secret_value() == "ghs_secret123"


@pytest.mark.parametrize(
    ("given", "kept"),
    [
        ("nightly.yml", ".github/workflows/nightly.yml"),
        (".github/workflows/nightly.yml", ".github/workflows/nightly.yml"),
        (" perf_nightly-2.yaml ", ".github/workflows/perf_nightly-2.yaml"),
        ("", None),
    ],
)
def test_baseline_workflow_takes_a_file_name_or_its_path(given: str, kept: str | None) -> None:
    inputs, _ = read_inputs({"INPUT_BASELINE-WORKFLOW": given})
    assert inputs.baseline_workflow == kept


@pytest.mark.parametrize(
    "given",
    [
        "https://github.com/o/r/blob/main/.github/workflows/nightly.yml",
        "o/r/.github/workflows/nightly.yml@refs/heads/main",
        "../nightly.yml",
        ".github/workflows/../nightly.yml",
        "night..ly.yml",
        ".github/workflows/sub/nightly.yml",
        "/etc/nightly.yml",
        "nightly",
        "nightly.yml.txt",
        ".nightly.yml",
        "night ly.yml",
    ],
)
def test_baseline_workflow_refuses_anything_but_a_workflow_file(given: str) -> None:
    with pytest.raises(UsageError) as caught:
        read_inputs({"INPUT_BASELINE_WORKFLOW": given})
    message = caught.value.render()
    assert "baseline-workflow: " in message
    assert "give its file name (nightly.yml) or its path (.github/workflows/nightly.yml)" in message
    assert "fix: correct the `with:` block" in message
