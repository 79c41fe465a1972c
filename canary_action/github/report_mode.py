"""mode report: compare and publish a run that another job measured — the job that holds the write token and
runs no code of the pull request.

    trusted: the config in the workspace (the default branch's checkout), the inputs, the API's answers
    untrusted: the measured artifact (made by the pull request's code), read as data only

1. Which run, which commit, which pull request — from the trusted side only: `measured-run-id` (a measure job
   of this same workflow run) or the workflow_run event's run, which must be of the `measured-workflow` file;
   `head-sha` (what the trusted side chose to measure) or the workflow_run's head commit; `pr-number` or the
   one open pull request whose head that commit is.
2. Refuse, saying why, when the pull request's head is no longer that commit, when a workflow_run came from
   another repository than the pull request's head, or when the commit heads several pull requests.
3. Download exactly one artifact, named after the trusted config (`rlhf-canary-<name>`), and find its one
   metrics.json or lockstep pair in it.
4. Fetch the baselines (default-branch runs of the measured run's workflow file), compare, write the results.
5. Publish a new check run, named after the trusted config, on that commit, and the sticky comment.

With `bisect-bad` set, the run's bisect is published instead, as an issue (bisect_report.py).
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from canary_action.compare.confirm import CONFIRMATION_DIR
from canary_action.errors import (
    ArtifactError,
    BaselineError,
    CanaryError,
    ConfigChangedError,
    IncomparableRunError,
    MetricsFileError,
    TrainingError,
    UsageError,
)
from canary_action.github.baseline_fetch import OVERSIZED, RunArtifacts
from canary_action.github.bisect_report import report_bisect
from canary_action.github.context import PR_EVENTS
from canary_action.github.step import Step, Target, default_artifact, fetch_for, history_page, read_config
from canary_action.github.team_templates import load_team_templates
from canary_action.metrics.io import METRICS_FILE
from canary_action.report.escape import one_line, slug
from canary_action.report.view import Links

if TYPE_CHECKING:
    from canary_action.compare.result import Change, CompareResult
    from canary_action.config.schema import CanaryConfig
    from canary_action.github.baseline_fetch import Artifact

PAIR_FILE = "pair.json"


@dataclass(frozen=True)
class MeasuredRun:
    """The workflow run whose artifact is reported, as the API describes it."""

    id: int
    url: str | None
    workflow_file: str | None
    head_sha: str | None
    head_repository: str | None
    same_run: bool
    head_branch: str | None = None


def report_mode(step: Step) -> int:
    from canary_action.compare.command import run_compare

    inputs, log = step.inputs, step.log
    run = _measured_run(step)
    if run is None:
        return 0
    loaded = read_config(step)  # the trusted side's config names the artifact and the check
    # from the same trusted checkout as the config
    step.templates = load_team_templates(
        step.inputs.templates, step.runner.workspace, step.log, step.runner.summary_path, publish=True
    )
    name = loaded.config.name
    if inputs.bisect_bad is not None:  # this job publishes a bisect, as its issue; else it never looks for one
        return report_bisect(step, run.id, run.url, name, inputs.bisect_bad)
    artifact = inputs.baseline_artifact or default_artifact(name)
    step.outputs["artifact-name"] = artifact
    target = _verified_target(step, run)
    if target is None:
        return 0
    step.clear_output_dir()
    try:
        measured = _download_measurement(step, run, artifact)
        notes = [*_pairing_notes(step, measured), *_config_change_notes(step, target, loaded.config, measured)]
    except (MetricsFileError, TrainingError) as e:  # the pull request still learns that its canary has no verdict
        _publish_unmeasured(step, target, name, run, e)
        raise
    links = Links(
        workflow_run=run.url,
        artifacts=run.url and run.url + "#artifacts",
        artifact_name=artifact,
        history=history_page(step, name),
    )
    # The pair, when there is one, came from the job that ran the pull request's code: its base side is judged
    # against round by round, never counted as a baseline, and the default branch's runs are always fetched: a
    # paired pass does not override a failure against them (compare/perf.py, held_to_history).
    dest = Path(tempfile.mkdtemp(prefix="rlhf-canary-baselines-"))
    fetched = fetch_for(step, artifact, dest, workflow_file=run.workflow_file, pull_head=target.head_sha)
    threshold_file = step.runner.workspace / inputs.thresholds if inputs.thresholds else None
    try:
        result = run_compare(
            measured,
            fetched.paths,
            tier=inputs.tier,
            threshold_file=threshold_file,
            notes=[*notes, *fetched.notes],
            missing_ok=True,
            trusted_block=(f"the thresholds block of {inputs.config} on the default branch", loaded.config.thresholds),
            trusted_pair=False,
            numerics_accepted=inputs.accept_numerics_change == target.head_sha,
        )
    except MetricsFileError as e:  # the measurement (untrusted) does not read as one
        _publish_unmeasured(step, target, name, run, e)
        raise
    try:
        result = _incomparable_notes(step, target, result)
    except ConfigChangedError as e:
        _publish_unmeasured(step, target, name, run, e)
        raise
    if result.current.config_name != name:  # the trusted side's name marks the comment and names the check
        said = f"the measured config is named {result.current.config_name!r}; reported under {name!r}, the name on "
        said += "the default branch"
        current = result.current.model_copy(update={"config_name": name})
        result = result.model_copy(update={"current": current, "notes": [*result.notes, said]})
    if fetched.run_urls:
        links = replace(links, baseline_run=fetched.run_urls[0])
    step.write_result(result, links)
    log.untrusted(f"rlhf-canary {result.verdict} for {target.head_sha[:12]}: {one_line(result.reason, 500)}")
    step.publish(result, links, target, None, [], config_name=name)
    return step.exit_code(result.verdict)


def _measured_run(step: Step) -> MeasuredRun | None:
    """The run to report on, checked: this same run, or a workflow_run of the `measured-workflow` file."""
    ctx, inputs, repo = step.ctx, step.inputs, step.runner.repository
    run_id = inputs.measured_run_id or ctx.triggering_run_id
    if run_id is None:
        raise UsageError(
            "mode report needs the run that measured: measured-run-id, or a workflow_run event",
            fix="in the publish job of the same workflow, pass `measured-run-id: ${{ github.run_id }}` "
            "(docs/examples/pr-canary.yml)",
        )
    same_run = run_id == step.runner.run_id
    if not same_run and inputs.measured_run_id is None and ctx.triggering_event not in PR_EVENTS:
        step.log.line(f"the canary run was started by {ctx.triggering_event}, not a pull request: nothing to publish")
        return None
    body: dict[str, Any] = step.client.request("GET", f"/repos/{repo}/actions/runs/{run_id}").body
    path = _str(body.get("path"))
    head_repo = body.get("head_repository") if isinstance(body.get("head_repository"), dict) else {}
    run = MeasuredRun(
        id=run_id,
        url=_str(body.get("html_url")),
        workflow_file=path.split("@", 1)[0] if path else None,
        head_sha=_str(body.get("head_sha")),
        head_repository=_str(head_repo.get("full_name")) if head_repo else None,
        same_run=same_run,
        head_branch=_str(body.get("head_branch")),
    )
    if not same_run:
        expected = inputs.measured_workflow
        if expected is None or not _same_workflow(run.workflow_file, expected):
            raise UsageError(
                f"run {run_id} is of workflow {run.workflow_file or 'unknown'}, not the measured-workflow "
                f"{expected or '(unset)'}: a pull request can add a workflow of any name, so only runs of the named "
                "file are reported",
                fix="set measured-workflow to the file name of the workflow whose measure job uploads the results",
            )
    return run


def _verified_target(step: Step, run: MeasuredRun) -> Target | None:
    """The pull request and commit to publish on, or None (said) when publishing would be on the wrong commit."""
    inputs, repo, log = step.inputs, step.runner.repository, step.log
    sha = inputs.head_sha or (run.head_sha if not run.same_run else None)
    if sha is None:
        raise UsageError(
            "mode report on a measure job of the same run needs head-sha: the commit the trusted side had measured",
            fix="pass `head-sha: ${{ needs.gate.outputs.sha }}` (the SHA the measure job checked out)",
        )
    if not run.same_run and run.head_sha != sha:
        raise UsageError(
            f"run {run.id} measured {run.head_sha}, not head-sha {sha}",
            fix="pass the head-sha of the run being reported, or leave it empty for a workflow_run",
        )
    numbers = [step.ctx.pr_number] if step.ctx.pr_number else _open_pulls_of(step, sha, run)
    if len(numbers) != 1:
        what = "no open pull request" if not numbers else f"{len(numbers)} open pull requests"
        log.annotate(
            "warning" if numbers else "notice",
            f"{what} ha{'s' if len(numbers) < 2 else 've'} head commit {sha}: nothing published"
            + ("; pass pr-number to choose one" if numbers else " (pushed to since? the newer run will report)"),
            title="rlhf-canary: not published",
        )
        return None
    number = numbers[0]
    pull = step.client.request("GET", f"/repos/{repo}/pulls/{number}").body
    head = pull.get("head") if isinstance(pull.get("head"), dict) else {}
    current = _str(head.get("sha"))
    if current != sha:
        log.annotate(
            "notice",
            f"measured {sha[:12]}, but pull request #{number} is now at {str(current)[:12]}: not published on "
            "it (the newer commit's run reports)",
            title="rlhf-canary: the pull request moved on",
        )
        return None
    head_repo = head.get("repo") if isinstance(head.get("repo"), dict) else {}
    pull_repo = _str(head_repo.get("full_name")) if head_repo else None
    if not run.same_run and (pull_repo is None or run.head_repository != pull_repo):
        raise UsageError(
            f"run {run.id} measured {run.head_repository or 'an unknown repository'}'s commit, but pull request "
            f"#{number}'s head is in {pull_repo or 'a deleted repository'}",
            fix="report a run on the pull request it measured",
        )
    return Target(number, sha)


def _pairing_notes(step: Step, measured: Path) -> list[str]:
    """What the trusted side's `baseline` input expected of the measurement: a pair where it opted out of pairing
    (`artifacts`) is refused (ArtifactError) — the pull request's workflow chose it; a single run where it asked
    for one (`lockstep`, `both`) is judged against the default branch's runs, as the measure job's fallback is."""
    asked, pair = step.inputs.baseline, measured.is_dir()
    if pair and asked == "artifacts":
        raise ArtifactError(
            "the artifact holds a lockstep pair, but this report expects artifact baselines alone (baseline: "
            "artifacts): its base side was made by the job that ran the pull request's code, which chose to pair",
            fix="give the publish job the measure job's `baseline` input, or set the measure job to `baseline: "
            "artifacts` as well",
        )
    if not pair and asked in ("lockstep", "both"):
        return [f"baseline: {asked} was asked, but the measured run is no lockstep pair: judged against the default "
                "branch's runs alone (the measure job's log says why it did not pair)"]  # fmt: skip
    return []


def _config_change_notes(step: Step, target: Target, trusted: CanaryConfig, measured: Path) -> list[str]:
    """Refuse (ConfigChangedError) a measurement whose config differs from the default branch's in anything that
    decides how it is judged — everything but diff.IGNORED_CONFIG_KEYS and the thresholds (the default branch's
    are used anyway): a pull request that set `max_steps: 6` or `batch_size: 16` would otherwise make its run
    incomparable with the baselines, and an incomparable run is neutral, which passes a required check. Unless a
    maintainer accepted the change for exactly this commit (`accept-config-change`): then a note says what
    changed."""
    from canary_action.compare.baselines import load_current
    from canary_action.compare.diff import PULL_REQUEST_MAY_CHANGE, config_changes

    changes = config_changes(trusted.model_dump(mode="json"), load_current(_judged_file(measured)).config)
    changes = [c for c in changes if c.field.split(".", 1)[0] not in PULL_REQUEST_MAY_CHANGE]
    if not changes:
        return []
    listed = listed_changes(changes)
    if step.inputs.accept_config_change == target.head_sha:
        return [f"the pull request changes the canary config, accepted by a maintainer for this commit: {listed}"]
    raise ConfigChangedError(
        f"the measured config differs from {step.inputs.config} on the default branch in what decides how a run is "
        f"judged: {listed}. A run measured with another config is not judged against the default branch's "
        "baselines",
        fix=_accept_fix("the config change", target),
    )


def _incomparable_notes(step: Step, target: Target, result: CompareResult) -> CompareResult:
    """Refuse (ConfigChangedError) a measurement the comparison found not comparable with the default branch's runs:
    its recorded workload or hardware (the dataset's or model's fingerprint, dtype, the GPU...) differs, and an
    incomparable run is neutral, which passes a required check. The measurement is the pull request's to write: a
    changed data file in the repository, or a forged fingerprint, would otherwise make any regression neutral. A
    maintainer who accepts it for this commit (`accept-config-change`) gets the neutral result, with a note."""
    comparability = result.comparability
    if comparability is None or comparability.comparable:
        return result
    listed = listed_changes(comparability.differences)
    if step.inputs.accept_config_change == target.head_sha:
        said = f"not comparable with the default branch's runs, accepted by a maintainer for this commit: {listed}"
        return result.model_copy(update={"notes": [*result.notes, said]})
    raise IncomparableRunError(
        f"the measured run is not comparable with the default branch's runs: {listed}. Its speed and memory cannot "
        "be judged, and a pull request's run that cannot be judged is not passed",
        fix=_accept_fix("the change", target),
    )


def listed_changes(changes: Sequence[Change]) -> str:
    """'key: old → new; ...', the first 20 and how many more."""
    listed = "; ".join(f"{c.field}: {c.baseline} → {c.current}" for c in changes[:20])
    return listed + (f"; and {len(changes) - 20} more" if len(changes) > 20 else "")


def _accept_fix(what: str, target: Target) -> str:
    return (
        f"land {what} on the default branch first (its next run is the new baseline), or a maintainer who accepts "
        f"it reruns the report with `accept-config-change: {target.head_sha}` (docs/examples/rerun.yml)"
    )


def _judged_file(measured: Path) -> Path:
    """The measured run's metrics.json: the file itself, or a lockstep pair's head side."""
    from canary_action.compare.command import pair_members

    members = pair_members(measured)
    return members[0] if members is not None else measured


def _publish_unmeasured(step: Step, target: Target, name: str, run: MeasuredRun, error: CanaryError) -> None:
    """A failed check run, saying why there is nothing to compare, on the commit the trusted side chose."""
    title = error.title if isinstance(error, ConfigChangedError) else "nothing to compare"
    step.publish_refusal(name, target.head_sha, run.url, title, error)


def _open_pulls_of(step: Step, sha: str, run: MeasuredRun) -> list[int]:
    """The open pull requests whose head is `sha`. GitHub lists a commit's pull requests only for commits in this
    repository: a fork's commit gets [] there (and a workflow_run of a fork's pull request lists none either),
    so a fork's are looked up by the measured run's head repository and branch (`head=owner:branch`), keeping
    those whose head is exactly that commit in exactly that repository."""
    repo = step.runner.repository
    pulls = step.client.paginate(f"/repos/{repo}/commits/{sha}/pulls", "", limit=100)
    numbers = _open_numbers(pulls)
    if numbers or not (run.head_repository and run.head_branch) or run.head_repository.lower() == repo.lower():
        return numbers
    owner = run.head_repository.split("/", 1)[0]
    listed = step.client.paginate(
        f"/repos/{repo}/pulls", "", params={"state": "open", "head": f"{owner}:{run.head_branch}"}, limit=100
    )
    return _open_numbers([p for p in listed if isinstance(p, dict) and _head_is(p, sha, run.head_repository)])


def _open_numbers(pulls: list[Any]) -> list[int]:
    return sorted(
        {int(p["number"]) for p in pulls if isinstance(p, dict) and p.get("state") == "open" and "number" in p}
    )


def _head_is(pull: dict[str, Any], sha: str, repository: str) -> bool:
    head = pull.get("head")
    if not isinstance(head, dict) or not isinstance(head.get("repo"), dict):
        return False
    return bool(head.get("sha") == sha and head["repo"].get("full_name") == repository)


def _download_measurement(step: Step, run: MeasuredRun, artifact: str) -> Path:
    """The artifact's one metrics.json, or its one lockstep pair's directory. Untrusted: ArtifactError (exit 2)
    for a zip that is refused or holds no single measurement."""
    runs = RunArtifacts(step.client, step.runner.repository)
    notes: list[str] = []
    found: Artifact | None = runs.find({"id": run.id, "html_url": run.url}, artifact, notes)
    if found is None and any(OVERSIZED in note for note in notes):
        raise ArtifactError(
            f"run {run.id}: {'; '.join(notes)}",
            fix="upload only the canary's output-dir, and keep its captured steps under the cap (the config's "
            "capture.steps and capture.max_step_bytes: docs/replay.md)",
        )
    if found is None:
        raise TrainingError(
            f"run {run.id} has no artifact {artifact} to report ({'; '.join(notes)}): its measure job ended before "
            "it measured anything (a setup command or a config it refused, a process killed while loading), or "
            "uploaded under another name",
            fix="read the measure job's log; it uploads its output-dir as `${{ steps.canary.outputs.artifact-name }}` "
            "with `if: ${{ !cancelled() }}`, and a pull request that renames its config is reported once the new "
            "name is on the default branch",
        )
    dest = step.out_dir / "measured" / slug(artifact)
    try:
        files = runs.unpack(found, dest)
    except BaselineError as e:
        raise ArtifactError(f"artifact {artifact} of run {run.id}: {e.message}", fix=e.fix) from e
    every_pair = [p.parent for p in files if p.name == PAIR_FILE]
    # A pair's confirming pair (its confirmation/ folder, compare/confirm.py) is part of that measurement.
    pairs = [p for p in every_pair if not (p.parent.name == CONFIRMATION_DIR and p.parent.parent in every_pair)]
    if len(pairs) == 1:
        return pairs[0]
    loose = [p for p in files if p.name == METRICS_FILE and not any(d in p.parents for d in pairs)]
    if len(pairs) > 1 or len(loose) != 1:
        raise ArtifactError(
            f"artifact {artifact} of run {run.id} holds {len(loose)} metrics.json and {len(pairs)} lockstep pairs, "
            "not one measurement",
            fix="upload the canary's output-dir as the artifact, one artifact per config",
        )
    return loose[0]


def _same_workflow(path: str | None, expected: str) -> bool:
    """`expected` as the input gives it: a file name (pr-canary.yml) or its path (.github/workflows/pr-canary.yml)."""
    wanted = expected if "/" in expected else f".github/workflows/{expected}"
    return path == wanted


def _str(value: object) -> str | None:
    return value if isinstance(value, str) and value else None
