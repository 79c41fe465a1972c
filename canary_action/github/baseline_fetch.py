"""Finding the baselines: the artifacts earlier default-branch runs of this same workflow uploaded.

Which runs: successful runs of the workflow file that is running now, on the baseline branch, started by
push, schedule or workflow_dispatch — never by a pull request, whose code is not the baseline — newest
first, until `wanted` of them gave a usable artifact. Each artifact is looked up by name, skipped when
expired or oversized, downloaded with a size cap, and unpacked by artifacts.extract_artifact, which refuses
what a hostile zip can do. Every run passed over is a note in the report, with why.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from canary_action.errors import BaselineError
from canary_action.github.artifacts import extract_artifact
from canary_action.github.client import GitHubClient
from canary_action.metrics.io import clip_text

BASELINE_EVENTS: Final = frozenset({"push", "schedule", "workflow_dispatch"})
MAX_ARTIFACT_BYTES: Final = 64 * 2**20  # a canary's results are a few MiB; a profiler trace at most tens
MAX_RUNS_SCANNED: Final = 100  # runs looked at per search: enough to skip a few without usable artifacts
METRICS_FILE: Final = "metrics.json"
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
    """metrics.json files, newest run first."""
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
) -> FetchedBaselines:
    """Download up to `wanted` baselines into `dest` (one folder per run). GitHubError when GitHub fails."""
    fetched = FetchedBaselines()
    artifacts = RunArtifacts(client, repository)
    if run_id is not None:
        runs = [client.request("GET", f"/repos/{repository}/actions/runs/{run_id}").body]
    elif workflow_file is None:
        fetched.notes.append("the running workflow's file is unknown (GITHUB_WORKFLOW_REF unset): no baseline search")
        return fetched
    else:
        runs = _baseline_runs(client, repository, workflow_file, branch, fetched.notes)
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
    return fetched


def _baseline_runs(
    client: GitHubClient, repository: str, workflow_file: str, branch: str, notes: list[str]
) -> list[dict[str, Any]]:
    """Successful baseline-event runs of the workflow on `branch`, newest first."""
    workflow = workflow_file.rsplit("/", 1)[-1]  # the API takes the file name as the workflow id
    runs = client.paginate(
        f"/repos/{repository}/actions/workflows/{workflow}/runs",
        "workflow_runs",
        params={"branch": branch, "status": "success", "exclude_pull_requests": "true"},
        limit=MAX_RUNS_SCANNED,
    )
    kept = [r for r in runs if isinstance(r, dict) and r.get("event") in BASELINE_EVENTS]
    if len(kept) < len(runs):
        notes.append(f"left out {len(runs) - len(kept)} run(s) of {branch} started by other events (pull requests)")
    kept.sort(key=lambda r: str(r.get("created_at", "")), reverse=True)
    return kept
