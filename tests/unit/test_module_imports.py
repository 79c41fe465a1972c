"""The house rule for imports: no two modules of canary_action import each other, at the top, inside a function
or for type checking only. A pair that does is one concern in two files, or a helper in the wrong one."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "canary_action"


def module_names() -> dict[str, Path]:
    names = {}
    for file in PACKAGE.rglob("*.py"):
        parts = file.relative_to(PACKAGE.parent).with_suffix("").parts
        names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = file
    return names


def imports_of(module: str, file: Path, known: dict[str, Path]) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            named = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
        elif isinstance(node, ast.Import):
            named = [alias.name for alias in node.names]
        else:
            continue
        # importing one's own package (to reach a sibling: `from canary_action.config import schema`) is not a
        # dependency on the package's __init__
        found.update(n for n in named if n in known and n != module and not module.startswith(f"{n}."))
    return found


def test_no_two_modules_import_each_other() -> None:
    known = module_names()
    graph = {name: imports_of(name, file, known) for name, file in known.items()}
    mutual = sorted({tuple(sorted((a, b))) for a, targets in graph.items() for b in targets if a in graph[b]})
    assert mutual == []
