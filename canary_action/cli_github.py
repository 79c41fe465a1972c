"""`canary gh-report`, added to the `canary` group by cli.py (whose main() maps its errors to exit codes). Light:
github/gh_report.py imports its work when the command runs."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import get_args

import click

from canary_action.cli_options import threshold_options
from canary_action.config.thresholds import Tier
from canary_action.github.gh_report import CommentWhen, GhReportRequest, gh_report


@click.command("gh-report")
@click.argument("current", type=click.Path(path_type=Path))
@click.argument("baselines", nargs=-1, type=click.Path(path_type=Path))
@threshold_options
@click.option(
    "--post-comment/--no-comment", default=True, show_default=True, help="Write the sticky pull request comment."
)
@click.option(
    "--update-status/--no-status",
    default=True,
    show_default=True,
    help="Write a check run on the commit (rlhf-canary 0.1 wrote a commit status).",
)
@click.option(
    "--comment-mode",
    type=click.Choice(get_args(CommentWhen)),
    default="always",
    show_default=True,
    help="When to write the comment, as the action's `comment` input: every time, when the verdict changed, or "
    "on a failure (and the recovery after it).",
)
@click.option("-o", "--output", type=click.Path(path_type=Path), help="Also write the markdown report here.")
@click.option(
    "--templates",
    type=click.Path(path_type=Path),
    help="A folder of your own report templates (*.j2, named as ours; docs/report.md, 'Your own templates'): each "
    "replaces ours of its name in the summary, the comment, the check run and -o.",
)
@click.option(
    "--trusted-config",
    is_flag=True,
    help="Judge by the current run's own `thresholds:` block too. Off: by the tier and --threshold-file alone, since "
    "the current run may come from a pull request's code, which must not choose the limits it is judged by.",
)
@click.option(
    "--accept-config-change",
    metavar="SHA",
    help="On a pull request, a run not comparable with the baselines (its data, model, dtype or GPU differ) fails, as "
    "in the action; a maintainer who accepts the change for the pull request's head commit passes its full SHA here "
    "(the result is then neutral, with a note).",
)
def gh_report_command(  # click passes options as keywords
    *,
    current: Path,
    baselines: tuple[Path, ...],
    tier: Tier,
    threshold_file: Path | None,
    post_comment: bool,
    update_status: bool,
    comment_mode: CommentWhen,
    output: Path | None,
    templates: Path | None,
    trusted_config: bool,
    accept_config_change: str | None,
) -> None:
    """Compare (as `canary compare`), write the job summary, and post the sticky PR comment and a check run, from
    inside any workflow step (a job container, other CI tooling).

    GitHub's context comes from the runner's variables (GITHUB_REPOSITORY, GITHUB_EVENT_PATH, GITHUB_API_URL, …);
    the token from GITHUB_TOKEN or GH_TOKEN, which needs `pull-requests: write` and `checks: write`.

    Exit 0 pass or neutral, 1 regression, 2 bad input (and, on a pull request, a run not comparable with the
    baselines: a failed check run says why), 3 the current run crashed or GitHub failed. A token that may
    not write (a fork's) is a warning, and the exit code stays the comparison's.
    """
    request = GhReportRequest(
        current=current,
        baselines=baselines,
        tier=tier,
        threshold_file=threshold_file,
        post_comment=post_comment,
        update_status=update_status,
        comment_mode=comment_mode,
        output=output,
        templates=templates,
        trusted_config=trusted_config,
        accept_config_change=accept_config_change,
    )
    code = gh_report(request, os.environ, sys.stdout)
    if code:
        raise click.exceptions.Exit(code)
