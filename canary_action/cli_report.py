"""`canary report`, and how every command prints or writes a report (`canary compare` and `canary pair` too)."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Final, cast

import click

from canary_action.destinations import write_output
from canary_action.errors import UsageError

if TYPE_CHECKING:
    from canary_action.api import ReportFormat
    from canary_action.compare.result import CompareResult
    from canary_action.report.templates import Templates
    from canary_action.report.view import Links

TEMPLATES_HELP: Final = (
    "A folder of your own report templates (*.j2, named as ours; docs/report.md, 'Your own templates'): each "
    "replaces ours of its name in the GitHub formats."
)


@click.command("report")
@click.argument("result_file", metavar="RESULT", type=click.Path(path_type=Path))
@click.option(
    "--format",
    "kind",
    type=click.Choice(["comment", "check", "summary", "markdown", "terminal"]),
    help="comment: the sticky PR comment; check: the check run's output as JSON (title, summary, text); "
    "summary: the job summary; markdown: GitHub markdown of what `canary compare` prints; terminal: that report "
    "for people (aligned columns, colour on a terminal). Default: terminal when printing to a terminal, else "
    "markdown.",
)
@click.option("-o", "--output", type=click.Path(path_type=Path), help="Write here instead of stdout.")
@click.option("--repo", metavar="OWNER/NAME", help="The repository the result is for: linked in the report.")
@click.option("--pr", metavar="N", help="Its pull request: the report links to it (needs --repo). Nothing is posted.")
@click.option("--templates", type=click.Path(path_type=Path), help=TEMPLATES_HELP)
def report_command(  # click passes options as keywords
    *,
    result_file: Path,
    kind: str | None,
    output: Path | None,
    repo: str | None,
    pr: str | None,
    templates: Path | None,
) -> None:
    """Render a compare result (`canary compare --json`) for GitHub or a terminal.

    --repo and --pr (rlhf-canary 0.1's flags) name the pull request the report is for and link it in the report;
    this command posts nothing (the action publishes).
    """
    from canary_action.report.load import read_result
    from canary_action.report.view import Links

    default = "terminal" if output is None and sys.stdout.isatty() else "markdown"
    kind = report_kind(kind, output, templates, default=default)
    links = Links(repository=_repository(repo), pull_request=_pull_request(pr, repo))
    check_templates(templates)  # before reading the result: a template error is known at once
    result = read_result(result_file)
    target = ""
    if links.repository is not None:
        target = f" for {links.repository}" + (f"#{links.pull_request}" if links.pull_request is not None else "")
    what = f"{kind} report{target}, verdict {result.verdict}"
    emit_report(result, kind, output, what, links=links, templates=templates)


def report_kind(kind: str | None, output: Path | None, templates: Path | None, *, default: str) -> str:
    """The format asked for, else markdown for a file or with --templates (they shape the GitHub formats), else
    `default`. --templates with the terminal format, which uses none, is refused rather than ignored."""
    if kind == "terminal" and templates is not None:
        raise UsageError(
            "--templates shapes the GitHub formats; the terminal format uses no template",
            fix="pass --format markdown (or comment, summary, check) with --templates, or leave --templates out",
        )
    if kind is not None:
        return kind
    return "markdown" if output is not None or templates is not None else default


def check_templates(folder: Path | None) -> Templates | None:
    if folder is None:
        return None
    from canary_action.report.templates import load_templates

    return load_templates(folder)


def emit_report(
    result: CompareResult,
    kind: str,
    output: Path | None,
    what: str,
    *,
    links: Links | None = None,
    templates: Path | None = None,
) -> None:
    """A report of `kind`: the terminal form coloured as use_colour says (never in a file), or GitHub's."""
    from canary_action import api
    from canary_action.report.terminal import use_colour

    colour = kind == "terminal" and output is None and use_colour(sys.stdout)
    text = api.render(result, cast("ReportFormat", kind), templates=templates, colour=colour, links=links)
    emit(text, output, what, colour=colour)


# GitHub's rules: an owner is 1-39 letters, digits and hyphens (underscores in managed users' names), not starting
# with a hyphen; a repository name 1-100 letters, digits, '.', '_' and '-', never '.' or '..'.
_OWNER_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,38}/(?!\.\.?\Z)[A-Za-z0-9._-]{1,100}")


def _repository(value: str | None) -> str | None:
    if value is None or _OWNER_NAME.fullmatch(value):
        return value
    from canary_action.metrics.io import clip_text

    shown = clip_text(repr(value), 120)
    if "://" in value or value.lower().startswith("github.com/"):
        why = f"--repo {shown} is a URL, not OWNER/NAME"
    else:
        why = f"--repo {shown} is not a repository as OWNER/NAME"
    raise UsageError(
        why, fix='pass it as GitHub names it, e.g. --repo octo-org/my-repo (in a workflow: --repo "$GITHUB_REPOSITORY")'
    )


def _pull_request(value: str | None, repo: str | None) -> int | None:
    if value is None:
        return None
    problem = None
    if not re.fullmatch(r"[1-9][0-9]*", value):
        problem = "is not a pull request number (a whole number from 1, written plainly)"
    elif len(value) > 10 or int(value) > _MAX_NUMBER:
        problem = f"is larger than any pull request number (at most {_MAX_NUMBER:,})"
    if problem is not None:
        from canary_action.metrics.io import clip_text

        raise UsageError(f"--pr {clip_text(repr(value), 60)} {problem}", fix="pass the number alone, e.g. --pr 12")
    if repo is None:
        raise UsageError(
            f"--pr {value} needs --repo: a pull request number is one of a repository's",
            fix="add --repo OWNER/NAME, e.g. --repo octo-org/my-repo",
        )
    return int(value)


_MAX_NUMBER: Final = 2**31 - 1  # GitHub's issue and pull request numbers are 32-bit integers


def result_json(result: CompareResult) -> str:
    return result.model_dump_json(indent=2) + "\n"


def emit(text: str, output: Path | None, what: str, *, colour: bool = False) -> None:
    """Print a report, or write it to `output` and say so on stderr (stdout stays the report's alone). `colour`:
    keep the text's colour codes even where click would strip them (FORCE_COLOR into a pipe)."""
    if output is None:
        click.echo(text, nl=False, color=True if colour else None)
        return
    write_output(output, text, flag="-o")
    click.echo(f"{what}\nwrote {output}", err=True)
