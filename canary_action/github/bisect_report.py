"""mode report, for a bisect: the job that holds the token (and runs no code of any commit) publishes what a mode
bisect job of the run found (bisect_mode.py) as one issue per bad commit.

    trusted: the config in the workspace (the default branch's checkout), the inputs, the API's answers
    untrusted: the artifact, written by a job that trained every commit of the range: read as data only

Only when asked: `bisect-bad` set says this job publishes a bisect (report_mode.py then goes nowhere else), and
names the bad commit the bisect job was given, as the trusted side names it (resolved through the API when it is
a branch or a tag). The run must hold the artifact `rlhf-canary-bisect-<config name>` (named after the trusted
config); its one bisect.json is validated against BisectResult, and must name that bad commit — the issue it
writes is chosen by it, so an artifact naming another could overwrite another bisect's issue. A refusal is an
ArtifactError, exit 2, and nothing is posted. The result is rendered with every text of it inert, and written to
the job summary and as the body of the issue — a new one, or the open one this token's identity opened for the
same config and bad commit, updated in place (publish.py): a rerun never opens a second issue.
"""

from __future__ import annotations

import re
import urllib.parse
from pathlib import Path
from typing import TYPE_CHECKING, Final

from pydantic import ValidationError

from canary_action.errors import ArtifactError, BaselineError, GitHubError, UsageError
from canary_action.files import FileRefusedError, read_regular_file
from canary_action.github.baseline_fetch import RunArtifacts
from canary_action.github.commands import append_summary
from canary_action.github.context import PR_EVENTS
from canary_action.github.inputs import FULL_SHA
from canary_action.github.step import Step, bisect_artifact, replace_file
from canary_action.metrics.io import clip_text
from canary_action.report.escape import link, one_line, slug, text

if TYPE_CHECKING:
    from canary_action.bisect.result import BisectResult, CommitRef

BISECT_FILE: Final = "bisect.json"
MAX_BISECT_BYTES: Final = 2**20  # a bisect of a thousand commits writes under 100 KiB
ISSUE_MAX_CHARS: Final = 65536  # GitHub refuses a longer body
TITLE_MAX_CHARS: Final = 256
_FIX: Final = "upload mode bisect's output-dir as the artifact, as docs/examples/nightly.yml does; it was not published"
#: A pipe would end a table cell and a backtick open code, whatever escaping render_markdown adds after us.
_CELL_SAFE: Final = str.maketrans({"|": "¦", "`": "'"})


def report_bisect(step: Step, run_id: int, run_url: str | None, config_name: str, bad: str) -> int:
    """Publish run `run_id`'s bisect of the bad commit `bad` (the bisect-bad input) as its issue; the exit code."""
    ctx = step.ctx
    if ctx.pr_number is not None or ctx.event in PR_EVENTS or ctx.triggering_event in PR_EVENTS:
        raise UsageError(
            "bisect-bad is set on an event about a pull request: a bisect is published from the run that bisected, "
            "which is about no pull request (a nightly, a dispatch)",
            fix="set bisect-bad only in the job that publishes a bisect (publish-bisect in docs/examples/nightly.yml)",
        )
    sha = _trusted_bad(step, bad)
    name = bisect_artifact(config_name)
    step.outputs["artifact-name"] = name
    runs = RunArtifacts(step.client, step.runner.repository)
    notes: list[str] = []
    found = runs.find({"id": run_id, "html_url": run_url}, name, notes)
    if found is None:
        raise ArtifactError(
            f"bisect-bad is set, so this job publishes a bisect, but run {run_id} has no artifact {name}"
            + (f" ({'; '.join(notes)})" if notes else ""),
            fix=f"upload mode bisect's output-dir under its artifact-name output ({name}, from the same config) in "
            "this run, as docs/examples/nightly.yml does; in a job that publishes a measured run, leave bisect-bad "
            "empty",
        )
    step.clear_output_dir()
    what = f"artifact {name} of run {run_id}"
    try:
        files = runs.unpack(found, step.out_dir / "measured" / slug(name))
    except BaselineError as e:
        raise ArtifactError(f"{what}: {e.message}", fix=e.fix) from e
    result = read_bisect(files, what)
    if result.bad.sha != sha:
        raise ArtifactError(
            f"{what}: its {BISECT_FILE} bisected up to {result.bad.sha}, not the bad commit {sha} this job was given "
            f"(bisect-bad {bad}): refused, as the issue it would write is chosen by that commit",
            fix="pass the publish job the `bad` the bisect job was given (docs/examples/nightly.yml); a branch that "
            "moved since resolves to another commit: dispatch with the SHA",
        )
    body = issue_body(result, config_name, run_url, name)
    report = step.out_dir / "bisect.md"
    replace_file(report, body)
    append_summary(step.runner.summary_path, body)
    step.outputs["report-path"] = step.relative(report)
    step.log.untrusted(f"rlhf-canary bisect {result.status}: {one_line(result.summary, 500)}")
    try:
        issue = step.publisher().upsert_issue(issue_key(config_name, sha), issue_title(result), body)
        step.outputs["issue-url"] = issue.url or ""
        if issue.note:
            step.log.annotate("notice", issue.note, title="rlhf-canary: a new bisect issue")
        step.log.line(f"rlhf-canary bisect: issue #{issue.id} {issue.url or ''}")
    except GitHubError as e:
        step.degrade(e, "open or update the bisect's issue")
    return step.exit_code(None)


