"""The report-only action (report/action.yml) runs in the job that holds the write token, so what it installs and
runs is pinned: hash-checked wheels from requirements/report.lock (bash scripts/lock-report.sh) and the package
from the action's own checkout. Its inputs are action.yml's. Each check is shown to fail on one small change.
"""

from __future__ import annotations

import copy
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.tags import Tag, cpython_tags
from packaging.utils import canonicalize_name, parse_wheel_filename
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
LOCK = ROOT / "requirements" / "report.lock"
LOCK_SCRIPT = ROOT / "scripts" / "lock-report.sh"
PYPROJECT = ROOT / "pyproject.toml"
ACTION = yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))
REPORT = yaml.safe_load((ROOT / "report" / "action.yml").read_text(encoding="utf-8"))
REGENERATE = "run bash scripts/lock-report.sh"
#: action.yml's inputs that report mode does not read: it trains nothing, and INPUT_MODE is fixed to report (good and
#: bad are mode bisect's; a publish job names the bad commit as bisect-bad). Every other input is passed through, so a
#: new input of action.yml fails this test until report/action.yml has it.
NOT_REPORTED = {"mode", "setup", "gpu", "good", "bad"}
REPORT_INPUTS = tuple(name for name in ACTION["inputs"] if name not in NOT_REPORTED)
#: report/action.yml's own `mode`: report, or history (docs/history.md) — the two modes that train nothing.
REPORT_MODES = ("report", "history")
#: Where report/action.yml's default differs from action.yml's, and why: results downloaded, not measured.
OWN_DEFAULTS = {"output-dir": "canary-report"}
#: GitHub Marketplace cuts an action's description at this length.
MARKETPLACE_DESCRIPTION = 125
#: The GitHub-hosted Ubuntu runners the lock serves (scripts/lock-report.sh): glibc 2.35 (22.04), both arches.
RUNNER_PLATFORMS = {"x86_64": "manylinux_2_35_x86_64", "aarch64": "manylinux_2_35_aarch64"}
TRAINING = {"torch", "transformers", "trl", "peft", "accelerate", "datasets", "tokenizers", "numpy"}


def lock_problems(text: str) -> list[str]:
    """The lock pins every core dependency in range, from PyPI alone, hashed, each with a wheel for every runner."""
    problems: list[str] = []
    pins: dict[str, tuple[Version, list[str]]] = {}
    for block in re.split(r"\n(?=\S)", text):
        if block.startswith(("#", "\n")) or not block.strip():
            continue
        if block.startswith("-"):
            if block.strip() != "--index-url https://pypi.org/simple":
                problems.append(f"`{block.strip()}`: the lock must come from https://pypi.org/simple alone")
            continue
        requirement = Requirement(block.splitlines()[0].removesuffix("\\").strip())
        name, version = canonicalize_name(requirement.name), Version(str(requirement.specifier).removeprefix("=="))
        pins[name] = (version, re.findall(r"--hash=sha256:([0-9a-f]{64})", block))
        wheels = dict(re.findall(r"^ +# ([0-9a-f]{12}) (\S+)$", block, flags=re.MULTILINE))
        if not pins[name][1]:
            problems.append(f"{name}=={version} has no --hash=sha256: (pip --require-hashes refuses it); {REGENERATE}")
        if sorted(wheels) != sorted(h[:12] for h in pins[name][1]) or not all(
            f.endswith(".whl") for f in wheels.values()
        ):
            problems.append(f"{name}=={version}: each hash needs its wheel's name beside it; {REGENERATE}")
        tags = {tag for filename in wheels.values() for tag in parse_wheel_filename(filename)[3]}
        for arch, platform in RUNNER_PLATFORMS.items():
            if not tags & set(_runner_tags(platform)):
                problems.append(f"{name}=={version} has no wheel for CPython 3.12 on {arch} Linux; {REGENERATE}")
    for text_requirement in tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]["dependencies"]:
        requirement = Requirement(text_requirement)
        name = canonicalize_name(requirement.name)
        if name not in pins:
            problems.append(f"{requirement} (pyproject.toml's core) is not locked; {REGENERATE}")
        elif not requirement.specifier.contains(pins[name][0], prereleases=True):
            problems.append(f"{name}=={pins[name][0]} is outside pyproject.toml's {requirement}; {REGENERATE}")
    problems += [f"{name} is locked: the reporter needs no training stack" for name in sorted(TRAINING & set(pins))]
    return problems


