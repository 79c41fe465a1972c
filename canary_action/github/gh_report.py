"""`canary gh-report` (rlhf-canary 0.1's command): publish a comparison on GitHub from any workflow step — a job
`container:`, a wrapper around other tooling — without the action. What the action's mode run does after it has
trained, through the same parts: the runner's variables and event payload as the action reads them
(inputs.read_runner, context.event_context), the same client, Step's publishing (check run, sticky comment,
refusals degraded to warnings) and Step's exit code.

    compare (as `canary compare`) ──► the job summary and -o FILE ──► check run + sticky comment

Written before anything is posted, so GitHub failing loses nothing. Where it posts:

- a pull request (pull_request, pull_request_target, a workflow_run that lists one): the check run on the event's
  head commit (never the merge commit GITHUB_SHA is on a pull_request), and the sticky comment while the pull
  request's head is still that commit (a newer commit's run comments instead);
- any other event (push, schedule, workflow_dispatch): the check run on the event's commit, no comment;
- a fork's pull_request: its token is read-only, so nothing is posted, and a notice says how to publish instead;
- no token (GITHUB_TOKEN, GH_TOKEN: never a flag, a command line shows in `ps`): a warning, nothing posted.

Exit codes are the action's: 0 pass or neutral, 1 regression, 2 bad input (files, flags, not inside a workflow),
3 a crashed run or GitHub failing (unreachable, a 5xx after the retries, a 401 bad token) — a regression stays 1
then. A refused write (403/404: the token lacks `checks: write` or `pull-requests: write`) is a warning naming the
permission, and the exit code stays the comparison's, as in the action.

The token is not masked with `::add-mask::` as the action masks its input: the runner already masks
`github.token` and secrets, and outside GitHub's runner such a line would print the token itself.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final, Literal, TextIO

from canary_action.config.thresholds import Tier
from canary_action.errors import CanaryError, GitHubError

if TYPE_CHECKING:
    from canary_action.compare.result import CompareResult
    from canary_action.github.step import Step
    from canary_action.report.view import Links

CommentWhen = Literal["always", "on-change", "on-failure"]
#: Where the limits come from when the current run's own thresholds block is not trusted (no --trusted-config).
UNTRUSTED_BLOCK: Final = "the tier and threshold file alone (--trusted-config: the current run's own block)"
PERMISSIONS_FIX = (
    "give the step `env: GITHUB_TOKEN: ${{ github.token }}` and the job `permissions: pull-requests: write, "
    "checks: write`"
)


@dataclass(frozen=True)
class GhReportRequest:
    """The command line of `canary gh-report`."""

    current: Path
    baselines: tuple[Path, ...]
    tier: Tier = "default"
    threshold_file: Path | None = None
    post_comment: bool = True
    update_status: bool = True
    """The check run (0.1 posted a commit status; a check run carries the report)."""
    comment_mode: CommentWhen = "always"
    output: Path | None = None
    templates: Path | None = None
    """A team's report templates (docs/report.md, 'Your own templates'); None: ours."""
    trusted_config: bool = False
    """Judge by the current run's own thresholds block (its config's); False: by the tier and the file alone — the
    current run may come from a pull request's code, which must not choose its own limits."""
    accept_config_change: str | None = None
    """The pull request's head SHA a maintainer accepts a run not comparable with the baselines for."""