def _trusted_bad(step: Step, bad: str) -> str:
    """The full SHA of `bad`: as given, or the commit the API says a branch, tag or short SHA names now."""
    if FULL_SHA.fullmatch(bad):
        return bad
    path = f"/repos/{step.runner.repository}/commits/{urllib.parse.quote(bad, safe='/')}"
    try:
        found = step.client.request("GET", path).body
    except GitHubError as e:
        if e.status not in (404, 422):  # 422: "No commit found for SHA"
            raise
        raise UsageError(
            f"bisect-bad {bad!r} is not a commit of {step.runner.repository}",
            fix="pass the bad commit the bisect job was given: its SHA, or the branch or tag it was named by",
        ) from None
    sha = found.get("sha") if isinstance(found, dict) else None
    if not isinstance(sha, str) or not FULL_SHA.fullmatch(sha):
        raise GitHubError(f"GET {path}: the answer names no commit SHA", fix="a GitHub API change: please report it")
    step.log.line(f"bisect-bad {bad} is {sha}")
    return sha


def read_bisect(files: list[Path], what: str) -> BisectResult:
    """The artifact's one bisect.json, validated; ArtifactError (exit 2) for anything else."""
    from canary_action.bisect.result import BisectResult

    found = [p for p in files if p.name == BISECT_FILE]
    if len(found) != 1:
        raise ArtifactError(f"{what} holds {len(found)} {BISECT_FILE}, not one", fix=_FIX)
    try:
        result = BisectResult.model_validate_json(read_regular_file(found[0], limit=MAX_BISECT_BYTES))
    except (FileRefusedError, OSError) as e:
        raise ArtifactError(f"{what}: its {BISECT_FILE} {clip_text(str(e), 200)}", fix=_FIX) from e
    except (ValidationError, RecursionError) as e:
        errors = e.errors(include_url=False) if isinstance(e, ValidationError) else []
        said = "; ".join(f"{'.'.join(map(str, err['loc'])) or '(file)'}: {err['msg']}" for err in errors[:3])
        said = clip_text(said or "nested too deeply", 300)
        raise ArtifactError(f"{what}: its {BISECT_FILE} is not one `canary bisect` writes ({said})", fix=_FIX) from e
    refs = [result.good, result.bad, *(s.commit for s in result.steps)]
    refs += [c for f in result.findings for c in f.commits]
    bad = next((r for r in refs if not FULL_SHA.fullmatch(r.sha)), None)
    if bad is not None:
        raise ArtifactError(f"{what}: its {BISECT_FILE} names {clip_text(bad.sha, 60)!r}, not a full SHA", fix=_FIX)
    return result


def issue_key(config_name: str, bad_sha: str) -> str:
    """The hidden first lines of the issue's body: the bisect marker, then this config and bad commit."""
    from canary_action.bisect.render import MARKER

    return f"{MARKER}\n<!-- rlhf-canary bisect: {slug(config_name)} {bad_sha} -->"


def issue_body(result: BisectResult, config_name: str, run_url: str | None, artifact: str) -> str:
    """bisect.md, rendered again here from the validated result with every text of it inert, under issue_key."""
    from canary_action.bisect.render import render_markdown

    _, _, rendered = render_markdown(inert(result)).partition("\n")  # its first line is the marker
    where = link("the workflow run", run_url)
    footer = f"The pairs' folders are in the artifact `{artifact}`" + (f" of {where}." if where else ".")
    body = f"{issue_key(config_name, result.bad.sha)}\n{rendered.rstrip()}\n\n{footer}\n"
    if len(body) <= ISSUE_MAX_CHARS:
        return body
    cut = "\n\n(cut: the whole report is the artifact's bisect.md)\n"
    return body[: body.rfind("\n", 0, ISSUE_MAX_CHARS - len(cut))] + cut


def issue_title(result: BisectResult) -> str:
    check = _name(result.check or "the check")
    good, bad = result.good.sha[:10], result.bad.sha[:10]
    finding = result.findings[0] if result.status == "found" and result.findings else None
    if finding is not None and finding.commits:
        commit, change = finding.commits[0], finding.after.pct - finding.before.pct
        what = f"{commit.sha[:10]} {one_line(commit.subject, 100)} changed {check} by {change:+.1f} %"
    elif result.status == "several":
        what = f"{len(result.findings)} changes of {check} in {good}..{bad}"
    elif result.status == "not-clear":
        what = f"{check} regressed in {good}..{bad}, not narrowed to one commit"
    elif result.status == "not-confirmed":
        what = f"the regression at {bad} is not confirmed"
    else:
        from canary_action.bisect.render import HEADLINES

        what = f"{HEADLINES[result.status]}, at {bad}"
    return ("canary bisect: " + what).replace("@", "@\u2060")[:TITLE_MAX_CHARS]  # a title mentions no one


def inert(result: BisectResult) -> BisectResult:
    """The result with every text inert markdown (report/escape.py), as render_markdown prints it: commit subjects
    and the reasons built from them are the commits' authors' text (for the issue here, the job summary in
    bisect_mode.py)."""

    def ref(commit: CommitRef) -> CommitRef:
        return commit.model_copy(update={"subject": _text(commit.subject, 120)})

    steps = [s.model_copy(update={"commit": ref(s.commit), "why": _text(s.why, 300)}) for s in result.steps]
    findings = [
        f.model_copy(update={"commits": [ref(c) for c in f.commits], "why": _text(f.why, 300)}) for f in result.findings
    ]
    return result.model_copy(
        update={
            "config": _name(result.config),
            "check": _name(result.check) if result.check else None,
            "unit": _name(result.unit),
            "summary": _text(result.summary, 1000),
            "good": ref(result.good),
            "bad": ref(result.bad),
            "steps": steps,
            "findings": findings,
        }
    )


def _text(value: str, limit: int) -> str:
    return str(text(value.translate(_CELL_SAFE), limit))


def _name(value: str) -> str:
    """A check or file name, printed bare and in code spans alike: letters, digits and `_./ -` only."""
    return re.sub(r"[^A-Za-z0-9_./ -]+", "-", one_line(value, 80))
