"""modes run and measure (action.py says what each does): train the checked-out code in a child process,
then either only write the measurement (measure) or compare and publish it on the measured commit (run)."""

from __future__ import annotations

import re
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Final

from canary_action.compare.result import CompareResult
from canary_action.errors import CanaryError, GitHubError, NoPairBaseError, TrainingError, UsageError
from canary_action.github import gpu
from canary_action.github.baseline_fetch import FetchedBaselines
from canary_action.github.commands import append_summary, write_outputs
from canary_action.github.context import PR_EVENTS, EventContext
from canary_action.github.inputs import FULL_SHA
from canary_action.github.publish import Annotation, Published, check_name
from canary_action.github.step import (
    Step,
    Target,
    complete_check,
    default_artifact,
    fetch_for,
    history_page,
    read_config,
)
from canary_action.github.team_templates import load_team_templates
from canary_action.github.training import LockstepTrainer, lockstep_base, measured_commit
from canary_action.report.escape import one_line
from canary_action.report.view import Links

if TYPE_CHECKING:
    from canary_action.config.load import LoadedConfig

ACTION_REF: Final = "rlhf-canary/rlhf-canary@v1"
UPLOAD_ARTIFACT: Final = "actions/upload-artifact@b7c566a772e6b6bfb58ed0dc250532a479d7789f  # v6.0.0"
_SAFE_PATH: Final = re.compile(r"[A-Za-z0-9._/-]+")

#: Trains one canary and returns its metrics.json; raises TrainingError (with metrics_path when written).
#: The default is training.ChildTrainer: a child process over the checked-out repository, holding no token.
Trainer = Callable[["LoadedConfig", Path], Path]


def run_mode(step: Step, trainer: Trainer, *, publish: bool) -> int:
    """mode run (publish=True) and mode measure (publish=False: no token, no request, no comparison)."""
    from canary_action.compare.command import run_compare

    inputs, ctx, log = step.inputs, step.ctx, step.log
    loaded = read_config(step)
    _say_output_dir(step, loaded)
    step.templates = load_team_templates(
        step.inputs.templates, step.runner.workspace, step.log, step.runner.summary_path, publish=publish
    )
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

    base_sha, notes = _lockstep_base(step, loaded)
    measured, crash = _measure(step, loaded, trainer, base_sha=base_sha, check=check, notes=notes)
    if not publish:
        return _measured_only(step, measured, crash)

    if base_sha is not None and inputs.baseline == "lockstep":
        fetched = FetchedBaselines()
    else:
        # a pull request's measured commit (a fork's too, though nothing is published): its merge base's run first
        pull_head = target.head_sha if target is not None else ctx.head_sha if ctx.event in PR_EVENTS else None
        dest = Path(tempfile.mkdtemp(prefix="rlhf-canary-baselines-"))
        fetched = fetch_for(step, artifact, dest, pull_head=pull_head)
    threshold_file = step.runner.workspace / inputs.thresholds if inputs.thresholds else None
    result = run_compare(
        measured,
        fetched.paths,
        tier=inputs.tier,
        threshold_file=threshold_file,
        notes=[*notes, *fetched.notes],
        missing_ok=True,
        numerics_accepted=target is not None and inputs.accept_numerics_change == target.head_sha,
    )
    run_url = step.run_url()
    links = Links(
        workflow_run=run_url,
        artifacts=run_url and run_url + "#artifacts",
        baseline_run=fetched.run_urls[0] if fetched.run_urls else None,
        artifact_name=artifact,
        baseline_snippet=baseline_snippet(
            ctx, inputs.config, artifact, inputs.output_dir, baseline_workflow=inputs.baseline_workflow
        ),
        history=history_page(step, loaded.config.name),
    )
    step.write_result(result, links)
    step.outputs["baseline-sha"] = newest_baseline_sha(result)
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


def _say_output_dir(step: Step, loaded: LoadedConfig) -> None:
    """The config's output_dir is `canary run`'s; the action writes where its output-dir input says, and says so
    when the config names another folder (a team that set it expects its runs there)."""
    default = type(loaded.config).model_fields["output_dir"].default
    if loaded.config.output_dir != default:
        step.log.annotate(
            "notice",
            f"the config's output_dir ({loaded.config.output_dir}) is `canary run`'s: the action writes to its "
            f"output-dir input, {step.inputs.output_dir}, which the upload step names",
            title="rlhf-canary: output_dir",
        )


