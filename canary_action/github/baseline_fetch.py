"""Finding the baselines: the artifacts earlier default-branch runs of this workflow (or `baseline-workflow`)
uploaded.

Which runs: successful runs of the workflow file that is running now (or the one `baseline-workflow` names),
on the baseline branch of this repository, started by push, schedule or workflow_dispatch — never by a pull
request, whose code is not the baseline — newest first, until `wanted` of them gave a usable artifact. For a
pull request, the run at its merge base with the baseline branch comes first when there is one: it compares
the pull request's changes alone, not the commits the branch gained since. Each artifact is looked up by
name, skipped when expired or oversized, downloaded with a size cap, and unpacked by
artifacts.extract_artifact, which refuses what a hostile zip can do. Every run passed over is a note in the
report, with why, and so is the merge base's run, found or not.
"""

from __future__ import annotations

import io
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from canary_action.errors import BaselineError, GitHubError
from canary_action.github.artifacts import extract_artifact
from canary_action.github.client import GitHubClient
from canary_action.github.inputs import FULL_SHA
from canary_action.metrics.io import METRICS_FILE, clip_text, counted

BASELINE_EVENTS: Final = frozenset({"push", "schedule", "workflow_dispatch"})
MAX_ARTIFACT_BYTES: Final = 64 * 2**20  # a canary's results are a few MiB; a profiler trace at most tens
MAX_RUNS_SCANNED: Final = 100  # runs looked at per search: enough to skip a few without usable artifacts
OVERSIZED: Final = "over the cap"


@dataclass(frozen=True)
class Artifact:
    """One downloadable artifact of a workflow run."""

    id: int
    name: str
    run_id: int
    run_url: str | None


@dataclass
class FetchedBaselines:
    paths: list[Path] = field(default_factory=list)
    """metrics.json files: a pull request's merge base's run first, then the newest runs first."""
    notes: list[str] = field(default_factory=list)
    """Runs passed over, and why."""
    run_urls: list[str] = field(default_factory=list)
    """The runs the paths came from, same order."""


@dataclass
class RunArtifacts:
    """The artifact lookups of one repository."""

    client: GitHubClient
    repository: str
    max_bytes: int = MAX_ARTIFACT_BYTES

    def find(self, run: dict[str, Any], name: str, notes: list[str]) -> Artifact | None:
        """The run's artifact called `name` that can still be downloaded; a note when there is none."""
        run_id = int(run["id"])
        listed = self.client.paginate(
            f"/repos/{self.repository}/actions/runs/{run_id}/artifacts", "artifacts", params={"name": name}
        )
        matching = [a for a in listed if isinstance(a, dict) and a.get("name") == name]
        fresh = [a for a in matching if not a.get("expired")]
        if not fresh:
            why = f"its artifact {name} expired" if matching else f"it has no artifact named {name}"
            notes.append(f"skipped run {run_id}: {why}")
            return None
        chosen = fresh[0]
        size = chosen.get("size_in_bytes")
        if isinstance(size, int) and size > self.max_bytes:
            notes.append(f"skipped run {run_id}: its artifact {name} is {size / 2**20:.0f} MiB, {OVERSIZED}")
            return None
        url = run.get("html_url")
        return Artifact(int(chosen["id"]), name, run_id, url if isinstance(url, str) else None)

    def unpack(self, artifact: Artifact, dest: Path) -> list[Path]:
        """Download and extract safely into `dest`; BaselineError when the zip is refused."""
        data = self.client.download(
            f"/repos/{self.repository}/actions/artifacts/{artifact.id}/zip", max_bytes=self.max_bytes
        )
        return extract_artifact(io.BytesIO(data), dest)


def fetch_baselines(
    client: GitHubClient,
    *,
    repository: str,
    workflow_file: str | None,
    branch: str,
    artifact: str,
    wanted: int,
    dest: Path,
    run_id: int | None = None,
    pull_head: str | None = None,
) -> FetchedBaselines:
    """Download up to `wanted` baselines into `dest` (one folder per run). GitHubError when GitHub fails.
    `pull_head`: a pull request's measured commit, whose merge base with `branch` is searched first; that
    search failing is a note, never an error."""
    fetched = FetchedBaselines()
    artifacts = RunArtifacts(client, repository)
    merge_base: MergeBase | None = None
    if run_id is not None:
        runs = _named_run(client, repository, run_id, branch, fetched.notes)
    elif workflow_file is None:
        fetched.notes.append("the running workflow's file is unknown (GITHUB_WORKFLOW_REF unset): no baseline search")
        return fetched
    else:
        workflow = workflow_file.rsplit("/", 1)[-1]  # the API takes the file name as the workflow id
        if pull_head is not None:
            merge_base = _merge_base(client, repository, workflow, branch, head=pull_head, notes=fetched.notes)
        runs = _baseline_runs(client, repository, workflow, branch, fetched.notes)
        if merge_base is not None:
            runs = [merge_base.run, *(r for r in runs if r.get("id") != merge_base.run.get("id"))]
    used: list[int] = []
    for run in runs:
        if len(fetched.paths) >= wanted:
            break
        found = artifacts.find(run, artifact, fetched.notes)
        if found is None:
            continue
        try:
            files = artifacts.unpack(found, dest / f"run-{found.run_id}")
        except BaselineError as refused:
            fetched.notes.append(f"refused the artifact of run {found.run_id}: {clip_text(refused.message, 200)}")
            continue
        metrics = [p for p in files if p.name == METRICS_FILE]
        if not metrics:
            fetched.notes.append(f"skipped run {found.run_id}: its artifact {artifact} holds no {METRICS_FILE}")
            continue
        fetched.paths.extend(metrics)
        fetched.run_urls.extend([found.run_url or ""] * len(metrics))
        used.append(found.run_id)
    if merge_base is not None:
        fetched.notes.append(merge_base.outcome(used[:1] == [int(merge_base.run["id"])]))
    return fetched


