"""What one step of `uses: rlhf-canary/rlhf-canary@v1` does, for each event.

mode run (every event but workflow_run, under mode auto):
  1. read the config; on a pull request (or workflow_dispatch with pr-number) start the check run on the
     PR's head commit, so the PR shows the canary running;
  2. train (train/run.py), writing metrics.json — also when the run crashes;
  3. fetch the baselines (baseline_fetch.py) and compare; no baseline is a neutral verdict showing the
     workflow snippet that makes one;
  4. write result.json, report.md, the job summary and the step outputs — before anything is published,
     so a GitHub outage loses nothing measured;
  5. publish: complete the check run, write the sticky comment. A push, a schedule or a dispatch without
     pr-number only measures (the upload step after the action makes the artifact the next PRs' baseline).
  On a pull request from a fork the token is read-only: steps 1 and 5 are skipped with a notice, and a
  workflow_run job in report mode publishes instead.

mode report (workflow_run): download the finished run's `rlhf-canary-*` artifacts — untrusted, since the
pull request's code produced them — validate each result.json, and publish it on the pull request whose
head commit is the run's, verified through the API (a fork's run names no pull request).

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
from canary_action.github.baseline_fetch import FetchedBaselines, RunArtifacts, fetch_baselines
from canary_action.github.client import GitHubClient
from canary_action.github.commands import Log, append_summary, write_outputs
from canary_action.github.context import PR_EVENTS, EventContext, event_context
from canary_action.github.inputs import ActionInputs, RunnerEnv, read_inputs, read_runner
from canary_action.github.publish import Annotation, Published, Publisher, check_name, conclusion_of
from canary_action.github.training import ChildTrainer, LockstepTrainer, lockstep_base
from canary_action.report.escape import one_line, slug
from canary_action.report.view import Links

if TYPE_CHECKING:
    from canary_action.config.load import LoadedConfig

ACTION_REF: Final = "rlhf-canary/rlhf-canary@v1"
UPLOAD_ARTIFACT: Final = "actions/upload-artifact@b7c566a772e6b6bfb58ed0dc250532a479d7789f  # v6.0.0"
ARTIFACT_PREFIX: Final = "rlhf-canary-"
RESULT_FILE: Final = "result.json"
REPORT_FILE: Final = "report.md"
_SEVERITY: Final[dict[Verdict, int]] = {"pass": 0, "neutral": 1, "regression": 2, "crashed": 3}
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
        result_path = self.out_dir / f"{prefix}{RESULT_FILE}"
        report_path = self.out_dir / f"{prefix}{REPORT_FILE}"
        result_path.write_text(result.model_dump_json(indent=2) + "\n", encoding="utf-8")
        report_path.write_text(render(result, "markdown", links), encoding="utf-8")
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
    ) -> None:
        from canary_action.report.render import check_output, render
        from canary_action.report.view import sticky_marker

        publisher = self.publisher()
        try:
            check = check or publisher.start_check(check_name(result.current.config_name), target.head_sha, None)
            done = publisher.finish_check(
                check, conclusion_of(result.verdict, self.inputs.fail_on), check_output(result, links), annotations
            )
            self.outputs["check-run-url"] = done.url or ""
        except GitHubError as e:
            self.degrade(e, "complete the check run")
        try:
            marker = sticky_marker(result.current.config_name)
            body = render(result, "comment", links)
            comment = publisher.upsert_comment(target.pr_number, marker, body, result.verdict, self.inputs.comment)
            if comment is not None:
                self.outputs["comment-url"] = comment.url or ""
        except GitHubError as e:
            self.degrade(e, "write the PR comment")

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
            return report_mode(step)
        return run_mode(step, trainer or ChildTrainer(runner.workspace, inputs.setup))
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


def run_mode(step: Step, trainer: Trainer) -> int:
    from canary_action.compare.command import run_compare
    from canary_action.config.load import load_config
    from canary_action.errors import ConfigError

    inputs, ctx, log = step.inputs, step.ctx, step.log
    config_path = step.runner.workspace / inputs.config
    try:
        loaded = load_config(config_path)
    except ConfigError as e:
        log.annotate("error", e.render(), title=e.title, file=inputs.config)
        raise
    for notice in loaded.notices:
        log.annotate("notice", notice, title="rlhf-canary config")
    name = loaded.config.name
    artifact = inputs.baseline_artifact or default_artifact(name)
    step.outputs["artifact-name"] = artifact
    write_outputs(step.runner.output_path, {"artifact-name": artifact})  # for the upload step, even on a crash
    _clear(step.out_dir, step.runner.workspace, log)
    target = _run_target(step)
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

    if base_sha is not None and inputs.baseline == "lockstep":
        fetched = FetchedBaselines()
    else:
        fetched = _baselines(step, artifact, Path(tempfile.mkdtemp(prefix="rlhf-canary-baselines-")))
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
    if target is not None:
        annotations = _annotations(result, inputs.config, loaded.source_text)
        step.publish(result, links, target, check, annotations)
    if crash is not None:
        log.annotate("error", crash.render(), title=crash.title)
    return step.exit_code(result.verdict)


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


def report_mode(step: Step) -> int:
    from canary_action.errors import MetricsFileError
    from canary_action.report.load import read_result

    ctx, log = step.ctx, step.log
    if ctx.event != "workflow_run" or ctx.triggering_run_id is None:
        raise UsageError(
            f"mode report publishes a finished canary run's results: it runs on workflow_run events, not {ctx.event}",
            fix="trigger the reporting workflow with `on: workflow_run` (docs/examples/fork-safe-report.yml), "
            "or use mode run",
        )
    if ctx.triggering_event not in PR_EVENTS:
        log.line(f"the canary run was started by {ctx.triggering_event}, not a pull request: nothing to publish")
        return 0
    target = _verified_pull(step)
    if target is None:
        return 0
    _clear(step.out_dir, step.runner.workspace, log)
    runs = RunArtifacts(step.client, step.runner.repository)
    listed = step.client.paginate(
        f"/repos/{step.runner.repository}/actions/runs/{ctx.triggering_run_id}/artifacts", "artifacts"
    )
    wanted = step.inputs.baseline_artifact
    listed_names = {str(a.get("name")) for a in listed if isinstance(a, dict)}
    names = sorted(n for n in listed_names if (n == wanted if wanted else n.startswith(ARTIFACT_PREFIX)))
    if not names:
        raise UsageError(
            f"run {ctx.triggering_run_id} uploaded no {wanted or ARTIFACT_PREFIX + '*'} artifact",
            fix="the canary job needs an actions/upload-artifact step with `if: ${{ !cancelled() }}` and "
            "`name: ${{ steps.canary.outputs.artifact-name }}` (docs/examples/fork-safe-run.yml)",
        )
    worst: Verdict | None = None
    refused: list[CanaryError] = []
    run = {"id": ctx.triggering_run_id, "html_url": ctx.triggering_run_url}
    for name in names:
        notes: list[str] = []
        found = runs.find(run, name, notes)
        if found is None:  # expired or oversized: nothing of it was read
            refused.append(UsageError("; ".join(notes), fix="rerun the canary workflow"))
            log.annotate("error", "; ".join(notes), title=f"rlhf-canary refused artifact {name}")
            continue
        dest = step.out_dir / "reported" / slug(name)
        try:
            files = runs.unpack(found, dest)
            results = [p for p in files if p.name == RESULT_FILE]
            if len(results) != 1:
                raise MetricsFileError(
                    f"artifact {name} holds {len(results)} {RESULT_FILE} files, not one",
                    fix="upload the canary's output-dir as the artifact, one artifact per config",
                )
            result = read_result(results[0])
        except MetricsFileError as e:
            log.annotate("error", e.render(), title=f"rlhf-canary refused artifact {name}")
            refused.append(e)
            continue
        links = Links(
            workflow_run=ctx.triggering_run_url,
            artifacts=ctx.triggering_run_url and ctx.triggering_run_url + "#artifacts",
            artifact_name=name,
        )
        step.write_result(result, links, prefix=f"{slug(name)}-")
        log.untrusted(f"{name}: {result.verdict}: {result.reason}")
        step.publish(result, links, target, None, [])
        worst = result.verdict if worst is None or _SEVERITY[result.verdict] > _SEVERITY[worst] else worst
    step.outputs["verdict"] = worst or ""
    code = step.exit_code(worst)
    return code or (2 if refused else 0)


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
    ctx, log = step.ctx, step.log
    if ctx.is_fork:
        log.annotate(
            "notice",
            "pull request from a fork: the token is read-only, so this job measures and writes its results for "
            "upload; a workflow_run job in mode report publishes them (docs/examples/fork-safe-report.yml)",
            title="rlhf-canary: fork pull request",
        )
        return None
    if ctx.event in PR_EVENTS and ctx.pr_number and ctx.head_sha:
        return Target(ctx.pr_number, ctx.head_sha)
    if ctx.pr_number is None:
        return None
    pull = step.client.request("GET", f"/repos/{step.runner.repository}/pulls/{ctx.pr_number}").body
    return Target(ctx.pr_number, str(pull["head"]["sha"]))


def _verified_pull(step: Step) -> Target | None:
    """The open pull request whose head is the reported run's commit, checked through the API."""
    ctx, repo = step.ctx, step.runner.repository
    if ctx.head_sha is None:
        raise UsageError("the workflow_run payload names no head commit", fix="GITHUB_EVENT_PATH must be the runner's")
    candidates = [n for n in (ctx.pr_number,) if n]
    if not candidates and ctx.head_owner and ctx.head_branch:
        pulls = step.client.paginate(
            f"/repos/{repo}/pulls", "", params={"state": "open", "head": f"{ctx.head_owner}:{ctx.head_branch}"}
        )
        candidates = [int(p["number"]) for p in pulls if isinstance(p, dict)]
    for number in candidates:
        pull = step.client.request("GET", f"/repos/{repo}/pulls/{number}").body
        if pull.get("head", {}).get("sha") == ctx.head_sha:
            return Target(number, ctx.head_sha)
    step.log.line(
        f"no open pull request has head commit {ctx.head_sha} (pushed to since?): nothing to publish; "
        "the newer run will report"
    )
    return None


