"""The shape the README's architecture promises: imports under train/ go one way, launch -> run."""

from __future__ import annotations

import ast
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
