"""Markdown that untrusted text cannot break out of.

Config names, metric keys, versions, op names and error messages come from files a pull request controls
(its config, its metrics.json artifact). Rendered into a PR comment they must stay text: they must not end a
table cell or row, open a link, image, HTML tag or code span, start a heading or list, @mention a person, turn
into an autolink, or spell our hidden sticky-comment marker (`<!--`). `text()` makes any string such text:

- control characters and newlines become spaces (a newline would end the table row); bidirectional
  controls (U+202E and kin) are removed, so that no value can make the text around it read backwards;
- `&`, `<`, `>` become HTML entities (no tag, no comment, no marker: the raw body never holds `<!--`);
- the marks that open emphasis, code, links, strikethrough or math (`$`), and `|` (GFM tables honour a backslash
  before it), are backslash-escaped anywhere; a leading `#`, `+`, `-`, `=` or `1.` too, since the text may begin
  a line;
- `@` gets a word joiner on each side (after it: no @mention; before it: no email address), and `://`, `mailto:`,
  `xmpp:` and `www.` (in any case) a zero-width space, so GitHub's mention and autolink passes (which run on the
  rendered text) find nothing to link.

`mermaid_label()` does the same for the quoted titles of a Mermaid chart, where only a small alphabet is safe.

`Md` marks strings the report built itself from escaped parts; the template environment prints those as they
are and escapes everything else (render.py), so forgetting to escape cannot happen silently.
"""

from __future__ import annotations

import re
from typing import Final

_ZWJ: Final = "\u2060"  # word joiner: invisible, and not a character a GitHub username can hold
_ZWSP: Final = "\u200b"
_ENTITIES: Final = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
_INLINE: Final = re.compile(r"([\\`*_\[\]|~$])")  # emphasis, code, links, tables, strikethrough, math: anywhere
_LINE_START: Final = re.compile(r"^([#+=-]|\d+[.)])")  # headings, lists, setext rules: only at a line start
_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f\u2028\u2029\u0085]+")
_BIDI: Final = re.compile(r"[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_SPACES: Final = re.compile(r"\s+")
# Where GitHub's autolinker starts a link: `scheme://`, an email's `mailto:`/`xmpp:`, and `www.`. A zero-width
# space goes after the colon (before the dot), which no link may hold.
_AUTOLINK: Final = re.compile(r"(?i)(?<=:)(?=//)|(?<=mailto:)|(?<=xmpp:)|(?<=www)(?=\.)")
_MERMAID_UNSAFE: Final = re.compile(r"[^A-Za-z0-9 ._/:,()+-]+")  # no quote, `<`, `%` (directives), `#` (entities)


class Md(str):
    """Markdown the report produced (from escaped parts): templates print it unescaped."""

    __slots__ = ()

    def __html__(self) -> str:
        """Jinja's autoescape leaves objects with __html__ alone: Md is already safe (for markdown)."""
        return self


def text(value: object, limit: int = 200) -> Md:
    """Any value as one line of inert markdown text, cut to `limit` characters (before escaping)."""
    flat = one_line(value, limit)
    out = _LINE_START.sub(lambda m: m.group(1)[:-1] + "\\" + m.group(1)[-1], _INLINE.sub(r"\\\1", flat))
    out = "".join(_ENTITIES.get(c, c) for c in out)  # after the backslashes: an entity's `;` stays whole
    return Md(_AUTOLINK.sub(_ZWSP, out.replace("@", _ZWJ + "@" + _ZWJ)))


_MARKUP: Final = re.compile(r"\\([!-/:-@\[-`{-~])|[`*]")  # an escaped mark (kept, bare), or our code/bold marks
_C1: Final = re.compile(r"[\x80-\x9f]")  # C1 controls: U+009B starts an escape sequence in some terminals


def plain(markdown: str) -> str:
    """Markdown the report built (Md) as the text a reader sees, for a terminal: escapes undone (`step\\_time` is
    step_time), entities decoded, our bold and code marks and the invisible joiners dropped. `plain(text(x))` is
    `one_line(x)` (less zero-width and C1 characters): no control character that a terminal obeys gets through."""
    out = _MARKUP.sub(lambda m: m.group(1) or "", markdown)
    out = out.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")  # &amp; last: "&amp;lt;" is "&lt;"
    return _C1.sub("", out.replace(_ZWJ, "").replace(_ZWSP, ""))


def one_line(value: object, limit: int = 200) -> str:
    """`value` as one line, without control or bidi characters, cut to `limit` characters: not yet escaped."""
    flat = _SPACES.sub(" ", _CONTROL.sub(" ", _BIDI.sub("", str(value)))).strip()
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def mermaid_label(value: str, limit: int = 60) -> str:
    """A title or axis name for inside a Mermaid chart's quotes: no quote, newline, `<` or backtick can get in."""
    return _MERMAID_UNSAFE.sub("_", one_line(value, limit))


def slug(value: str, limit: int = 60) -> str:
    """A name for the hidden marker: [a-z0-9._-] only, so no input can close the comment early."""
    cleaned = re.sub(r"[^a-z0-9._-]+", "-", value.lower()).strip("-.")
    return cleaned[:limit] or "canary"


def link(label: str, url: str | None) -> Md | None:
    """A link we build from the GitHub context (https URLs only); the label is escaped like any text."""
    if not url or not re.fullmatch(r"https://[A-Za-z0-9.-]+(:[0-9]+)?/[^\s()<>\"'`]*", url):
        return None
    return Md(f"[{text(label)}]({url})")


CODE_SAFE: Final = str.maketrans({"`": "'", "|": "¦", "<": "‹", ">": "›", "\\": "/"})


def code(value: str, limit: int = 80) -> str:
    """Text for inside a code span: no backtick (it would end the span), no pipe (GFM ends the cell even
    inside code), no `<` (the raw body must never hold `<!--`), one line without control or bidi characters."""
    return one_line(value, limit).translate(CODE_SAFE)
