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

from typing import TYPE_CHECKING

from canary_action.errors import TemplateError
from canary_action.github.commands import append_summary

if TYPE_CHECKING:
    from canary_action.compare.result import CompareResult
    from canary_action.github.step import Step
    from canary_action.report.view import Links


def load_team_templates(step: Step, *, publish: bool) -> None:
    """Set step.templates from the `templates` input (mode run and report), or say why it is not used."""
    folder = step.inputs.templates
    if folder is None:
        return
    if not publish:
        step.log.annotate(
            "notice",
            f"templates {folder} is not used in mode measure, which renders nothing for publishing; the publish "
            "job (mode report) reads it from the default branch",
            title="rlhf-canary templates",
        )
        return
    from canary_action.report.templates import load_templates

    try:
        step.templates = load_templates(step.runner.workspace / folder, within=step.runner.workspace)
    except TemplateError as e:
        _fall_back(step, e)
        return
    step.log.line(f"report templates: {', '.join(step.templates.overrides)} from {folder}, the rest rlhf-canary's")


def settle_team_templates(step: Step, result: CompareResult, links: Links) -> None:
    """Render every output once with the team's templates before anything is written or published; on an error,
    fall back to ours for all of them (one look, not a mix of two layouts)."""
    if step.templates is None:
        return
    from canary_action.report.render import TARGETS, render

    try:
        for kind in TARGETS:
            render(result, kind, links, step.templates)
    except TemplateError as e:
        step.templates = None
        _fall_back(step, e)


def _fall_back(step: Step, error: TemplateError) -> None:
    from canary_action.report.escape import text

    said = f"{error.message}; this run's reports use rlhf-canary's own templates"
    step.log.annotate("warning", f"{said}. fix: {error.fix}", title="rlhf-canary: team templates not used")
    append_summary(step.runner.summary_path, f"> ⚠️ {text(said, 1000)}. Fix: {text(error.fix, 500)}.\n\n")
