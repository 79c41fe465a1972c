"""Rendering a CompareResult with the templates in canary_action/templates, inside GitHub's size limits.

The environment escapes for markdown: a value a template prints is either `Md` (built by the view model
from escaped parts) or a macro's output, or it goes through `escape.text`; a bool, None or any other object
is an error, never silently printed.
StrictUndefined turns a misspelt field into an error instead of an empty cell.

Size budgets (GitHub's documented limits): a PR comment body 65,536 characters, a check run's summary and
text 65,535 each (counted here in UTF-16 code units, as GitHub's API does, so emoji count twice), a job
summary 1 MiB (bytes). Over budget, parts are dropped in a fixed order — charts (sparklines stay),
per-step detail, the env diff — and the report says what went and where the full report is.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Final, Literal

import jinja2
import markupsafe

from canary_action.compare.result import CompareResult
from canary_action.report.escape import Md, text
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


def render(result: CompareResult, kind: Kind, links: Links | None = None) -> str:
    """The report for `kind`, degraded as little as its budget needs."""
    return render_view(build_view(result, links), kind)


def check_output(result: CompareResult, links: Links | None = None) -> dict[str, str]:
    """A check run's `output` (title, summary, text), as the REST API takes it."""
    view = build_view(result, links)
    failed = [c.name for c in result.checks if c.status == "fail"]
    title = f"rlhf-canary: {result.verdict}" + (f" ({', '.join(failed)})" if failed else "")
    return {
        "title": title[:255],
        "summary": render_view(view, "check-summary"),
        "text": render_view(view, "check-text"),
    }


def render_view(view: ReportView, kind: Kind) -> str:
    target = TARGETS[kind]
    template = environment().get_template(target.template)
    for level in range(len(DROP_ORDER) + 1):
        note = Md(
            f"To fit {target.limit_name}, this report leaves out {_listed(DROP_ORDER[:level])}; "
            f"the full report is in {target.full_report}."
        )
        out = template.render(v=view.degraded(level, note))
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


def _finalize(value: object) -> str:
    if isinstance(value, Md | markupsafe.Markup):  # Markup: a macro's output, already rendered from safe parts
        return value
    if isinstance(value, bool) or value is None:
        raise TypeError(f"a template printed {value!r}: test it with `if`, do not print it")
    if isinstance(value, int | str):
        return text(value)
    raise TypeError(f"a template printed a {type(value).__name__}: format it in the view model")


@cache
def environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.PackageLoader("canary_action", "templates"),
        undefined=jinja2.StrictUndefined,
        # Autoescape on, so that macro output is Markup and passes; _finalize has already turned every other value
        # into markdown-escaped Md (which declares __html__), so HTML escaping itself never applies.
        autoescape=True,
        finalize=_finalize,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
