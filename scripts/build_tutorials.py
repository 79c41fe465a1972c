"""Write the tutorial notebooks (docs/tutorials/*.ipynb) from their sources (docs/tutorials/src/*.py).

    python scripts/build_tutorials.py            # rewrite every notebook from its source
    python scripts/build_tutorials.py --check    # exit 1 when a notebook differs from its source

A source is Python in the percent format: a line `# %%` starts a code cell, `# %% [markdown]` a markdown
cell (its lines without the leading `# `), and a code line `# !cmd` is the shell line `!cmd` (commented in
the source so that it stays Python for ruff and editors). Anything before the first `# %%` is the source's
own header and stays out of the notebook.

The notebooks are stored without outputs, with stable cell ids, so that they change only when their source
does: the outputs are whatever a run makes of them (tests/tutorials/test_notebooks.py executes them).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
TUTORIALS = ROOT / "docs" / "tutorials"
SOURCES = TUTORIALS / "src"
CELL_MARK = "# %%"
MARKDOWN_MARK = "# %% [markdown]"
SHELL_MARK = "# !"
KERNELSPEC = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}


def sources() -> list[Path]:
    return sorted(SOURCES.glob("*.py"))


def notebook_path(source: Path) -> Path:
    return TUTORIALS / f"{source.stem}.ipynb"


def build(source: Path) -> nbformat.NotebookNode:
    """The notebook of one source: its cells in order, no outputs, ids derived from the position."""
    cells: list[tuple[str, list[str]]] = []
    for line in source.read_text(encoding="utf-8").splitlines():
        if line.startswith(CELL_MARK):
            kind = "markdown" if line.strip() == MARKDOWN_MARK else "code"
            if kind == "code" and line.strip() != CELL_MARK:
                raise ValueError(f"{source.name}: unknown cell marker {line!r} (use {CELL_MARK} or {MARKDOWN_MARK})")
            cells.append((kind, []))
        elif cells:
            cells[-1][1].append(line)
    if not cells:
        raise ValueError(f"{source.name}: no cells (a cell starts with a {CELL_MARK} line)")
    notebook = nbformat.v4.new_notebook()
    notebook.metadata = {"kernelspec": KERNELSPEC, "language_info": {"name": "python"}}
    for index, (kind, lines) in enumerate(cells):
        text = "\n".join(_markdown(lines, source) if kind == "markdown" else _code(lines)).strip("\n")
        if not text:
            raise ValueError(f"{source.name}: cell {index + 1} is empty")
        cell = nbformat.v4.new_markdown_cell(text) if kind == "markdown" else nbformat.v4.new_code_cell(text)
        cell.id = f"{source.stem}-{index:02d}"
        notebook.cells.append(cell)
    nbformat.validate(notebook)
    return notebook


def render(source: Path) -> str:
    return nbformat.writes(build(source)) + "\n"


def _markdown(lines: list[str], source: Path) -> list[str]:
    out = []
    for line in lines:
        if line and not line.startswith("#"):
            raise ValueError(f"{source.name}: a markdown cell's lines start with '#': {line!r}")
        out.append(line.removeprefix("#").removeprefix(" "))
    return out


def _code(lines: list[str]) -> list[str]:
    return [line.replace(SHELL_MARK, "!", 1) if line.lstrip().startswith(SHELL_MARK) else line for line in lines]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 when a notebook is stale")
    args = parser.parse_args()
    stale = []
    for source in sources():
        target, text = notebook_path(source), render(source)
        current = target.read_text(encoding="utf-8") if target.exists() else None
        if current == text:
            continue
        stale.append(target.relative_to(ROOT))
        if not args.check:
            target.write_text(text, encoding="utf-8")
    orphans = sorted({p.stem for p in TUTORIALS.glob("*.ipynb")} - {s.stem for s in sources()})
    for name in orphans:
        print(f"docs/tutorials/{name}.ipynb has no source docs/tutorials/src/{name}.py", file=sys.stderr)
    verb = "differ from their sources (run python scripts/build_tutorials.py)" if args.check else "written"
    for path in stale:
        print(f"{path}: {verb}", file=sys.stderr)
    return 1 if orphans or (stale and args.check) else 0


if __name__ == "__main__":
    sys.exit(main())