def _runner_tags(platform: str) -> list[Tag]:
    arch = platform.split("_", 3)[-1]
    platforms = [f"manylinux_2_{minor}_{arch}" for minor in range(35, 16, -1)] + [f"manylinux2014_{arch}"]
    return [*cpython_tags((3, 12), platforms=platforms), Tag("py3", "none", "any")]


def action_problems(report: dict[str, Any], action: dict[str, Any]) -> list[str]:
    """report/action.yml installs only the lock, runs the checkout's entrypoint, and passes action.yml's inputs."""
    problems = []
    inputs = report.get("inputs", {})
    if set(inputs) != {*REPORT_INPUTS, "mode"}:
        problems.append(f"inputs differ from report mode's: {sorted(set(inputs) ^ {*REPORT_INPUTS, 'mode'})}")
    mode = inputs.get("mode", {})
    if mode.get("default") != "report" or not all(f"{m}:" in mode.get("description", "") for m in REPORT_MODES):
        problems.append("input mode: default report, and its description says what report and history do")
    for name in sorted(set(inputs) & set(REPORT_INPUTS)):
        if inputs[name].get("description") != action["inputs"][name]["description"]:
            problems.append(f"input {name}: description differs from action.yml's")
        if str(inputs[name].get("default")) != OWN_DEFAULTS.get(name, str(action["inputs"][name]["default"])):
            problems.append(f"input {name}: default {inputs[name].get('default')!r} differs from action.yml's")
    steps = report["runs"]["steps"]
    env = {k: v for step in steps for k, v in step.get("env", {}).items() if k.startswith("INPUT_")}
    expected = {f"INPUT_{n.upper().replace('-', '_')}": f"${{{{ inputs.{n} }}}}" for n in REPORT_INPUTS}
    if env != {**expected, "INPUT_MODE": "${{ inputs.mode }}"}:
        problems.append(f"INPUT_* env differs from the inputs and the mode: {sorted(set(env) ^ set(expected))}")
    scripts = [step["run"].replace("\\\n", " ") for step in steps if "run" in step]
    commands = [" ".join(line.split()) for script in scripts for line in script.splitlines()]
    installs = [c for c in commands if re.search(r"\b(pip|uv|pipx|easy_install|setup\.py)\b.*\binstall\b", c)]
    lock_install = "--require-hashes --only-binary :all: --no-deps --requirement"
    if len(installs) != 1 or lock_install not in installs[0] or not installs[0].endswith('/requirements/report.lock"'):
        problems.append(f"the only install must be `pip install {lock_install} .../requirements/report.lock`")
    if not any('PYTHONPATH="${GITHUB_ACTION_PATH}/.."' in c and "entrypoint/main.py" in c for c in commands):
        problems.append('the entrypoint must run from the action\'s checkout, PYTHONPATH="${GITHUB_ACTION_PATH}/.."')
    python = next((s["with"] for s in steps if str(s.get("uses", "")).startswith("actions/setup-python@")), {})
    script_version = re.search(r"^python_version=(\S+)$", LOCK_SCRIPT.read_text(encoding="utf-8"), re.MULTILINE)
    if script_version is None or str(python.get("python-version")) != script_version[1]:
        problems.append(f"setup-python's {python.get('python-version')} is not the Python lock-report.sh locks for")
    return problems