@dataclass(frozen=True)
class MergeBase:
    """Where a pull request's head meets the baseline branch, and the newest baseline run of that commit."""

    sha: str
    branch: str
    run: dict[str, Any]

    def outcome(self, used: bool) -> str:
        """The report's note on the first baseline, once it is known whether the run's artifact was usable."""
        run_id = int(self.run["id"])
        if used:
            return (
                f"first baseline: run {run_id} of {self.sha[:12]}, the merge base of this pull request with "
                f"{self.branch} (the pull request's changes alone, not the commits {self.branch} gained since)"
            )
        return (
            f"run {run_id} of the merge base {self.sha[:12]} gave no baseline (see above): compared with the newest "
            f"runs of {self.branch} instead"
        )


def _merge_base(
    client: GitHubClient, repository: str, workflow: str, branch: str, *, head: str, notes: list[str]
) -> MergeBase | None:
    """The merge base of `branch` and `head` with its newest baseline run; None, noted, when it has none or GitHub
    cannot say (the newest runs of `branch` are then the baselines). Two requests at most."""
    instead = f"compared with the newest runs of {branch} instead"
    if not FULL_SHA.fullmatch(head):
        notes.append(
            f"the pull request's commit {clip_text(head, 50)!r} is not a SHA: no merge base looked up; {instead}"
        )
        return None
    try:
        basehead = f"{urllib.parse.quote(branch, safe='/')}...{head}"
        body = client.request("GET", f"/repos/{repository}/compare/{basehead}", params={"per_page": "1"}).body
        found = (body.get("merge_base_commit") or {}).get("sha") if isinstance(body, dict) else None
        sha = found if isinstance(found, str) and FULL_SHA.fullmatch(found) else None
        runs = [] if sha is None else _baseline_runs(client, repository, workflow, branch, [], head_sha=sha)
    except GitHubError as e:
        notes.append(
            f"the merge base of this pull request with {branch} could not be looked up "
            f"({clip_text(e.message, 150)}): {instead}"
        )
        return None
    if sha is None:
        notes.append(f"GitHub named no merge base of this pull request with {branch}: {instead}")
        return None
    if not runs:
        notes.append(
            f"{workflow} has no successful {branch} run of {sha[:12]}, the merge base of this pull request with "
            f"{branch}: {instead} (they may hold changes this pull request does not)"
        )
        return None
    return MergeBase(sha, branch, runs[0])


def _baseline_runs(
    client: GitHubClient,
    repository: str,
    workflow: str,
    branch: str,
    notes: list[str],
    *,
    head_sha: str | None = None,
) -> list[dict[str, Any]]:
    """Successful baseline-event runs of the workflow on `branch` of `repository` (of commit `head_sha` only, when
    given), newest first."""
    params = {"branch": branch, "status": "success", "exclude_pull_requests": "true"}
    runs = client.paginate(
        f"/repos/{repository}/actions/workflows/{workflow}/runs",
        "workflow_runs",
        params={**params, **({"head_sha": head_sha} if head_sha else {})},
        limit=MAX_RUNS_SCANNED,
    )
    listed = [r for r in runs if isinstance(r, dict)]
    by_event = [r for r in listed if r.get("event") in BASELINE_EVENTS]
    if len(by_event) < len(runs):
        others = counted(len(runs) - len(by_event), "run")
        notes.append(f"left out {others} of {branch} started by other events (pull requests)")
    # GitHub filters by branch and commit already; checked again, with the repository: a fork's run of a branch
    # of the same name is the fork's code
    kept = [r for r in by_event if r.get("head_branch") == branch and _same_repository(r, repository)]
    kept = [r for r in kept if head_sha is None or r.get("head_sha") == head_sha]
    if len(kept) < len(by_event):
        notes.append(f"left out {counted(len(by_event) - len(kept), 'run')} of another branch, commit or repository")
    kept.sort(key=lambda r: str(r.get("created_at", "")), reverse=True)
    return kept


def _named_run(
    client: GitHubClient, repository: str, run_id: int, branch: str, notes: list[str]
) -> list[dict[str, Any]]:
    """The run `baseline-run-id` names, if it is a baseline as a search would have found it: a successful run of
    `branch` of this repository, started by push, schedule or workflow_dispatch. A pull request's run (its
    artifact holds that pull request's numbers), a failed run or a fork's is left out, with a note."""
    run = client.request("GET", f"/repos/{repository}/actions/runs/{run_id}").body
    if not isinstance(run, dict):
        return []
    wrong = [
        f"it was started by {clip_text(str(run.get('event')), 40)}" if run.get("event") not in BASELINE_EVENTS else "",
        f"it ended {clip_text(str(run.get('conclusion')), 40)}" if run.get("conclusion") != "success" else "",
        f"it ran on {clip_text(str(run.get('head_branch')), 80)}" if run.get("head_branch") != branch else "",
        "it ran another repository's code" if not _same_repository(run, repository) else "",
    ]
    if not any(wrong):
        return [run]
    notes.append(
        f"baseline-run-id {run_id} is not a baseline: {'; '.join(w for w in wrong if w)}. A baseline is a successful "
        f"run of {branch} in this repository started by push, schedule or workflow_dispatch: name one of those, or "
        "leave baseline-run-id empty to search"
    )
    return []


def _same_repository(run: dict[str, Any], repository: str) -> bool:
    head_repo = run.get("head_repository")
    name = head_repo.get("full_name") if isinstance(head_repo, dict) else None
    return isinstance(name, str) and name.lower() == repository.lower()
