"""The runner image, tested from the outside: its lock, the CI stack, action.yml, the Dockerfile, .dockerignore.

No Docker engine is available (DESIGN.md), so the image is never built here; instead its inputs must agree
(tests/image_checks.py). Each check passes on the repository's files and is shown to fail on one small bad file
per failure mode in tests/fixtures/image/.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests import image_checks as checks

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "image"
LOCK = ROOT / "requirements" / "image.lock"
CONSTRAINTS = ROOT / "requirements" / "ci-constraints.txt"
PYPROJECT = ROOT / "pyproject.toml"
DOCKERFILE = ROOT / "Dockerfile"
LOCK_SCRIPT = ROOT / "scripts" / "lock-image.sh"
HADOLINT = Path(sys.executable).parent / "hadolint"


def found(problems: list[str], *fragments: str) -> None:
    """Exactly one problem names all the fragments (others may come from the repository's moving files)."""
    matching = [p for p in problems if all(f in p for f in fragments)]
    assert len(matching) == 1, (fragments, problems)


# --- the lock ----------------------------------------------------------------------------------------------------


def test_the_lock_satisfies_the_pyproject() -> None:
    assert checks.lock_problems(LOCK, PYPROJECT) == []


def test_the_lock_says_how_to_regenerate_it() -> None:
    head = LOCK.read_text(encoding="utf-8")[:1000]
    assert "bash scripts/lock-image.sh" in head
    assert "requirements/ci-constraints.txt" in head


@pytest.mark.parametrize(
    ("fixture", "fragments"),
    [
        ("unhashed.lock", ("peft==0.21.2", "no --hash=sha256:")),
        ("outside_range.lock", ("trl==2.0.0", "outside pyproject.toml's trl<2,>=1.0", "[train]")),
        ("missing_requirement.lock", ("peft>=0.15", "is not locked")),
        ("cpu_torch.lock", ("torch==2.13.0+cpu", "local build")),
        ("local_index.lock", ("--extra-index-url file:///opt/pypi/simple", "https://pypi.org/simple alone")),
    ],
)
def test_a_bad_lock_is_found(fixture: str, fragments: tuple[str, ...]) -> None:
    found(checks.lock_problems(FIXTURES / "lock" / fixture, PYPROJECT), *fragments)


def test_the_locked_torch_is_the_cuda_build_of_the_base_image() -> None:
    assert checks.cuda_problems(DOCKERFILE, LOCK) == []
    found(checks.cuda_problems(DOCKERFILE, FIXTURES / "lock" / "cpu_torch.lock"), "for CUDA none")
    found(
        checks.cuda_problems(FIXTURES / "dockerfile" / "wrong_cuda.Dockerfile", LOCK),
        "the base is CUDA 12",
        "built for CUDA 13",
    )


# --- CI trains on the image's stack -------------------------------------------------------------------------------


def test_ci_constraints_pin_the_locked_stack() -> None:
    assert checks.stack_problems(LOCK, CONSTRAINTS) == []


@pytest.mark.parametrize(
    ("lock", "constraints", "fragments"),
    [
        (LOCK, FIXTURES / "constraints" / "drifted.txt", ("torch==2.12.1", "image.lock has torch==2.13.0")),
        (LOCK, FIXTURES / "constraints" / "unpinned.txt", ("trl is not pinned",)),
        (FIXTURES / "lock" / "old_trl.lock", CONSTRAINTS, ("trl==1.16.0", "old_trl.lock has trl==1.15.0")),
    ],
)
def test_drift_between_ci_and_the_lock_is_found(lock: Path, constraints: Path, fragments: tuple[str, ...]) -> None:
    found(checks.stack_problems(lock, constraints), *fragments)


def test_this_venv_runs_the_locked_stack() -> None:
    """CI's numbers stand for the image's: the same releases (torch's +cpu label aside)."""
    assert checks.installed_stack_problems(LOCK, checks.installed_versions()) == []


def test_a_venv_off_the_lock_is_found() -> None:
    installed = checks.installed_versions()
    found(
        checks.installed_stack_problems(FIXTURES / "lock" / "old_trl.lock", installed),
        f"trl {installed['trl']} is installed here",
        "trl==1.15.0",
    )
    found(checks.installed_stack_problems(LOCK, {**installed, "peft": None}), "peft is not installed")


def test_a_local_version_label_is_the_same_release() -> None:
    lock_torch = checks.read_lock(LOCK)[0]["torch"].version
    installed = {**checks.installed_versions(), "torch": f"{lock_torch}+cpu"}
    assert checks.installed_stack_problems(LOCK, installed) == []


# --- action.yml ---------------------------------------------------------------------------------------------------


def test_the_action_runs_the_image_of_this_version() -> None:
    assert checks.action_image_problems(ROOT / "action.yml", PYPROJECT) == []


@pytest.mark.parametrize(
    ("fixture", "fragment"),
    [
        ("wrong_tag.yml", "rlhf-canary:0.0.9, but pyproject.toml is version"),
        ("builds_locally.yml", "'Dockerfile', not the prebuilt image"),
    ],
)
def test_a_wrong_action_image_is_found(fixture: str, fragment: str) -> None:
    found(checks.action_image_problems(FIXTURES / "action" / fixture, PYPROJECT), fragment)


# --- the Dockerfile -----------------------------------------------------------------------------------------------


def test_the_dockerfile_agrees_with_the_repository() -> None:
    assert checks.dockerfile_problems(DOCKERFILE, ROOT) == []
    assert checks.image_env_problems(DOCKERFILE) == []
    assert checks.python_problems(DOCKERFILE, LOCK_SCRIPT) == []
    assert checks.context_problems(DOCKERFILE, ROOT / ".dockerignore", ROOT) == []
    assert checks.package_source_problems(DOCKERFILE, PYPROJECT) == []


def test_a_dockerfile_that_leaves_out_the_templates_is_found(tmp_path: Path) -> None:
    """Issue 15 item 17: templates/ is a top-level folder the wheel maps into the package; the image must copy it."""
    text = DOCKERFILE.read_text(encoding="utf-8")
    without = tmp_path / "Dockerfile"
    without.write_text(re.sub(r"(?m)^COPY templates/ .*\n", "", text), encoding="utf-8")
    assert without.read_text(encoding="utf-8") != text
    problems = checks.package_source_problems(without, PYPROJECT)
    assert len(problems) == 1
    found(problems, "templates/ is never copied to /opt/rlhf-canary/src/templates/")
    late = tmp_path / "late.Dockerfile"
    moved = re.sub(r"(?m)^COPY templates/ .*\n", "", text) + "COPY templates/ /opt/rlhf-canary/src/templates/\n"
    late.write_text(moved, encoding="utf-8")
    found(checks.package_source_problems(late, PYPROJECT), "templates/ is copied after the package is installed")


@pytest.mark.parametrize(
    ("fixture", "fragments"),
    [
        ("unpinned_base.Dockerfile", ("FROM nvidia/cuda:13.0.1-base-ubuntu24.04 is not pinned by @sha256:",)),
        ("no_require_hashes.Dockerfile", ("the lock is installed without --require-hashes",)),
        ("package_first.Dockerfile", ("pyproject.toml is copied before the lock is installed",)),
        ("missing_entrypoint.Dockerfile", ("/opt/rlhf-canary/entrypoint/run.py", "entrypoint/run.py, which does not")),
    ],
)
def test_a_bad_dockerfile_is_found(fixture: str, fragments: tuple[str, ...]) -> None:
    path = FIXTURES / "dockerfile" / fixture
    problems = checks.dockerfile_problems(path, ROOT)
    found(problems, *fragments)
    assert len(problems) == 1, problems  # the fixtures are the real layout with one fault


def test_an_image_that_does_not_name_itself_is_found() -> None:
    problems = checks.image_env_problems(FIXTURES / "dockerfile" / "no_image_env.Dockerfile")
    assert len(problems) == 2
    found(problems, "ENV CANARY_IMAGE=ghcr.io/rlhf-canary/rlhf-canary:${VERSION} is missing")
    found(problems, "ENV CANARY_IMAGE_REVISION=${REVISION} is missing")


def test_a_python_other_than_the_locks_is_found() -> None:
    found(
        checks.python_problems(FIXTURES / "dockerfile" / "wrong_python.Dockerfile", LOCK_SCRIPT),
        "installs Python 3.11, but lock-image.sh locks for Python 3.12",
    )


def test_a_dockerignore_that_drops_a_copied_file_is_found() -> None:
    problems = checks.context_problems(DOCKERFILE, FIXTURES / "dockerignore" / "drops_lock.dockerignore", ROOT)
    assert problems == [problems[0]]
    found(problems, "requirements/image.lock is kept out of the build context")


def test_the_dockerignore_keeps_the_heavy_and_private_folders_out() -> None:
    patterns = checks.read_dockerignore(ROOT / ".dockerignore")
    for path in (".git/config", ".venv/bin/python", "runs/x/metrics.json", "tests/conftest.py", "canary_action/x.pyc"):
        assert checks.is_ignored(path, patterns), path
    for path in ("pyproject.toml", "templates/check_summary.md.j2", "canary_action/cli.py", "entrypoint/main.py"):
        assert not checks.is_ignored(path, patterns), path


@pytest.mark.skipif(not HADOLINT.exists(), reason="hadolint is not installed here (the dev extra has it)")
def test_hadolint_passes_and_its_one_ignore_is_needed(tmp_path: Path) -> None:
    def hadolint(path: Path) -> subprocess.CompletedProcess[str]:
        command = [str(HADOLINT), "--no-color", str(path)]
        return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)

    done = hadolint(DOCKERFILE)
    assert done.returncode == 0, done.stdout + done.stderr
    text = DOCKERFILE.read_text(encoding="utf-8")
    assert re.findall(r"# hadolint ignore=(\S+)", text) == ["DL3008"]
    unignored = tmp_path / "Dockerfile"
    unignored.write_text(re.sub(r"# hadolint ignore=\S+\n", "", text), encoding="utf-8")
    done = hadolint(unignored)
    assert done.returncode != 0
    assert "DL3008" in done.stdout