def test_the_report_lock_covers_the_core_with_hashed_wheels() -> None:
    assert lock_problems(LOCK.read_text(encoding="utf-8")) == []


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        (lambda t: re.sub(r"pyyaml==.*?(?=\n\S)", "", t, flags=re.DOTALL), "PyYAML>=6 (pyproject.toml's core)"),
        (lambda t: re.sub(r"(click==\S+) \\\n +--hash=\S+", r"\1", t), "click==8.5.1 has no --hash"),
        (lambda t: re.sub(r"\n +--hash=\S+ \\(?=\n +--hash=\S+\n +# \w+ pydantic_core)", "", t), "wheel's name"),
        (lambda t: t.replace("--index-url https://pypi.org/simple", "--extra-index-url file:///w"), "alone"),
        (lambda t: t.replace("jinja2==3.1.6", "jinja2==3.0.0"), "outside pyproject.toml's jinja2>=3.1"),
        (lambda t: t.replace("manylinux2014_aarch64.manylinux_2_17_aarch64.whl", "macosx_11_0_arm64.whl"), "aarch64"),
        (
            lambda t: (
                t
                + "torch==2.13.0 \\\n    --hash=sha256:"
                + "0" * 64
                + "\n    # 000000000000 torch-2.13.0-py3-none-any.whl\n"
            ),
            "torch is",
        ),
    ],
)
def test_a_bad_report_lock_is_found(change: Any, fragment: str) -> None:
    problems = lock_problems(change(LOCK.read_text(encoding="utf-8")))
    assert any(fragment in p for p in problems), problems


def test_the_report_action_installs_only_the_lock_and_mirrors_action_yml() -> None:
    assert action_problems(REPORT, ACTION) == []


def step_of(report: dict[str, Any], step_id: str) -> dict[str, Any]:
    """A composite action's step by its id (also tests/unit/test_python_action.py)."""
    return next(s for s in report["runs"]["steps"] if s.get("id") == step_id)


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        (lambda r: r["inputs"].pop("head-sha"), "inputs differ"),
        (lambda r: r["inputs"].update({"python-version": {"description": "x"}}), "inputs differ"),
        (lambda r: r["inputs"]["tier"].update({"description": "Tier."}), "tier: description"),
        (lambda r: r["inputs"]["baseline-runs"].update({"default": "3"}), "baseline-runs: default"),
        (lambda r: step_of(r, "report")["env"].pop("INPUT_MEASURED_RUN_ID"), "INPUT_* env"),
        (lambda r: step_of(r, "report")["env"].update({"INPUT_MODE": "run"}), "INPUT_* env"),
        (lambda r: step_of(r, "install").update({"run": "python -m pip install rlhf-canary"}), "the only install"),
        (lambda r: step_of(r, "install").update({"run": step_of(r, "install")["run"] + "\npip install x"}), "only"),
        (lambda r: step_of(r, "report").update({"run": "canary report"}), "action's checkout"),
        (lambda r: step_of(r, "python")["with"].update({"python-version": "3.11"}), "lock-report.sh locks for"),
    ],
)
def test_a_drifted_report_action_is_found(change: Any, fragment: str) -> None:
    drifted = copy.deepcopy(REPORT)
    change(drifted)
    assert any(fragment in p for p in action_problems(drifted, ACTION)), action_problems(drifted, ACTION)


@pytest.mark.parametrize("action", [ACTION, REPORT], ids=["action.yml", "report/action.yml"])
def test_descriptions_fit_the_marketplace(action: dict[str, Any]) -> None:
    assert len(action["description"]) <= MARKETPLACE_DESCRIPTION, len(action["description"])


@pytest.mark.parametrize("path", ["report/action.yml", ".github/workflows/ci.yml"])
def test_setup_python_is_a_node_24_release_pinned_by_sha(path: str) -> None:
    """setup-python v6 and later run on Node 24 (Node 20 is gone from the runners)."""
    text = (ROOT / path).read_text(encoding="utf-8")
    uses = re.findall(r"uses: actions/setup-python@(\S+)(.*)", text)
    assert uses, path
    for ref, comment in uses:
        assert re.fullmatch(r"[0-9a-f]{40}", ref), (path, ref)
        version = re.fullmatch(r" # v(\d+)\.\d+\.\d+", comment)
        assert version is not None, (path, comment)
        assert int(version[1]) >= 6, (path, comment)
