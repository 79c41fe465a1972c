"""What the triggering event means for the canary: which pull request, which commit the check run belongs
on (the PR's *head* SHA, never the merge commit GITHUB_SHA points at), whether the PR comes from a fork
(read-only token), whether a push is to the default branch (a baseline run), and, for workflow_run, which
finished run to report on. Reads the event payload; the GITHUB_* variables come from inputs.read_runner.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any, Final

from canary_action.errors import UsageError
from canary_action.files import FileRefusedError, read_regular_file
from canary_action.github.inputs import ActionInputs, RunnerEnv
from canary_action.metrics.io import clip_text

MAX_PAYLOAD_BYTES: Final = 25 * 2**20  # GitHub caps webhook payloads at 25 MB
PR_EVENTS: Final = frozenset({"pull_request", "pull_request_target"})


@dataclass(frozen=True)
class EventContext:
    event: str
    action: str | None
    repository: str
    default_branch: str | None
    pr_number: int | None
    head_sha: str | None
    """The commit the check run goes on."""
    is_fork: bool
    """A pull request from another repository: the token cannot write checks or comments."""
    is_default_branch_push: bool
    """A push to the default branch: this run becomes a baseline."""
    workflow_file: str | None
    """.github/workflows/<file>.yml of the running workflow (baseline runs are searched by it)."""
    base_sha: str | None = None
    """Pull requests: the base branch's commit the event names (a lockstep baseline checks it out)."""
    triggering_run_id: int | None = None
    """workflow_run: the finished run whose uploaded results are reported."""
    triggering_event: str | None = None
    """workflow_run: the event that started that run (only pull_request runs have a PR to report on)."""
    triggering_run_url: str | None = None
    head_branch: str | None = None
    """workflow_run: the branch the run's head commit is on (for finding a fork's pull request)."""
    head_owner: str | None = None
    """workflow_run: the owner of the repository that branch is in (a fork's owner)."""


def event_context(runner: RunnerEnv, inputs: ActionInputs) -> EventContext:
    payload = _payload(runner)
    repo = payload.get("repository") or {}
    default_branch = repo.get("default_branch") if isinstance(repo, dict) else None
    plain = EventContext(
        event=runner.event_name,
        action=_str(payload.get("action")),
        repository=runner.repository,
        default_branch=default_branch if isinstance(default_branch, str) else None,
        pr_number=inputs.pr_number,
        head_sha=runner.sha,
        is_fork=False,
        is_default_branch_push=False,
        workflow_file=_workflow_file(runner.workflow_ref),
    )
    if runner.event_name in PR_EVENTS:
        pr = _mapping(payload, "pull_request")
        head, target = _mapping(pr, "head"), _mapping(pr, "base")
        head_repo = head.get("repo")
        # A deleted fork has no head repo at all: still a fork as far as the token is concerned.
        fork = not isinstance(head_repo, dict) or head_repo.get("full_name") != _mapping(target, "repo").get(
            "full_name"
        )
        return replace(
            plain,
            pr_number=_int(payload.get("number")) or _int(pr.get("number")),
            head_sha=_str(head.get("sha")),
            base_sha=_str(target.get("sha")),
            is_fork=fork,
        )
    if runner.event_name == "workflow_run":
        run = _mapping(payload, "workflow_run")
        prs = [p for p in run.get("pull_requests") or [] if isinstance(p, dict)]
        head_repo, base_repo = _mapping(run, "head_repository"), _mapping(run, "repository")
        return replace(
            plain,
            # A fork's workflow_run lists no pull request: the pr-number input (or a lookup by head SHA) has to say.
            # Several listed (one branch, two base branches): none chosen here; report mode refuses to guess.
            pr_number=inputs.pr_number or (_int(prs[0].get("number")) if len(prs) == 1 else None),
            head_sha=_str(run.get("head_sha")),
            is_fork=head_repo.get("full_name") != base_repo.get("full_name"),
            triggering_run_id=_int(run.get("id")),
            triggering_event=_str(run.get("event")),
            triggering_run_url=_str(run.get("html_url")),
            head_branch=_str(run.get("head_branch")),
            head_owner=_str(_mapping(head_repo, "owner").get("login")),
        )
    head_sha = _str(payload.get("after")) if runner.event_name == "push" else None
    on_default = plain.default_branch is not None and runner.ref == f"refs/heads/{plain.default_branch}"
    return replace(
        plain, head_sha=head_sha or runner.sha, is_default_branch_push=runner.event_name == "push" and on_default
    )


def _payload(runner: RunnerEnv) -> dict[str, Any]:
    path = runner.event_path
    if path is None:
        return {}  # e.g. a local dry run: everything then comes from GITHUB_* and the inputs
    fix = "GITHUB_EVENT_PATH must point at the runner's event.json"
    try:
        data = json.loads(read_regular_file(path, limit=MAX_PAYLOAD_BYTES).decode("utf-8"))
    except FileRefusedError as e:
        raise UsageError(f"event payload {path} {e}", fix=fix) from None
    except RecursionError:  # json recurses per level: 100,000 nested arrays exhaust the stack
        raise UsageError(f"event payload {path} is nested too deeply to be a GitHub event", fix=fix) from None
    except (OSError, ValueError) as e:  # ValueError: not UTF-8, not JSON, or an integer of over 4,300 digits
        raise UsageError(f"cannot read the event payload {path}: {clip_text(str(e), 200)}", fix=fix) from None
    if not isinstance(data, dict):
        raise UsageError(f"event payload {path} is not a JSON object", fix=fix)
    return data


def _workflow_file(workflow_ref: str | None) -> str | None:
    """owner/repo/.github/workflows/canary.yml@refs/heads/main -> .github/workflows/canary.yml"""
    if not workflow_ref or "/.github/workflows/" not in workflow_ref:
        return None
    return ".github/workflows/" + workflow_ref.split("/.github/workflows/", 1)[1].split("@", 1)[0]


def _mapping(data: dict[str, Any], key: str) -> dict[str, Any]:
    value = data.get(key)
    return value if isinstance(value, dict) else {}


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _str(value: object) -> str | None:
    return value if isinstance(value, str) and value else None
