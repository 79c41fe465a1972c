"""Reading a rendered report back the way GitHub does, to test what a reader would see.

markdown-it-py's "gfm-like" preset: CommonMark with GFM tables and strikethrough, raw HTML passed through and
linkify on (less its fuzzy domains, which GitHub does not link). GitHub then runs passes over the rendered
text that markdown-it does not: @mentions, and autolinks for `www.` and any `scheme://` (linkify-it only
knows some schemes and TLDs). Those are modelled here as patterns that no text token may hold.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Final

from markdown_it import MarkdownIt
from markdown_it.token import Token

# GitHub autolinks only `www.`, `scheme://` and email addresses; linkify-it would also link a bare `name.com`.
MD: Final = MarkdownIt("gfm-like")
MD.linkify.set({"fuzzy_link": False})
MENTION: Final = re.compile(r"@[A-Za-z0-9]")  # GitHub links @name and @org/team; an email's domain starts so too
AUTOLINK: Final = re.compile(r"(?i)www\.|[a-z][a-z0-9+.-]*://|(?:mailto|xmpp):[a-z0-9._+-]")
INVISIBLE: Final = str.maketrans("", "", "\u2060\u200b")  # what escape.text adds to break mentions and autolinks


@lru_cache(maxsize=16)
def parse(markdown: str) -> tuple[Token, ...]:
    """The block token stream (cached: the tests read one report several ways; nobody changes the tokens)."""
    return tuple(MD.parse(markdown))


def tokens(markdown: str) -> list[Token]:
    """Every token, the inline children in place of their parent's position (after it)."""
    out: list[Token] = []
    for token in parse(markdown):
        out.append(token)
        out.extend(token.children or [])
    return out


def html(markdown: str) -> list[str]:
    """The raw HTML the renderer would pass through, block and inline."""
    return [t.content for t in tokens(markdown) if t.type in ("html_block", "html_inline")]


def links(markdown: str) -> list[str]:
    """Targets of every link and image, autolinks and linkify's included."""
    out = []
    for t in tokens(markdown):
        if t.type == "link_open":
            out.append(str(t.attrs["href"]))
        elif t.type == "image":
            out.append(str(t.attrs["src"]))
    return out


def plain(inline: Token) -> str:
    """What a reader sees of an inline token: its text and code, invisible joiners removed."""
    parts = []
    for child in inline.children or []:
        if child.type in ("text", "code_inline"):
            parts.append(child.content)
        elif child.type in ("softbreak", "hardbreak"):
            parts.append("\n")
    return "".join(parts).translate(INVISIBLE)


@dataclass(frozen=True)
class Table:
    header: list[str]
    rows: list[list[str]]
    """Each cell's plain text."""
    source_widths: list[int]
    """Cells per line of the source (header, delimiter, rows), counted as GFM splits a row."""


def tables(markdown: str) -> list[Table]:
    lines = markdown.splitlines()
    found: list[Table] = []
    stream = parse(markdown)
    i = 0
    while i < len(stream):
        if stream[i].type != "table_open":
            i += 1
            continue
        start, end = stream[i].map or (0, 0)
        header: list[str] = []
        rows: list[list[str]] = []
        row: list[str] = []
        i += 1
        while stream[i].type != "table_close":
            t = stream[i]
            if t.type == "tr_open":
                row = []
            elif t.type == "inline":
                row.append(plain(t))
            elif t.type == "tr_close":
                if header:
                    rows.append(row)
                else:
                    header = row
            i += 1
        found.append(Table(header, rows, [_gfm_width(line) for line in lines[start:end]]))
    return found


def _gfm_width(line: str) -> int:
    """Cells in a table line: pipes not right after a backslash split it (even inside code spans, as in GFM)."""
    body = line.strip()
    cells = re.split(r"(?<!\\)\|", body)
    if body.startswith("|"):
        cells = cells[1:]
    if body.endswith("|") and not body.endswith("\\|"):
        cells = cells[:-1]
    return len(cells)


def table_problems(markdown: str) -> list[str]:
    """Rows whose width differs from their header's, in the token stream or in the source lines."""
    problems = []
    for n, table in enumerate(tables(markdown)):
        width = len(table.header)
        problems += [f"table {n}: row {r} has {len(row)} cells, not {width}" for r, row in enumerate(table.rows)
                     if len(row) != width]  # fmt: skip
        problems += [f"table {n}: source line {k} splits into {w} cells, not {width}"
                     for k, w in enumerate(table.source_widths) if w != width]  # fmt: skip
    return problems


def text_tokens(markdown: str) -> list[str]:
    """The content of every text token: what GitHub's mention and autolink passes read."""
    return [t.content for t in tokens(markdown) if t.type == "text"]
