"""The shape the README's architecture promises: imports under train/ go one way, launch -> run."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

TRAIN = Path(__file__).parents[2] / "canary_action" / "train"


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


def test_the_per_process_runner_never_imports_the_orchestration() -> None:
    runner_side = [p for p in TRAIN.rglob("*.py") if "launch" not in p.relative_to(TRAIN).parts]
    assert runner_side, "no modules found under train/"
    offenders = {
        str(p.relative_to(TRAIN)): sorted(n for n in _imports(p) if n.startswith("canary_action.train.launch"))
        for p in runner_side
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_every_way_to_execute_lives_in_launch() -> None:
    modules = {p.stem for p in (TRAIN / "launch").glob("*.py")}
    assert {"single", "ranks", "rank_worker"} <= modules
    assert not (TRAIN / "launch.py").exists()
    assert not (TRAIN / "worker.py").exists()


# --- the top level (DESIGN.md's layout) and how templates/ ships --------------------------------------------------

ROOT = Path(__file__).parents[2]


def test_the_top_level_is_the_layout_design_md_names() -> None:
    for name in ("action.yml", "Dockerfile", "pyproject.toml"):
        assert (ROOT / name).is_file(), name
    for name in ("entrypoint", "canary_action", "templates", "configs", "tests"):
        assert (ROOT / name).is_dir(), name
    assert not (ROOT / "canary_action" / "templates").exists(), "templates/ lives at the top level only"
    assert sorted(p.name for p in (ROOT / "templates").iterdir()) == [
        "_parts.md.j2", "check_summary.md.j2", "check_text.md.j2", "compare.md.j2", "pr_comment.md.j2",
        "step_summary.md.j2",
    ]  # fmt: skip


def test_the_wheel_maps_templates_into_the_package() -> None:
    """What pyproject.toml tells setuptools (the packaging test builds the wheel itself, slowly): every package
    folder listed, and templates/ shipped as canary_action/templates with its *.j2 files."""
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    folders = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "canary_action").rglob("__init__.py")}
    assert set(setuptools["packages"]) == folders | {"canary_action.templates"}
    assert setuptools["package-dir"] == {"canary_action.templates": "templates"}
    assert setuptools["package-data"]["canary_action.templates"] == ["*.j2"]
    assert "py.typed" in setuptools["package-data"]["canary_action"]


def test_a_checkout_renders_from_its_top_level_templates() -> None:
    """An editable install (and the tests) find templates/ beside canary_action/; a wheel has its own copy."""
    from canary_action.report.templates import ours

    assert ours() == ROOT / "templates"
