"""What one step of `uses: rlhf-canary/rlhf-canary@v1` does, for each mode.

Pull request code (the config, factories, reward functions, setup commands) never shares a job with a write
token: a **measure** job on the GPU runner trains it with no token at all, and a **report** job (report_mode.py,
a GitHub-hosted runner, no checkout of the pull request) compares and publishes (docs/action.md, "Trust").

mode measure (the job that runs pull request code):
  1. read the config; 2. train (train/run.py in a child process over the checkout: a child without the
  runner's variables, see training.py), writing metrics.json — also when the run crashes or is killed; 3. write
  the job summary and the outputs for the upload step. No token is read, no request is made.

mode run (trusted code only, e.g. the nightly on the default branch; under auto every event but workflow_run and
pull_request_target, which is measure there: its job holds a write token):
  1. read the config; on a pull request (or workflow_dispatch with pr-number) start a new check run on the
     commit that was checked out, so the PR shows the canary running;
  2. train, as in measure;
  3. fetch the baselines (baseline_fetch.py) and compare; no baseline is a neutral verdict showing the
     workflow snippet that makes one;
  4. write result.json, report.md, the job summary and the step outputs — before anything is published,
     so a GitHub outage loses nothing measured;
  5. publish on the measured commit, and only while it is still the pull request's head: complete the check
     run, write the sticky comment. A push, a schedule or a dispatch without pr-number only measures.
  On a pull request from a fork the token is read-only: steps 1 and 5 are skipped with a notice.

mode report: report_mode.py (with bisect-bad, bisect_report.py: a bisect's issue). mode history: history_mode.py,
the history branch and site of default-branch runs (docs/history.md). mode bisect: bisect_mode.py, which, like
measure, uses no token and makes no request. The modes live in run_mode.py, report_mode.py and
bisect_mode.py; step.py holds what they share.

Exit codes (cli.py): 0 pass or neutral, 1 regression (0 with fail-on: never), 2 bad input, 3 a crash or
GitHub failing. A missing permission (403/404 on publishing) is a warning that names it, not a failure.
"""

from __future__ import annotations

import os
import signal
import sys
import time
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TextIO

from canary_action.errors import CanaryError, UsageError
from canary_action.files import remove_unsafe
from canary_action.github.client import GitHubClient
from canary_action.github.commands import Log, write_outputs
from canary_action.github.context import event_context
from canary_action.github.inputs import read_inputs, read_runner
from canary_action.github.run_mode import Trainer, run_mode
from canary_action.github.step import Step
from canary_action.github.training import ChildTrainer, measured_commit
from canary_action.scratch import own_temporary_folder


def main(
    env: Mapping[str, str],
    *,
    trainer: Trainer | None = None,
    out: TextIO | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    """Run the action from the runner's environment; returns the exit code. Every temporary folder it makes is in a
    folder of its own, removed when it ends (scratch.py)."""
    with own_temporary_folder():
        return _main(env, trainer=trainer, out=out, sleep=sleep)


def _main(
    env: Mapping[str, str], *, trainer: Trainer | None, out: TextIO | None, sleep: Callable[[float], None]
) -> int:
    from canary_action.cli import exit_code

    log = Log(out or sys.stdout)
    step: Step | None = None
    # A cancelled job's container gets SIGTERM (then SIGKILL after a grace period): as an interrupt, the run
    # still writes what it measured (train/run.py catches it) and the outputs below are still written.
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        inputs, notices = read_inputs(env)
        token = inputs.github_token.get_secret_value() if inputs.github_token else None
        if token:
            log.mask(token)
        for notice in notices:
            log.annotate("notice", notice)
        runner = read_runner(env)
        client = GitHubClient(runner.api_url, token, sleep=sleep)
        step = Step(inputs, runner, event_context(runner, inputs), client, log)
        mode = _mode(step)
        _say_ignored_inputs(step, mode)
        if mode in ("report", "history"):
            return _trains_nothing(step, mode)
        if mode in ("measure", "bisect") and token:
            log.annotate(
                "warning",
                f"mode {mode} does not use github-token, and a job that trains should not hold one: pass "
                '`github-token: ""` (docs/examples/pr-canary.yml, nightly.yml)',
                title="rlhf-canary: a token in the measure job",
            )
        if mode == "bisect":
            from canary_action.github.bisect_mode import bisect_mode

            return bisect_mode(step)
        return run_mode(step, trainer or ChildTrainer(runner.workspace, inputs.setup), publish=mode == "run")
    except CanaryError as error:
        if not error.annotated:
            log.annotate("error", error.render(), title=error.title)
        return exit_code(error)
    except Exception:  # a bug: the traceback helps most, and it must not read as a regression (exit 1)
        log.line(traceback.format_exc())
        log.annotate("error", "unexpected error (a bug: please report it with the log)", title="rlhf-canary")
        return 3
    except KeyboardInterrupt:
        log.annotate("error", "cancelled (SIGTERM or Ctrl-C): what was measured so far is written", title="rlhf-canary")
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous)
        if step is not None:
            write_outputs(step.runner.output_path, step.outputs)
            _hand_back(step.out_dir, step.runner.workspace, step.log)


