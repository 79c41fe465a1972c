"""Rendering a CompareResult with the templates (templates.py: ours in templates/, or a team's folder over
them), inside GitHub's size limits.

The environment escapes for markdown: a value a template prints is either `Md` (built by the view model
from escaped parts) or a macro's output, or it goes through `escape.text`; a bool, None or any other object
is an error, never silently printed.
StrictUndefined turns a misspelt field into an error instead of an empty cell.

A PR comment's first line is always the config's sticky marker, whatever a team's template prints: the
action finds its comment by that line. Any marker a template printed is removed and ours put first.

Size budgets (GitHub's documented limits): a PR comment body 65,536 characters, a check run's summary and
text 65,535 each (counted here in UTF-16 code units, as GitHub's API does, so emoji count twice), a job
summary 1 MiB (bytes). Over budget, parts are dropped in a fixed order — charts (sparklines stay),
per-step detail, the env diff — and the report says what went and where the full report is.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Literal

from canary_action.compare.result import CompareResult
from canary_action.report.escape import Md
from canary_action.report.templates import Templates, default_templates
from canary_action.report.view import Links, ReportView, build_view

Kind = Literal["comment", "check-summary", "check-text", "summary", "markdown"]
DROP_ORDER: Final = ("charts", "per-step detail", "the environment diff")


def _utf16(out: str) -> int:
    return len(out.encode("utf-16-le")) // 2


def _utf8(out: str) -> int:
    return len(out.encode("utf-8"))


@dataclass(frozen=True)
class Target:
    template: str
    budget: int | None
    measure: Callable[[str], int]
    limit_name: str
    full_report: str
    """Where the reader finds what was dropped."""


TARGETS: Final[dict[Kind, Target]] = {
    "comment": Target("pr_comment.md.j2", 65_536, _utf16, "a PR comment's 65,536 characters",
                      "the check run's details and the job summary"),
    "check-summary": Target("check_summary.md.j2", 65_535, _utf16, "a check run summary's 65,535 characters",
                            "the check run's details and the job summary"),
    "check-text": Target("check_text.md.j2", 65_535, _utf16, "a check run text's 65,535 characters",
                         "the job summary and the uploaded artifact"),
    "summary": Target("step_summary.md.j2", 1_048_576, _utf8, "a job summary's 1 MiB",
                      "the uploaded artifact (result.json)"),
    "markdown": Target("compare.md.j2", None, _utf8, "", ""),
}  # fmt: skip


def render(result: CompareResult, kind: Kind, links: Links | None = None, templates: Templates | None = None) -> str:
    """The report for `kind`, degraded as little as its budget needs (templates: ours when None)."""
    return render_view(build_view(result, links), kind, templates)


def check_output(
    result: CompareResult, links: Links | None = None, templates: Templates | None = None
) -> dict[str, str]:
    """A check run's `output` (title, summary, text), as the REST API takes it."""
    view = build_view(result, links)
    failed = [c.name for c in result.checks if c.status == "fail"]
    title = f"rlhf-canary: {result.verdict}" + (f" ({', '.join(failed)})" if failed else "")
    return {
        "title": title[:255],
        "summary": render_view(view, "check-summary", templates),
        "text": render_view(view, "check-text", templates),
    }


def render_view(view: ReportView, kind: Kind, templates: Templates | None = None) -> str:
    target = TARGETS[kind]
    templates = templates or default_templates()
    for level in range(len(DROP_ORDER) + 1):
        note = Md(
            f"To fit {target.limit_name}, this report leaves out {_listed(DROP_ORDER[:level])}; "
            f"the full report is in {target.full_report}."
        )
        out = templates.render(target.template, v=view.degraded(level, note))
        if kind == "comment":
            out = marker_first(out, view.marker)
        if target.budget is None or target.measure(out) <= target.budget:
            return out
    return _cut(out, target)


def _cut(out: str, target: Target) -> str:
    """Last resort (our own content is bounded; a result file's long text is not): cut at a line and say so,
    after closing a <details> the cut left open, so that the note is not hidden in a collapsed section. (No code
    fence is open by then: the charts went first.)"""
    assert target.budget is not None
    tail = f"\n\n… cut to fit {target.limit_name}; the full report is in {target.full_report}.\n"
    lines, size = [], target.measure(_CLOSE_DETAILS + tail)
    for line in out.splitlines(keepends=True):
        size += target.measure(line)
        if size > target.budget:
            break
        lines.append(line)
    left_open = sum(line.count("<details>") - line.count("</details>") for line in lines) > 0
    return "".join(lines) + (_CLOSE_DETAILS if left_open else "") + tail


_CLOSE_DETAILS: Final = "\n\n</details>"  # the templates never nest one <details> in another


def _listed(parts: tuple[str, ...]) -> str:
    if len(parts) <= 1:
        return "".join(parts)
    return ", ".join(parts[:-1]) + " and " + parts[-1]


def marker_first(body: str, marker: str) -> str:
    """`body` with `marker` as its first line and no other sticky marker anywhere in it."""
    rest = _ANY_MARKER.sub("", body).lstrip("\n")
    return f"{marker}\n{rest}"


# Ours, and every spelling GitHub would keep hidden as the same comment (any spacing or case).
_ANY_MARKER: Final = re.compile(r"<!--\s*rlhf-canary:sticky:.*?-->[ \t]*\n?", re.IGNORECASE | re.DOTALL)
