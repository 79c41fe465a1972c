"""mode history: append this workflow run's measured canary run to the history branch, and build the history site
(docs/history.md). A light job on a GitHub-hosted runner, after the job that measured: it trains nothing and runs no
commit's code, so it may hold the `contents: write` the branch needs, which the training job never does.

    trusted: the config in the workspace (the default branch's checkout), the inputs, the event, the API's answers
    untrusted: the measured artifact (read as data: validated, capped) and the history branch's lines (read.py)

1. Only a run of the default branch: a push to it, a schedule, or a dispatch from it. Any event about a pull request
   (pull_request, pull_request_target, workflow_run, issue_comment, a dispatch given pr-number) is refused before
   any request: a pull request's job never writes the history.
2. Download the artifact named after the trusted config (`rlhf-canary-<name>`) of `measured-run-id` (this run), and
   make its entry: the commit is the event's, not the artifact's. A mode run job's artifact holds its result.json;
   a mode measure job's (pr-canary.yml on a push) is judged here first, as report mode judges a run, against the
   default branch's runs before it.
3. The pull request the commit came from (GitHub's list of pull requests of a commit, merged into the default
   branch): its number, for the chart's marker and the ledger.
4. Append to the branch (history_branch.py), then build the site into `<output-dir>/history-site` for
   actions/upload-pages-artifact. A token that cannot write is a warning: the site is still built, with the entry.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from canary_action.compare.result import RESULT_FILE
from canary_action.errors import (
    ArtifactError,
    BaselineError,
    GitHubError,
    HistoryError,
    MetricsFileError,
    UsageError,
)
from canary_action.github.baseline_fetch import RunArtifacts
from canary_action.github.context import PR_EVENTS
from canary_action.github.history_branch import HistoryBranch
from canary_action.github.inputs import FULL_SHA
from canary_action.github.publish import check_name
from canary_action.github.step import Step, bisect_artifact, default_artifact, fetch_for, read_config
from canary_action.metrics.io import METRICS_FILE
from canary_action.report.escape import one_line, slug

if TYPE_CHECKING:
    from canary_action.config.load import LoadedConfig
    from canary_action.history.record import Bisect, Effect, Entry, Event, PullRequest

SITE_DIR: Final = "history-site"
_EVENTS: Final[dict[str, Event]] = {"push": "push", "schedule": "schedule", "workflow_dispatch": "workflow_dispatch"}


def history_mode(step: Step) -> int:
    """Record the measured run; the exit code: 0 recorded (or, when the branch refused the write, the site built with
    a warning naming the permission); 3 the branch could not be read (then no site: the published one stays)."""
    from canary_action.history.read import parse_history
    from canary_action.history.site import build_site
    from canary_action.history.store import append_lines

    event = _trusted_event(step)
    runner = step.runner
    sha = runner.sha
    if sha is None or runner.run_id is None:
        raise UsageError("GITHUB_SHA or GITHUB_RUN_ID is unset", fix="run mode history in a workflow job")
    loaded = read_config(step)
    step.clear_output_dir()
    measured = _measured_output(step, loaded)
    entry = _entry(step, measured, event, sha, loaded.config.name)
    branch = HistoryBranch(step.client, runner.repository, step.inputs.history_branch)
    if branch.branch in (step.ctx.default_branch, (runner.ref or "").removeprefix("refs/heads/")):
        raise UsageError(
            f"history-branch is {branch.branch}, the branch this run measured: the history is written to a branch "
            "of its own, holding history.jsonl alone", fix="leave history-branch at rlhf-canary-history",
        )  # fmt: skip
    notes: list[str] = []
    made: list[bytes] = []

    def appended(content: bytes | None) -> bytes:
        notes.clear()
        made.append(append_lines(content, entry, notes))
        return made[-1]

    try:
        commit = branch.update(appended, f"rlhf-canary history: {entry.config} at {sha[:12]} ({entry.verdict})")
        step.outputs["history-commit"] = commit
        step.log.line(f"rlhf-canary: {entry.config} at {sha[:12]} appended to branch {branch.branch} ({commit[:12]})")
    except GitHubError as error:
        if not made:  # the branch could not be read: a site of this run alone would replace the published one
            raise GitHubError(
                f"the history branch {branch.branch} could not be read ({error.message}): nothing was written, "
                "and no site was built", fix="check the job's permissions (contents: write) and rerun it",
                status=error.status,
            ) from error  # fmt: skip
        step.degrade(error, f"write the history branch {branch.branch} (it needs contents: write)")
    for note in notes:
        step.log.annotate("notice", note, title="rlhf-canary history")
    content = made[-1]
    history = parse_history(content.split(b"\n"), repository=runner.repository, source=branch.branch)
    site = step.out_dir / SITE_DIR
    build_site(history, site)
    step.outputs["history-site"] = step.relative(site)
    step.log.line(f"rlhf-canary: the history site of {len(history.configs())} configs is in {site}")
    return 3 if step.problems else 0


def _trusted_event(step: Step) -> Event:
    ctx, runner = step.ctx, step.runner
    about_a_pull = ctx.event in PR_EVENTS or ctx.event in ("workflow_run", "issue_comment") or ctx.pr_number
    if about_a_pull or ctx.event not in _EVENTS:
        raise UsageError(
            f"mode history records default-branch runs only, and this is a {ctx.event} event"
            + (" about a pull request" if about_a_pull else "")
            + ": nothing was written",
            fix="run mode history in a job of push (to the default branch), schedule or workflow_dispatch, after the "
            "job that measured (docs/examples/nightly.yml)",
        )
    if ctx.default_branch is None or runner.ref != f"refs/heads/{ctx.default_branch}":
        raise UsageError(
            f"mode history records default-branch runs only, and this run is of {runner.ref or 'no ref'} (the "
            f"default branch is {ctx.default_branch or 'unknown'}): nothing was written",
            fix="dispatch it from the default branch",
        )
    return _EVENTS[ctx.event]


def _measured_output(step: Step, loaded: LoadedConfig) -> Path:
    """The measured run's artifact, unpacked: the folder holding its result.json (a mode run job's), or, for a
    mode measure job's (pr-canary.yml's push), its run judged here first as report mode judges one."""
    run_id = step.inputs.measured_run_id or step.runner.run_id
    assert run_id is not None
    name = step.inputs.baseline_artifact or default_artifact(loaded.config.name)
    runs = RunArtifacts(step.client, step.runner.repository)
    notes: list[str] = []
    found = runs.find({"id": run_id, "html_url": None}, name, notes)
    if found is None:
        raise ArtifactError(
            f"run {run_id} has no artifact {name}" + (f" ({'; '.join(notes)})" if notes else ""),
            fix=f"upload the measuring job's output-dir as {name} (its artifact-name output) before this job, as "
            "docs/examples/nightly.yml does",
        )
    what = f"artifact {name} of run {run_id}"
    try:
        files = runs.unpack(found, step.out_dir / "measured" / slug(name))
    except BaselineError as e:
        raise ArtifactError(f"{what}: {e.message}", fix=e.fix) from e
    results = sorted({p.parent for p in files if p.name == RESULT_FILE}, key=lambda p: len(p.parts))
    if results:
        return results[0]
    measured = [p for p in files if p.name == METRICS_FILE]
    if len(measured) != 1:
        raise ArtifactError(
            f"{what} holds no result.json and {len(measured)} metrics.json files, not one",
            fix="record the artifact of a default-branch run: mode run's, or mode measure's of one run",
        )
    return _judged(step, loaded, measured[0], name)


def _judged(step: Step, loaded: LoadedConfig, metrics: Path, artifact: str) -> Path:
    """A mode measure run compared with the default branch's runs before it, its result.json written beside it."""
    from canary_action.compare.command import run_compare

    inputs = step.inputs
    fetched = fetch_for(step, artifact, Path(tempfile.mkdtemp(prefix="rlhf-canary-baselines-")))
    try:
        result = run_compare(
            metrics, fetched.paths, tier=inputs.tier, notes=fetched.notes, missing_ok=True,
            threshold_file=step.runner.workspace / inputs.thresholds if inputs.thresholds else None,
            trusted_block=(f"the thresholds block of {inputs.config} on the default branch", loaded.config.thresholds),
            trusted_pair=False,
        )  # fmt: skip
    except MetricsFileError as e:
        raise ArtifactError(f"the measured run: {e.message}", fix=e.fix) from e
    (metrics.parent / RESULT_FILE).write_text(result.model_dump_json(indent=2) + "\n", encoding="utf-8")
    return metrics.parent


