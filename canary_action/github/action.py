"""What one step of `uses: rlhf-canary/rlhf-canary@v1` does, for each mode.

Pull request code (the config, factories, reward functions, setup commands) never shares a job with a write
token: a **measure** job on the GPU runner trains it with no token at all, and a **report** job (report_mode.py,
a GitHub-hosted runner, no checkout of the pull request) compares and publishes (docs/action.md, "Trust").

mode measure (the job that runs pull request code):
  1. read the config; 2. train (train/run.py in a child process over the checkout: a child without the
  runner's variables, see training.py), writing metrics.json — also when the run crashes or is killed; 3. write
  the job summary and the outputs for the upload step. No token is read, no request is made.

mode run (trusted code only, e.g. the nightly on the default branch; every event but workflow_run under auto):
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

mode report: report_mode.py.

Exit codes (cli.py): 0 pass or neutral, 1 regression (0 with fail-on: never), 2 bad input, 3 a crash or
GitHub failing. A missing permission (403/404 on publishing) is a warning that names it, not a failure.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Final, TextIO

from canary_action.compare.result import CompareResult, Verdict
from canary_action.errors import CanaryError, GitHubError, TrainingError, UsageError
from canary_action.github.baseline_fetch import FetchedBaselines, fetch_baselines
from canary_action.github.client import GitHubClient
from canary_action.github.commands import Log, append_summary, write_outputs
from canary_action.github.context import PR_EVENTS, EventContext, event_context
from canary_action.github.inputs import ActionInputs, RunnerEnv, read_inputs, read_runner
from canary_action.github.publish import Annotation, Conclusion, Published, Publisher, check_name, conclusion_of
from canary_action.github.training import ChildTrainer, LockstepTrainer, lockstep_base, measured_commit
from canary_action.report.escape import one_line, slug
from canary_action.report.view import Links

if TYPE_CHECKING:
    from canary_action.config.load import LoadedConfig

ACTION_REF: Final = "rlhf-canary/rlhf-canary@v1"
UPLOAD_ARTIFACT: Final = "actions/upload-artifact@b7c566a772e6b6bfb58ed0dc250532a479d7789f  # v6.0.0"
ARTIFACT_PREFIX: Final = "rlhf-canary-"
RESULT_FILE: Final = "result.json"
REPORT_FILE: Final = "report.md"
_SAFE_PATH: Final = re.compile(r"[A-Za-z0-9._/-]+")

#: Trains one canary and returns its metrics.json; raises TrainingError (with metrics_path when written).
#: The default is training.ChildTrainer: a child process over the checked-out repository, holding no token.
Trainer = Callable[["LoadedConfig", Path], Path]


def default_artifact(config_name: str) -> str:
    return ARTIFACT_PREFIX + slug(config_name)


@dataclass(frozen=True)
class Target:
    """The pull request results are published on, and its head commit (never the merge commit)."""

    pr_number: int
    head_sha: str


@dataclass
class Step:
    """One run of the action: its inputs, context, and what it has produced so far."""

    inputs: ActionInputs
    runner: RunnerEnv
    ctx: EventContext
    client: GitHubClient
    log: Log
    outputs: dict[str, str] = field(default_factory=dict)
    problems: list[CanaryError] = field(default_factory=list)
    """Failures met after the measurement (GitHub down): reported, and exit 3, but nothing is lost."""

    @property
    def out_dir(self) -> Path:
        return self.runner.workspace / self.inputs.output_dir

    def relative(self, path: Path) -> str:
        """Paths in outputs are relative to the workspace: the action's /github/workspace is not the host's."""
        try:
            return str(path.relative_to(self.runner.workspace))
        except ValueError:
            return str(path)

    def run_url(self) -> str | None:
        if self.runner.run_id is None:
            return None
        return f"{self.runner.server_url}/{self.runner.repository}/actions/runs/{self.runner.run_id}"

    def publisher(self) -> Publisher:
        return Publisher(self.client, self.runner.repository)

    def degrade(self, error: GitHubError, doing: str) -> None:
        """A refused write (read-only token) is a warning naming the permission; anything else is a problem."""
        if error.forbidden:
            self.log.annotate("warning", f"{error.message}. {error.fix}", title=f"rlhf-canary could not {doing}")
        else:
            self.problems.append(error)

    def write_result(self, result: CompareResult, links: Links, prefix: str = "") -> tuple[Path, Path]:
        from canary_action.report.render import render

        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.check_output_dir()  # again: the pull request's code ran meanwhile, as a user who can replace it
        result_path = self.out_dir / f"{prefix}{RESULT_FILE}"
        report_path = self.out_dir / f"{prefix}{REPORT_FILE}"
        _replace(result_path, result.model_dump_json(indent=2) + "\n")
        _replace(report_path, render(result, "markdown", links))
        append_summary(self.runner.summary_path, render(result, "summary", links))
        self.outputs.update(
            {
                "verdict": result.verdict,
                "result-path": self.relative(result_path),
                "report-path": self.relative(report_path),
            }
        )
        return result_path, report_path

    def publish(
        self,
        result: CompareResult,
        links: Links,
        target: Target,
        check: Published | None,
        annotations: list[Annotation],
        *,
        config_name: str | None = None,
    ) -> None:
        """Complete the check run (a new one unless `check` is this run's) on the target commit, then the comment.
        `config_name` names the check and the sticky comment: the trusted side's config's name (default: the
        measured config's, for a run that measured trusted code)."""
        from canary_action.report.render import check_output, render
        from canary_action.report.view import sticky_marker

        publisher = self.publisher()
        config_name = config_name or result.current.config_name
        try:
            check = check or publisher.start_check(check_name(config_name), target.head_sha, self.run_url())
            done = publisher.finish_check(
                check, conclusion_of(result.verdict, self.inputs.fail_on), check_output(result, links), annotations
            )
            self.outputs["check-run-url"] = done.url or ""
        except GitHubError as e:
            self.degrade(e, "complete the check run")
        try:
            marker = sticky_marker(config_name)
            body = render(result, "comment", links)
            comment = publisher.upsert_comment(target.pr_number, marker, body, result.verdict, self.inputs.comment)
            if comment is not None:
                self.outputs["comment-url"] = comment.url or ""
        except GitHubError as e:
            self.degrade(e, "write the PR comment")

    def clear_output_dir(self) -> None:
        """Start from an empty output-dir inside the workspace: a self-hosted runner keeps its workspace, and an
        earlier run's files would otherwise travel in this run's artifact (and become a second baseline). One
        that leads out of the workspace (`..`, a symbolic link a checked-out repository can hold) is refused:
        the action writes as root, and the upload step would not find it either."""
        self.check_output_dir()
        out_dir = self.out_dir
        if not out_dir.is_dir() or not any(out_dir.iterdir()):
            return
        self.log.line(f"clearing {out_dir} (files of an earlier run)")
        shutil.rmtree(out_dir)

    def check_output_dir(self) -> None:
        """UsageError unless output-dir is a folder (or nothing yet) inside the workspace, reached without a link."""
        out_dir, workspace = self.out_dir, self.runner.workspace.resolve()
        resolved = out_dir.resolve()
        if resolved == workspace or workspace not in resolved.parents:
            raise UsageError(
                f"output-dir {self.inputs.output_dir} leads to {resolved}, not to a folder inside the workspace",
                fix="set output-dir to a folder of its own under the workspace (the default: canary-output), "
                "not a symbolic link",
            )
        if out_dir.is_symlink() or (out_dir.exists() and not out_dir.is_dir()):
            raise UsageError(
                f"output-dir {self.inputs.output_dir} is {'a symbolic link' if out_dir.is_symlink() else 'a file'}",
                fix="set output-dir to a folder of its own under the workspace (the default: canary-output)",
            )

    def still_head(self, target: Target) -> bool:
        """Whether the pull request's head is still the measured commit; a notice when it moved on."""
        pull = self.client.request("GET", f"/repos/{self.runner.repository}/pulls/{target.pr_number}").body
        current = str((pull.get("head") or {}).get("sha"))
        if current == target.head_sha:
            return True
        self.log.annotate(
            "notice",
            f"measured {target.head_sha[:12]}, but pull request #{target.pr_number} is now at {current[:12]}: "
            "the results are not published on it (the newer commit's run reports)",
            title="rlhf-canary: the pull request moved on",
        )
        return False

    def exit_code(self, verdict: Verdict | None) -> int:
        for problem in self.problems:
            self.log.annotate("error", f"{problem.message}. fix: {problem.fix}", title=problem.title)
        if verdict == "crashed":
            return 3
        if verdict == "regression" and self.inputs.fail_on == "regression":
            return 1
        return 3 if self.problems else 0


def main(
    env: Mapping[str, str],
    *,
    trainer: Trainer | None = None,
    out: TextIO | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    """Run the action from the runner's environment; returns the exit code."""
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
        mode = inputs.mode if inputs.mode != "auto" else ("report" if runner.event_name == "workflow_run" else "run")
        if mode == "report":
            from canary_action.github.report_mode import report_mode

            return report_mode(step)
        if mode == "measure" and token:
            log.annotate(
                "warning",
                "mode measure does not use github-token, and the job that runs pull request code should not hold "
                'one: pass `github-token: ""` (docs/examples/pr-canary.yml)',
                title="rlhf-canary: a token in the measure job",
            )
        return run_mode(step, trainer or ChildTrainer(runner.workspace, inputs.setup), publish=mode == "run")
    except CanaryError as error:
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
            _hand_back(step.out_dir, step.runner.workspace)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def read_config(step: Step) -> LoadedConfig:
    from canary_action.config.load import load_config
    from canary_action.errors import ConfigError

    try:
        loaded = load_config(step.runner.workspace / step.inputs.config)
    except ConfigError as e:
        step.log.annotate("error", e.render(), title=e.title, file=step.inputs.config)
        raise
    for notice in loaded.notices:
        step.log.annotate("notice", notice, title="rlhf-canary config")
    return loaded


def run_mode(step: Step, trainer: Trainer, *, publish: bool) -> int:
    """mode run (publish=True) and mode measure (publish=False: no token, no request, no comparison)."""
    from canary_action.compare.command import run_compare

    inputs, ctx, log = step.inputs, step.ctx, step.log
    loaded = read_config(step)
    name = loaded.config.name
    artifact = inputs.baseline_artifact or default_artifact(name)
    step.outputs["artifact-name"] = artifact
    write_outputs(step.runner.output_path, {"artifact-name": artifact})  # for the upload step, even on a crash
    step.clear_output_dir()
    if publish and ctx.pr_number is not None and not ctx.is_fork:
        log.annotate(
            "notice",
            "mode run trains this pull request's code in the job that holds the write token: fine for code you "
            "trust; otherwise measure with no token and publish from another job (docs/examples/pr-canary.yml)",
            title="rlhf-canary: mode run on a pull request",
        )
    try:
        target = _run_target(step) if publish else None
    except GitHubError as e:
        step.degrade(e, "read the pull request")
        target = None
    check = None
    if target is not None:
        try:
            check = step.publisher().start_check(check_name(name), target.head_sha, step.run_url())
        except GitHubError as e:
            step.degrade(e, "start the check run")
            if e.forbidden:
                target = None  # a read-only token: measure and write, publish nothing

    base_sha, notes = _lockstep_base(step)
    measured, crash = _measure(step, loaded, trainer, base_sha=base_sha, check=check, notes=notes)
    if not publish:
        return _measured_only(step, measured, crash)

    if base_sha is not None and inputs.baseline == "lockstep":
        fetched = FetchedBaselines()
    else:
        fetched = fetch_for(step, artifact, Path(tempfile.mkdtemp(prefix="rlhf-canary-baselines-")))
    threshold_file = step.runner.workspace / inputs.thresholds if inputs.thresholds else None
    result = run_compare(
        measured,
        fetched.paths,
        tier=inputs.tier,
        threshold_file=threshold_file,
        notes=[*notes, *fetched.notes],
        missing_ok=True,
    )
    run_url = step.run_url()
    links = Links(
        workflow_run=run_url,
        artifacts=run_url and run_url + "#artifacts",
        baseline_run=fetched.run_urls[0] if fetched.run_urls else None,
        artifact_name=artifact,
        baseline_snippet=baseline_snippet(ctx, inputs.config, artifact, inputs.output_dir),
    )
    step.write_result(result, links)
    log.line(f"rlhf-canary {result.verdict}: {one_line(result.reason, 500)}")
    log.line(f"results in {step.relative(step.out_dir)}/ (upload them with actions/upload-artifact as {artifact})")
    if target is not None and check is not None and not _still_head_or_superseded(step, target, check):
        target = None
    if target is not None:
        annotations = _annotations(result, inputs.config, loaded.source_text)
        step.publish(result, links, target, check, annotations)
    if crash is not None:
        log.annotate("error", crash.render(), title=crash.title)
    return step.exit_code(result.verdict)


def _measured_only(step: Step, measured: Path, crash: CanaryError | None) -> int:
    """mode measure's end: where the measurement is, for the upload step and the publish job."""
    where = step.relative(measured)
    lines = [
        "### rlhf-canary: measured",
        "",
        f"The measurement is in `{where}`; the publish job compares it with the baselines and reports on the pull "
        "request (this job holds no token).",
    ]
    if crash is not None:
        lines += ["", f"The run failed: {crash.message}", "", f"fix: {crash.fix}"]
    append_summary(step.runner.summary_path, "\n".join(lines) + "\n")
    step.log.line(f"measured: {where} (upload {step.relative(step.out_dir)}/ as {step.outputs['artifact-name']})")
    if crash is not None:
        step.log.annotate("error", crash.render(), title=crash.title)
        return 3
    return 0


def _still_head_or_superseded(step: Step, target: Target, check: Published) -> bool:
    """After training: whether to publish. When the pull request moved on meanwhile, the check run this run
    started (on the measured commit) is completed as neutral, saying so, and nothing else is written."""
    try:
        if step.still_head(target):
            return True
        output = {
            "title": "rlhf-canary: superseded",
            "summary": "The pull request moved on while this commit was measured: its results are in the workflow "
            "run's artifact and job summary, and the newer commit's run reports on the pull request.",
        }
        step.publisher().finish_check(check, "neutral", output)
    except GitHubError as e:
        step.degrade(e, "check the pull request's head")
    return False


def _measure(
    step: Step,
    loaded: LoadedConfig,
    trainer: Trainer,
    *,
    base_sha: str | None,
    check: Published | None,
    notes: list[str],
) -> tuple[Path, CanaryError | None]:
    """Train: the canary alone, or in lockstep with the base commit (then a pair's directory, whose head side
    compare judges against its base side; its notes join `notes`). A crash after something was measured comes
    back beside it."""
    try:
        if base_sha is not None:
            lockstep = LockstepTrainer(step.runner.workspace, step.inputs.setup)
            measured, said = lockstep(step.inputs.config, base_sha, step.out_dir)
            notes += said
        else:
            measured = trainer(loaded, step.out_dir)
        crash = None
    except CanaryError as e:  # a crash, or what preflight refused (no GPU for a cuda config)
        written = e.metrics_path if isinstance(e, TrainingError) else None
        if written is None or not written.exists():
            if check is not None:
                _report_unmeasured(step, check, e)
            raise
        crash, measured = e, written  # a crash mid-run: what was measured is still compared
    except KeyboardInterrupt:  # a cancelled job: the check this run started must not stay "in progress"
        if check is not None:
            _complete_check(step, check, "cancelled", "the job was cancelled while the canary trained")
        raise
    except Exception as e:  # a bug: the traceback follows in main(); the check still completes
        if check is not None:
            _complete_check(step, check, "failure", f"unexpected error ({type(e).__name__}): see the job log")
        raise
    metrics_path = measured / "head" / "metrics.json" if measured.is_dir() else measured
    step.outputs["metrics-path"] = step.relative(metrics_path)
    return measured, crash


def _lockstep_base(step: Step) -> tuple[str | None, list[str]]:
    """The base commit to train in lockstep, or None (artifact baselines), and what the report should say about
    the choice. Only a pull request has a base commit."""
    if step.inputs.baseline == "artifacts":
        return None, []
    if step.ctx.base_sha is None:
        said = (
            f"baseline {step.inputs.baseline} asked for, but a {step.ctx.event} event names no base commit to train "
            "beside this one: compared with artifact baselines instead"
        )
        step.log.annotate("notice", said, title="rlhf-canary baseline")
        return None, [said]
    return lockstep_base(step.runner.workspace, step.ctx.base_sha, step.ctx.head_sha), []


def baseline_snippet(ctx: EventContext, config: str, artifact: str, output_dir: str) -> str | None:
    """The workflow that creates this canary's baseline: the same file, run on the default branch, its
    results uploaded under the artifact name the next pull requests look for."""
    branch = ctx.default_branch or "main"
    if not all(_SAFE_PATH.fullmatch(v) for v in (branch, config, artifact, output_dir)):
        return None
    workflow = ctx.workflow_file if ctx.workflow_file and _SAFE_PATH.fullmatch(ctx.workflow_file) else None
    lines = [
        *([f"# {workflow}"] if workflow else []),
        "on:",
        "  pull_request:",
        "  push:",
        f"    branches: [{branch}]",
        "  workflow_dispatch:",
        "jobs:",
        "  canary:",
        "    steps:",
        "      # ... checkout, as before",
        f"      - uses: {ACTION_REF}",
        "        id: canary",
        "        with:",
        f"          config: {config}",
        f"      - uses: {UPLOAD_ARTIFACT}",
        "        if: ${{ !cancelled() }}",
        "        with:",
        f"          name: {artifact}",
        f"          path: {output_dir.rstrip('/')}/",
    ]
    return "\n".join(lines) + "\n"


def _run_target(step: Step) -> Target | None:
    """The pull request to publish on, and the commit that is measured: the checkout's (GitHub's merge commit
    stands for the pull request's head, its second parent), never whatever the head is at publish time. None
    (said) when nothing may be published: a fork's read-only token, no pull request, or a head that moved on."""
    ctx, log, inputs = step.ctx, step.log, step.inputs
    if ctx.is_fork:
        log.annotate(
            "notice",
            "pull request from a fork: the token is read-only, so this job measures and writes its results for "
            "upload; a publish job in mode report reports them (docs/examples/pr-canary.yml)",
            title="rlhf-canary: fork pull request",
        )
        return None
    if ctx.pr_number is None:
        return None
    checked_out = measured_commit(step.runner.workspace, merge_sha=step.runner.sha if ctx.event in PR_EVENTS else None)
    if inputs.head_sha and checked_out and inputs.head_sha != checked_out:
        raise UsageError(
            f"head-sha is {inputs.head_sha} but the workspace has {checked_out} checked out",
            fix="check out the commit you pass as head-sha (actions/checkout with `ref: <that sha>`)",
        )
    sha = inputs.head_sha or checked_out or (ctx.head_sha if ctx.event in PR_EVENTS else None)
    if sha is None:
        log.annotate(
            "warning",
            f"the measured commit is unknown (no git checkout in the workspace, no head-sha): nothing is published "
            f"on pull request #{ctx.pr_number}",
            title="rlhf-canary: not published",
        )
        return None
    target = Target(ctx.pr_number, sha)
    return target if step.still_head(target) else None


def fetch_for(step: Step, artifact: str, dest: Path, *, workflow_file: str | None = None) -> FetchedBaselines:
    """The baselines of `artifact`: default-branch runs of `workflow_file` (default: the running workflow's)."""
    ctx, inputs = step.ctx, step.inputs
    branch = inputs.baseline_branch or ctx.default_branch
    try:
        if branch is None:
            repo = step.client.request("GET", f"/repos/{step.runner.repository}").body
            branch = str(repo["default_branch"])
        return fetch_baselines(
            step.client,
            repository=step.runner.repository,
            workflow_file=workflow_file or ctx.workflow_file,
            branch=branch,
            artifact=artifact,
            wanted=inputs.baseline_runs,
            dest=dest,
            run_id=inputs.baseline_run_id,
        )
    except GitHubError as e:
        step.degrade(e, "fetch the baselines")
        return FetchedBaselines(notes=[f"baselines could not be fetched: {e.message}"])


def _annotations(result: CompareResult, config: str, source: str) -> list[Annotation]:
    """Failed and warned checks, on the config line most likely to blame (a changed key), else line 1."""
    lines = source.splitlines()
    line = 1
    for change in result.config_changes:
        key = change.field.rsplit(".", 1)[-1]
        hit = next((i for i, text in enumerate(lines, 1) if re.match(rf"\s*{re.escape(key)}\s*:", text)), None)
        if hit is not None:
            line = hit
            break
    return [
        Annotation(config, line, "failure" if c.status == "fail" else "warning", f"rlhf-canary: {c.name}", c.message)
        for c in result.checks
        if c.status in ("fail", "warn")
    ]


def _replace(path: Path, text: str) -> None:
    """Write `text` to a new file that then takes `path`'s name: a link planted there is replaced, not followed."""
    partial = path.with_name(f".{path.name}.partial")
    partial.unlink(missing_ok=True)
    partial.write_text(text, encoding="utf-8")
    partial.replace(path)


def _hand_back(out_dir: Path, workspace: Path) -> None:
    """A Docker action runs as root: give the output-dir to the workspace's owner, or the runner's user cannot
    clean it at the next checkout ("Permission denied" on a runner that stays registered)."""
    if os.geteuid() != 0 or not out_dir.is_dir() or not workspace.is_dir():
        return
    owner = workspace.stat()
    if owner.st_uid == 0:
        return
    for path in [out_dir, *out_dir.rglob("*")]:
        os.chown(path, owner.st_uid, owner.st_gid, follow_symlinks=False)


def _report_unmeasured(step: Step, check: Published, crash: CanaryError) -> None:
    """The run died before writing metrics: the check still completes, as a failure that says why."""
    from canary_action.report.escape import text

    _complete_check(
        step, check, "failure", f"{text(crash.message, 2000)}\n\nfix: {text(crash.fix, 1000)}", "could not run"
    )


def _complete_check(
    step: Step, check: Published, conclusion: Conclusion, summary: str, title: str | None = None
) -> None:
    output = {"title": f"rlhf-canary: {title or conclusion}", "summary": summary}
    try:
        step.publisher().finish_check(check, conclusion, output)
    except GitHubError as e:
        step.degrade(e, "complete the check run")