def _baselines(step: Step, artifact: str, dest: Path) -> FetchedBaselines:
    ctx, inputs = step.ctx, step.inputs
    branch = inputs.baseline_branch or ctx.default_branch
    if branch is None:
        repo = step.client.request("GET", f"/repos/{step.runner.repository}").body
        branch = str(repo["default_branch"])
    try:
        return fetch_baselines(
            step.client,
            repository=step.runner.repository,
            workflow_file=ctx.workflow_file,
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


def _clear(out_dir: Path, workspace: Path, log: Log) -> None:
    """Start from an empty output-dir: a self-hosted runner keeps its workspace, and an earlier run's files
    would otherwise travel in this run's artifact (and become a second baseline)."""
    if not out_dir.is_dir() or not any(out_dir.iterdir()):
        return
    resolved = out_dir.resolve()
    if resolved == workspace.resolve() or workspace.resolve() not in resolved.parents:
        raise UsageError(
            f"output-dir {out_dir} is not empty and is not a folder inside the workspace",
            fix="set output-dir to a folder of its own under the workspace (the default: canary-output)",
        )
    log.line(f"clearing {out_dir} (files of an earlier run)")
    shutil.rmtree(out_dir)


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

    output = {
        "title": "rlhf-canary: the canary could not run",
        "summary": f"{text(crash.message, 2000)}\n\nfix: {text(crash.fix, 1000)}",
    }
    try:
        step.publisher().finish_check(check, "failure", output)
    except GitHubError as e:
        step.degrade(e, "complete the check run")