def _entry(step: Step, measured: Path, event: Event, sha: str, config_name: str) -> Entry:
    from canary_action.history.collect import entry_from_output

    try:
        return entry_from_output(measured, repository=step.runner.repository, event=event, commit=sha,
                                 run_id=step.runner.run_id, pull_request=_merged(step, sha, config_name),
                                 bisect=_bisect_of(step, sha, config_name))  # fmt: skip
    except HistoryError as e:
        raise ArtifactError(f"the measured run: {e.message}", fix=e.fix) from e


def _bisect_of(step: Step, sha: str, config_name: str) -> Bisect | None:
    """The bisect of this run's regression, when the run has one (nightly.yml's bisect job, before this one): the
    first commit it named, and its one-line summary. A bisect artifact that does not read is a warning, not a lost
    history entry."""
    from canary_action.github.bisect_report import read_bisect
    from canary_action.history.record import Bisect

    run_id = step.inputs.measured_run_id or step.runner.run_id
    name = bisect_artifact(config_name)
    runs = RunArtifacts(step.client, step.runner.repository)
    found = runs.find({"id": run_id, "html_url": None}, name, [])
    if found is None:
        return None
    try:
        result = read_bisect(runs.unpack(found, step.out_dir / "bisect" / slug(name)), f"artifact {name}")
    except (BaselineError, ArtifactError) as error:
        step.log.annotate("warning", f"the run's bisect was not recorded: {error.message}", title="rlhf-canary history")
        return None
    if result.bad.sha != sha or not result.findings:
        return None  # another commit's bisect, or one that named none
    return Bisect(bad_commit=result.findings[0].commits[0].sha, summary=one_line(result.summary, 200))


