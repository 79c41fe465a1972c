"""Every relative link in the Markdown the project ships (README, docs/, configs/, the notebooks' text cells)
leads somewhere: the file exists, and a `#section` names a heading of that file as GitHub makes its anchor."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted(
    [ROOT / "README.md", *ROOT.glob("docs/**/*.md"), *ROOT.glob("configs/**/*.md"), *ROOT.glob("benchmarks/**/*.md")]
)
NOTEBOOKS = sorted(ROOT.glob("docs/tutorials/*.ipynb"))
#: [text](target) and [text]: target, outside code spans; images too.
_LINK = re.compile(r"\]\(([^()\s]+(?:\([^()\s]*\)[^()\s]*)*)(?:\s+\"[^\"]*\")?\)|^\s*\[[^\]]+\]:\s+(\S+)", re.M)
_CODE_SPAN = re.compile(r"`[^`\n]*`")


def markdown_of(path: Path) -> str:
    if path.suffix == ".ipynb":
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        return "\n\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    return path.read_text(encoding="utf-8")


def prose_of(text: str) -> str:
    """The text outside fenced code blocks (CommonMark: a fence is 3+ backticks or tildes, a backtick fence's info
    string holds no backtick, and it closes with as many of the same or more)."""
    kept, fence = [], ""
    for line in text.splitlines():
        opening = re.match(r" {0,3}(`{3,}|~{3,})(.*)$", line)
        if not fence and opening and not (opening.group(1)[0] == "`" and "`" in opening.group(2)):
            fence = opening.group(1)
        elif fence and re.fullmatch(rf" {{0,3}}{fence[0]}{{{len(fence)},}}\s*", line):
            fence = ""
        elif not fence:
            kept.append(line)
    return "\n".join(kept)


def links_of(text: str) -> Iterator[str]:
    text = _CODE_SPAN.sub("", prose_of(text))
    for match in _LINK.finditer(text):
        yield match.group(1) or match.group(2)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: markup dropped, lower case, punctuation but '-' and '_' removed, spaces to '-'."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
    text = re.sub(r"[`*]", "", text).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


@cache
def anchors_of(path: Path) -> frozenset[str]:
    found: list[str] = []
    seen: dict[str, int] = {}
    for line in prose_of(markdown_of(path)).splitlines():
        heading = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if heading is None:
            continue
        base = slug(heading.group(1))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.append(base if count == 0 else f"{base}-{count}")
    return frozenset(found)


def broken_links(page: Path) -> list[str]:
    broken = []
    for target in links_of(markdown_of(page)):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:, ...: not checked offline
            continue
        path_part, _, anchor = target.partition("#")
        destination = (page.parent / path_part).resolve() if path_part else page
        if not destination.exists():
            broken.append(f"{target}: no file {destination}")
        elif anchor and destination.suffix in (".md", ".ipynb") and anchor not in anchors_of(destination):
            broken.append(f"{target}: no heading with the anchor #{anchor} in {destination}")
    return broken


@pytest.mark.parametrize("page", PAGES + NOTEBOOKS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_leads_somewhere(page: Path) -> None:
    assert broken_links(page) == []


def test_the_checker_sees_a_broken_file_and_a_broken_section(tmp_path: Path) -> None:
    (tmp_path / "other.md").write_text("# Other page\n\n## CPU threads (`benchmarks/threads.py`)\n", encoding="utf-8")
    page = tmp_path / "page.md"
    page.write_text(
        "[ok](other.md#cpu-threads-benchmarksthreadspy) [ok](#a-heading) `[not a link](nowhere.md)`\n"
        "[gone](missing.md) [moved](other.md#cpu-threads) [web](https://example.com/x#y)\n\n# A heading\n",
        encoding="utf-8",
    )
    assert [line.split(":")[0] for line in broken_links(page)] == ["missing.md", "other.md#cpu-threads"]