def newest_baseline_sha(result: CompareResult) -> str:
    """The commit of the newest baseline compared with (the baselines come newest first), as its metrics.json
    records it: the nightly's last good commit, where a bisect starts (docs/examples/nightly.yml). "" without one."""
    return next((b.git_sha for b in result.baselines if b.git_sha and FULL_SHA.fullmatch(b.git_sha)), "")


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
        measured = None
        gpu.require_gpu(step.inputs.gpu, loaded.config)  # a failed check that says why, before anything trains
        if base_sha is not None:
            thresholds = step.runner.workspace / step.inputs.thresholds if step.inputs.thresholds else None
            lockstep = LockstepTrainer(step.runner.workspace, step.inputs.setup, step.inputs.tier, thresholds)
            try:
                with step.log.commands_off():  # the pull request's output: no workflow command of its own
                    measured, said = lockstep(step.inputs.config, base_sha, step.out_dir)
                notes += said
            except NoPairBaseError as e:
                if step.inputs.baseline != "auto":
                    raise
                notes.append(_not_paired(step, f"{e.message} ({e.fix})"))
        if measured is None:
            with step.log.commands_off():
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
            complete_check(step, check, "cancelled", "the job was cancelled while the canary trained")
        raise
    except Exception as e:  # a bug: the traceback follows in main(); the check still completes
        if check is not None:
            complete_check(step, check, "failure", f"unexpected error ({type(e).__name__}): see the job log")
        raise
    metrics_path = measured / "head" / "metrics.json" if measured.is_dir() else measured
    step.outputs["metrics-path"] = step.relative(metrics_path)
    return measured, crash


def _lockstep_base(step: Step, loaded: LoadedConfig) -> tuple[str | None, list[str]]:
    """The base commit to train in lockstep, or None (artifact baselines), and what the report should say about
    the choice. Only a pull request has a base commit; `auto` pairs a pull request whenever it can."""
    baseline = step.inputs.baseline
    if baseline == "artifacts" or (baseline == "auto" and step.ctx.base_sha is None):
        return None, []
    if step.ctx.base_sha is None:
        said = (
            f"baseline {baseline} asked for, but a {step.ctx.event} event names no base commit to train beside this "
            "one: compared with artifact baselines instead"
        )
        step.log.annotate("notice", said, title="rlhf-canary baseline")
        return None, [said]
    if baseline == "auto" and loaded.config.num_processes > 1:
        why = f"a {loaded.config.num_processes}-process canary is not paired (a pair runs one process per side)"
        return None, [_not_paired(step, why)]
    return lockstep_base(step.runner.workspace, step.ctx.base_sha, step.ctx.head_sha), []


def _not_paired(step: Step, why: str) -> str:
    """baseline auto, a pull request that cannot be paired: said, and judged against artifact baselines."""
    said = f"baseline auto: not paired with the base commit: {why}; compared with artifact baselines instead"
    step.log.annotate("notice", said, title="rlhf-canary baseline")
    return said


def baseline_snippet(
    ctx: EventContext, config: str, artifact: str, output_dir: str, *, baseline_workflow: str | None = None
) -> str | None:
    """The workflow that creates this canary's baseline: the same file (or `baseline_workflow`, which pull
    requests do not run), run on the default branch, its results uploaded under the artifact name the next pull
    requests look for."""
    branch = ctx.default_branch or "main"
    if not all(_SAFE_PATH.fullmatch(v) for v in (branch, config, artifact, output_dir)):
        return None
    workflow = baseline_workflow or ctx.workflow_file
    workflow = workflow if workflow and _SAFE_PATH.fullmatch(workflow) else None
    lines = [
        *([f"# {workflow}"] if workflow else []),
        "on:",
        *(["  pull_request:"] if baseline_workflow is None else []),
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
    if ctx.is_fork and ctx.event == "pull_request":
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


def _report_unmeasured(step: Step, check: Published, crash: CanaryError) -> None:
    """The run died before writing metrics: the check still completes, as a failure that says why."""
    from canary_action.report.escape import text

    complete_check(
        step, check, "failure", f"{text(crash.message, 2000)}\n\nfix: {text(crash.fix, 1000)}", "could not run"
    )