def _merged(step: Step, sha: str, config_name: str) -> PullRequest | None:
    """The pull request merged into the default branch as `sha`, as GitHub lists it, with the effects its pair's
    check run carries (step.py, _carry_effects); None for a direct push."""
    from canary_action.history.record import PullRequest

    if step.ctx.event != "push":
        return None
    try:
        pulls: Any = step.client.request("GET", f"/repos/{step.runner.repository}/commits/{sha}/pulls").body
    except GitHubError as error:
        step.degrade(error, "find the pull request the commit came from")
        return None
    for pull in pulls if isinstance(pulls, list) else []:
        base = pull.get("base") if isinstance(pull, dict) else None
        number, head = pull.get("number"), (pull.get("head") or {}).get("sha")
        if pull.get("merged_at") and isinstance(base, dict) and base.get("ref") == step.ctx.default_branch:
            head = head if isinstance(head, str) and FULL_SHA.fullmatch(head) else None
            effects = _effects_of(step, head, config_name) if head else []
            return PullRequest(number=number if isinstance(number, int) else None, head_commit=head, effects=effects)
    return None


def _effects_of(step: Step, head: str, config_name: str) -> list[Effect]:
    """The newest check run of this config on the pull request's head that carries a pair's effects, written by
    github-actions (the publish job's token); none when there is none (a pull request measured without a pair)."""
    from canary_action.history.collect import effects_from_text

    try:
        path, wanted = f"/repos/{step.runner.repository}/commits/{head}/check-runs", check_name(config_name)
        runs = step.client.paginate(path, "check_runs", params={"check_name": wanted, "filter": "all"}, limit=100)
    except GitHubError as error:
        step.degrade(error, "read the merged pull request's check run (it needs checks: read)")
        return []
    ours = [r for r in runs if isinstance(r, dict) and (r.get("app") or {}).get("slug") == "github-actions"]
    for run in sorted(ours, key=lambda r: str(r.get("completed_at") or ""), reverse=True):
        text = (run.get("output") or {}).get("text")
        effects = effects_from_text(text) if isinstance(text, str) else None
        if effects is not None:
            return effects
    return []