def gh_report(
    request: GhReportRequest, env: Mapping[str, str], out: TextIO, *, sleep: Callable[[float], None] = time.sleep
) -> int:
    """Compare, write the report, publish; returns the exit code. CanaryError for bad input (nothing posted)."""
    from canary_action.compare.command import run_compare
    from canary_action.destinations import write_output
    from canary_action.github.client import GitHubClient
    from canary_action.github.commands import Log, append_summary
    from canary_action.github.context import event_context
    from canary_action.github.inputs import ActionInputs, read_runner, read_token
    from canary_action.github.step import Step
    from canary_action.report.escape import one_line
    from canary_action.report.render import render
    from canary_action.report.templates import load_templates
    from canary_action.report.view import Links

    templates = load_templates(request.templates) if request.templates is not None else None  # errors: exit 2
    runner = read_runner(env)  # before comparing: outside a workflow this is `canary compare`'s job
    inputs = ActionInputs(tier=request.tier, comment=request.comment_mode if request.post_comment else "never")
    token = read_token(env)
    step = Step(
        inputs, runner, event_context(runner, inputs), GitHubClient(runner.api_url, token, sleep=sleep), Log(out)
    )
    step.templates = templates
    untrusted = None if request.trusted_config else (UNTRUSTED_BLOCK, None)
    result = run_compare(
        request.current,
        list(request.baselines),
        tier=request.tier,
        threshold_file=request.threshold_file,
        trusted_block=untrusted,
    )
    links = Links(workflow_run=step.run_url())
    refused = _incomparable(step, result, request)
    if refused is not None:  # a pull request's run that cannot be judged is not passed (the action's rule)
        step.log.annotate("error", refused.render(), title=refused.title)
        refused.annotated = True
        head, fork = step.ctx.head_sha, step.ctx.event == "pull_request" and step.ctx.is_fork
        if token is not None and request.update_status and not fork and head is not None:
            step.publish_refusal(result.current.config_name, head, step.run_url(), refused.title, refused)
        raise refused
    append_summary(runner.summary_path, render(result, "summary", links, templates))
    if request.output is not None:
        write_output(request.output, render(result, "markdown", links, templates), flag="-o")
    # The measured files may come from a pull request's code: their text is printed with commands off.
    step.log.untrusted(f"rlhf-canary {result.verdict}: {one_line(result.reason, 500)}")
    if runner.summary_path is None:
        step.log.line("GITHUB_STEP_SUMMARY is unset: no job summary written")
    if request.output is not None:
        step.log.line(f"wrote {request.output}")
    if request.post_comment or request.update_status:
        _publish(step, result, links, token is not None, request)
    for output, what in (("check-run-url", "check run"), ("comment-url", "comment")):
        if step.outputs.get(output):
            step.log.line(f"{what}: {step.outputs[output]}")
    return step.exit_code(result.verdict)


def _incomparable(step: Step, result: CompareResult, request: GhReportRequest) -> CanaryError | None:
    """On a pull request, a run the comparison found not comparable with the baselines (its recorded data, model,
    dtype or GPU differ: a pull request can change or forge them) is refused, as the action's report mode refuses
    it: neutral would pass a required check. None when comparable, not a pull request, or accepted for its head.
    (The action also fails a config that differs from the default branch's file; gh-report is given no trusted
    config to compare with, and the newest baseline's recorded config is no such thing: a 0.1 baseline differs in
    most keys.)"""
    from canary_action.errors import IncomparableRunError
    from canary_action.github.context import PR_EVENTS
    from canary_action.github.report_mode import listed_changes

    if step.ctx.pr_number is None and step.ctx.event not in PR_EVENTS:
        return None
    head = step.ctx.head_sha
    if head is not None and request.accept_config_change == head:
        return None
    comparability = result.comparability
    if comparability is None or comparability.comparable:
        return None
    fix = (
        "land the change on the default branch first (its next run is the new baseline), or a maintainer who accepts "
        f"it reruns with `--accept-config-change {head or '<the head SHA>'}`"
    )
    return IncomparableRunError(
        f"the measured run is not comparable with the baselines: {listed_changes(comparability.differences)}. Its "
        "speed and memory cannot be judged, and a pull request's run that cannot be judged is not passed",
        fix=fix,
    )


def _publish(step: Step, result: CompareResult, links: Links, has_token: bool, request: GhReportRequest) -> None:
    from canary_action.github.context import PR_EVENTS
    from canary_action.github.step import Target

    ctx, log = step.ctx, step.log
    if not has_token:
        log.annotate(
            "warning",
            f"GITHUB_TOKEN and GH_TOKEN are unset, so nothing is posted (the report is in the job summary): "
            f"{PERMISSIONS_FIX}",
            title="rlhf-canary gh-report: no token",
        )
        return
    if ctx.event == "pull_request" and ctx.is_fork:
        log.annotate(
            "notice",
            "pull request from a fork: its GITHUB_TOKEN is read-only, so nothing is posted (the report is in the "
            "job summary). To report on fork pull requests, upload the results and publish them from a "
            "workflow_run job: the action's mode report (docs/examples/pr-canary.yml)",
            title="rlhf-canary gh-report: fork pull request",
        )
        return
    if ctx.head_sha is None:
        log.annotate(
            "warning",
            f"the {ctx.event} event's payload (GITHUB_EVENT_PATH) names no commit: nothing is posted",
            title="rlhf-canary gh-report: not published",
        )
        return
    name = result.current.config_name
    if request.update_status:
        step.publish_check(result, links, ctx.head_sha, None, [], config_name=name)
    if not request.post_comment:
        return
    if ctx.pr_number is None:
        why = "not a pull request" if ctx.event not in PR_EVENTS else "the event payload names no pull request"
        log.line(f"{ctx.event} event, {why}: no comment")
        return
    target = Target(ctx.pr_number, ctx.head_sha)
    try:
        still_head = step.still_head(target)
    except GitHubError as e:
        step.degrade(e, "read the pull request")
        return
    if still_head:
        step.publish_comment(result, links, target.pr_number, config_name=name)
