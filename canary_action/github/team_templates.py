"""The action's `templates` input: a team's own report templates, from trusted files only.

Where they are read is where the trusted config is read (step.read_config): the workspace. In mode run that is
the checkout the job trains (a mode for trusted code); in mode report it is the default branch's checkout, and the
pull request's files are never there (the measured artifact is unpacked under output-dir and read as data only).
A folder or file that leads out of the workspace through a symbolic link is refused. Mode measure renders nothing
for publishing, so the input is ignored there, with a notice.

A team template that cannot be used (a syntax error, an undefined name, something the sandbox refuses, a file
that is not UTF-8 or too large) does not stop the report: the action falls back to rlhf-canary's own templates,
says so in a warning and at the top of the job summary, and still publishes the check run and the comment. A
broken template should cost the team its layout for one run, not its regression gate.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from canary_action.errors import TemplateError
from canary_action.github.commands import Log, append_summary

if TYPE_CHECKING:
    from canary_action.compare.result import CompareResult
    from canary_action.report.templates import Templates
    from canary_action.report.view import Links


def load_team_templates(
    folder: str | None, workspace: Path, log: Log, summary_path: Path | None, *, publish: bool
) -> Templates | None:
    """The team's templates from the `templates` input (mode run and report), or None, saying why not used."""
    if folder is None:
        return None
    if not publish:
        log.annotate(
            "notice",
            f"templates {folder} is not used in mode measure, which renders nothing for publishing; the publish "
            "job (mode report) reads it from the default branch",
            title="rlhf-canary templates",
        )
        return None
    from canary_action.report.templates import load_templates

    try:
        templates = load_templates(workspace / folder, within=workspace)
    except TemplateError as e:
        _fall_back(log, summary_path, e)
        return None
    log.line(f"report templates: {', '.join(templates.overrides)} from {folder}, the rest rlhf-canary's")
    return templates


def settle_team_templates(
    templates: Templates | None, log: Log, summary_path: Path | None, result: CompareResult, links: Links
) -> Templates | None:
    """Render every output once with the team's templates before anything is written or published; on an error,
    fall back to ours for all of them (one look, not a mix of two layouts): the templates to use, None for ours."""
    if templates is None:
        return None
    from canary_action.report.render import TARGETS, render

    try:
        for kind in TARGETS:
            render(result, kind, links, templates)
    except TemplateError as e:
        _fall_back(log, summary_path, e)
        return None
    return templates


def _fall_back(log: Log, summary_path: Path | None, error: TemplateError) -> None:
    from canary_action.report.escape import text

    said = f"{error.message}; this run's reports use rlhf-canary's own templates"
    log.annotate("warning", f"{said}. fix: {error.fix}", title="rlhf-canary: team templates not used")
    append_summary(summary_path, f"> ⚠️ {text(said, 1000)}. Fix: {text(error.fix, 500)}.\n\n")