def _trains_nothing(step: Step, mode: str) -> int:
    """The modes of report/action.yml's light job: report (report_mode.py) and history (history_mode.py)."""
    if mode == "history":
        from canary_action.github.history_mode import history_mode

        return history_mode(step)
    from canary_action.github.report_mode import report_mode

    return report_mode(step)


def _unlink_links_on_the_way(out_dir: Path, workspace: Path, log: Log) -> None:
    """The output-dir was checked before training (Step.check_output_dir), but the training could replace it, or a
    folder on its way, by a link to anywhere on the host, which the upload step would follow: each such link is
    removed, and an error says so."""
    try:
        parts = out_dir.relative_to(workspace).parts
    except ValueError:
        return
    place = workspace
    for part in parts:
        place = place / part
        if place.is_symlink():
            target = place.readlink()
            place.unlink()
            log.annotate(
                "error",
                f"{place} had become a link (to {target}) during the run: removed, so that nothing is uploaded "
                "through it",
                title="rlhf-canary: the output folder was replaced",
            )
            return


def _say_ignored_inputs(step: Step, mode: str) -> None:
    """Another mode's inputs are ignored, and a notice says so."""
    if mode != "bisect" and (step.inputs.good or step.inputs.bad):
        step.log.annotate(
            "notice", f"good and bad are mode bisect's inputs: ignored in mode {mode}", title="rlhf-canary"
        )
    if mode != "report" and step.inputs.bisect_bad:
        step.log.annotate("notice", f"bisect-bad is mode report's input: ignored in mode {mode}", title="rlhf-canary")


def _mode(step: Step) -> str:
    """The mode to run in. auto: report on workflow_run; measure where the job holds a token while a workflow may
    have checked out a pull request's code (`_names_a_pull_request`: pull_request_target always; issue_comment and a
    workflow_dispatch given pr-number unless the event's own commit is checked out); run otherwise. An explicit run
    on those events is refused unless the checkout is the event's own commit (the default branch's, trusted)."""
    inputs, runner = step.inputs, step.runner
    event = runner.event_name
    guarded = _names_a_pull_request(step)
    if inputs.mode == "auto":
        if event == "workflow_run":
            return "report"
        if guarded and (event == "pull_request_target" or not _own_commit_checked_out(step)):
            step.log.annotate(
                "notice",
                f"mode auto on {_event_said(step)} is measure: this event's job holds a token, and a pull request's "
                "code must not run beside it; publish from a report job (docs/examples/pr-canary.yml)",
                title="rlhf-canary: mode measure",
            )
            return "measure"
        return "run"
    if inputs.mode == "run" and guarded and not _own_commit_checked_out(step):
        checked_out = measured_commit(runner.workspace, merge_sha=None)
        raise UsageError(
            f"mode run on {_event_said(step)} with {checked_out or 'no git checkout'} checked out, not the event's "
            f"commit {runner.sha}: a pull request's code would train in the job that holds the token",
            fix="use mode measure in a job without the token and publish from a report job "
            "(docs/examples/pr-canary.yml), or check out the default (the base branch) in this job",
        )
    return inputs.mode


def _names_a_pull_request(step: Step) -> bool:
    """An event whose job holds a token (write, for the base repository) while the workflow may check out a pull
    request's code: pull_request_target, a comment (issue_comment), a workflow_dispatch given pr-number."""
    event = step.runner.event_name
    return event in ("pull_request_target", "issue_comment") or (
        event == "workflow_dispatch" and step.inputs.pr_number is not None
    )


def _event_said(step: Step) -> str:
    event = step.runner.event_name
    return f"{event} with pr-number" if event == "workflow_dispatch" else event


def _own_commit_checked_out(step: Step) -> bool:
    """The workspace holds the event's own commit (GITHUB_SHA: the default branch's, for these events)."""
    return measured_commit(step.runner.workspace, merge_sha=None) == step.runner.sha


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def _hand_back(out_dir: Path, workspace: Path, log: Log) -> None:
    """Before anything uploads the output-dir: clear it of links and special files (actions/upload-artifact follows
    a link on the host, as the runner's user: a link the training left would put host files in the artifact), and
    say what was removed. A Docker action runs as root: then give it to the workspace's owner, or the runner's user
    cannot clean it at the next checkout ("Permission denied" on a runner that stays registered)."""
    _unlink_links_on_the_way(out_dir, workspace, log)
    removed = remove_unsafe(out_dir)
    if removed:
        shown = ", ".join(removed[:10]) + (f" and {len(removed) - 10} more" if len(removed) > 10 else "")
        log.annotate(
            "warning",
            f"removed from {out_dir} before upload, as nothing the canary writes is one: {shown}",
            title="rlhf-canary: links in the output folder",
        )
    if os.geteuid() != 0 or not out_dir.is_dir() or not workspace.is_dir():
        return
    owner = workspace.stat()
    if owner.st_uid == 0:
        return
    for path in [out_dir, *out_dir.rglob("*")]:
        os.chown(path, owner.st_uid, owner.st_gid, follow_symlinks=False)
