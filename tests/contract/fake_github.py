"""A stateful in-memory GitHub for one repository, on a real local HTTP server, held to GitHub's OpenAPI contract.

Why a fake and not mocks: the action's GitHub code is tested through its real HTTP client against a server that
remembers (a comment posted is listed next time, annotations accumulate across PATCHes), refuses as GitHub does
(401, 403 read-only token, 404, 410 expired artifact, 422 limits) and redirects artifact downloads to another
host, so a client that leaks its token to blob storage is caught. Every request, and every 2xx JSON response the
fake itself sends, is checked against the vendored OpenAPI subset; `violations` collects what breaks it, and the
`fake_github` fixture fails the test on any.
"""

from __future__ import annotations

import hashlib
import io
import itertools
import json
import math
import re
import secrets
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cache
from http import HTTPStatus
from typing import Any, Final, NamedTuple
from urllib.parse import urlencode

from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

from tests.contract import github_objects as gh
from tests.contract.fake_git import FakeGit
from tests.contract.openapi import OpenApiSpec, Operation

COMMENT_MAX_CHARS: Final = 65536  # GitHub: "Body is too long (maximum is 65536 characters)"
BLOB_PREFIX: Final = "/_blobs/artifacts/"
_WRITES: Final = frozenset({"POST", "PATCH", "PUT", "DELETE"})
_START: Final = datetime(2026, 11, 2, tzinfo=UTC)


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the fake received it: header names lower-case, `body` the parsed JSON (None if none)."""

    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: Any
    host: str


@dataclass
class _Failure:
    method: str | None
    path_contains: str
    status: int
    times: int
    headers: dict[str, str]
    body: Any


class _Call(NamedTuple):
    operation: Operation
    params: dict[str, str]
    query: dict[str, str]
    body: Any
    path: str


class _Reply(NamedTuple):
    status: int
    body: Any = None
    headers: dict[str, str] = {}  # noqa: RUF012 - never mutated: replies are built whole


@cache
def _spec() -> OpenApiSpec:
    return OpenApiSpec.load()


def make_zip(files: dict[str, bytes]) -> bytes:
    """A zip of `files`, names taken as given: "../evil" or "/etc/x" make the hostile archives tests need."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, content in files.items():
            info = zipfile.ZipInfo(name, date_time=(2026, 11, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED  # a ZipInfo's own type wins over the archive's (stored)
            archive.writestr(info, content)
    return buffer.getvalue()


class FakeGitHub:
    """GitHub for `repo`, served by `httpserver` at `api_url`; set state up with `add_*`, inspect it afterwards.

    Public state (read it in assertions; the `add_*` methods and requests change it):
    `check_runs` (full objects as GitHub returns them), `annotations` (check run id -> every annotation sent),
    `comments` (issue number -> comments, oldest first), `issues` (number -> issue), `pulls` (number -> pull
    request), `workflow_runs`,
    `artifacts`, `merge_bases` (a head commit -> where it meets the default branch), `requests` and
    `blob_requests` (RecordedRequest), `violations` (contract breaches, as text).
    Switches: `read_only` (every write -> 403, as with a fork's token), `fail_next` (queued failures), and whom the
    token is: `token_user` (a personal access token's user), else `installation_bot` (an installation token's bot,
    which GraphQL's viewer names unless `viewer_refused`). `refs` (branch or tag -> commit) are what
    GET commits/{ref} resolves. GraphQL (POST /graphql) answers the viewer query alone: it is no REST operation.
    `api_url` is what GITHUB_API_URL should be; `blob_url` the other host that artifact downloads redirect to.
    """

    def __init__(
        self,
        httpserver: HTTPServer,
        *,
        repo: str = "Codertocat/Hello-World",
        default_branch: str = "master",
        token: str = "ghs_faketoken",
        spec: OpenApiSpec | None = None,
    ) -> None:
        self.httpserver, self.repo, self.default_branch, self.token = httpserver, repo, default_branch, token
        self.spec = spec or _spec()
        self.read_only = False
        #: The login a personal access token belongs to; None: an installation token, for which GET /user is
        #: refused and comments are written as `installation_bot`.
        self.token_user: str | None = None
        #: Whom an installation token writes as: GITHUB_TOKEN's github-actions[bot], or another app's bot.
        self.installation_bot = gh.BOT_LOGIN
        #: GraphQL's viewer query answered with an error instead of the login (an identity nobody tells).
        self.viewer_refused = False
        host, port = httpserver.host, httpserver.port
        self.api_url = f"http://{host}:{port}"
        # The same server under the other spelling of this machine: a different host to an HTTP client.
        self.blob_url = f"http://{'127.0.0.1' if host == 'localhost' else 'localhost'}:{port}"
        self.repository = gh.repository(self.api_url, self.repo, self.default_branch)
        self.check_runs: list[dict[str, Any]] = []
        self.annotations: dict[int, list[dict[str, Any]]] = {}
        self.comments: dict[int, list[dict[str, Any]]] = {}
        self.issues: dict[int, dict[str, Any]] = {}
        self.pulls: dict[int, dict[str, Any]] = {}
        self.workflow_runs: list[dict[str, Any]] = []
        self.artifacts: list[dict[str, Any]] = []
        self.merge_bases: dict[str, str] = {}
        self.refs: dict[str, str] = {}
        self.requests: list[RecordedRequest] = []
        self.blob_requests: list[RecordedRequest] = []
        self.violations: list[str] = []
        self._failures: list[_Failure] = []
        self._blobs: dict[int, tuple[str, bytes]] = {}  # artifact id -> (signature, zip bytes)
        self._workflows: dict[str, int] = {}  # workflow file name -> workflow id
        self._ids = itertools.count(1_000_001)
        self._clock = itertools.count(1)
        #: The Git Data API's objects and branches (the history branch: canary_action/github/history_branch.py).
        self.git = FakeGit(self.api_url, self.repo, self._now)
        self._handlers: dict[str, Callable[[_Call], _Reply]] = {
            "repos/get": lambda _: _Reply(200, self.repository),
            "actions/list-workflow-runs": self._list_runs,
            "repos/compare-commits-with-basehead": self._compare,
            "repos/get-commit": self._get_commit,
            "actions/get-workflow-run": self._get_run,
            "actions/list-workflow-run-artifacts": self._list_artifacts,
            "actions/download-artifact": self._download_artifact,
            "checks/list-for-ref": self._list_check_runs,
            "checks/create": self._create_check_run,
            "checks/update": self._update_check_run,
            "issues/list-comments": self._list_comments,
            "issues/create-comment": self._create_comment,
            "issues/update-comment": self._update_comment,
            "issues/list-for-repo": self._list_issues,
            "issues/create": self._create_issue,
            "issues/update": self._update_issue,
            "pulls/list": self._list_pulls,
            "pulls/get": self._get_pull,
            "repos/list-pull-requests-associated-with-commit": self._pulls_of_commit,
            "users/get-authenticated": self._authenticated_user,
            **self._git_handlers(),
        }
        self.httpserver.expect_request(re.compile(".*")).respond_with_handler(self._handle)

    # -- state set-up ------------------------------------------------------------------------------------------

    def add_workflow_run(
        self,
        *,
        workflow_file: str = "canary.yml",
        branch: str | None = None,
        event: str = "push",
        status: str = "completed",
        conclusion: str | None = "success",
        head_sha: str | None = None,
        created_at: str | None = None,
        actor: str = "Codertocat",
        head_repo: str | None = None,
    ) -> int:
        """A finished (or, with status="in_progress" and conclusion=None, running) run; returns its id.
        `head_repo`: the repository of its head commit when not this one (a fork's pull_request run)."""
        workflow_id = self._workflows.setdefault(workflow_file, 161335 + len(self._workflows))
        run_id = next(self._ids)
        number = 1 + sum(r["workflow_id"] == workflow_id for r in self.workflow_runs)
        fields = {
            "id": run_id,
            "run_number": number,
            "head_branch": branch or self.default_branch,
            "head_sha": head_sha or gh.sha(f"run {run_id}"),
            "event": event,
            "status": status,
            "conclusion": conclusion,
            "created_at": created_at or self._now(),
            "actor": actor,
        }
        run = gh.workflow_run(
            self.api_url, self.repository, fields, workflow_file=workflow_file, workflow_id=workflow_id
        )
        if head_repo is not None and head_repo.lower() != self.repo.lower():
            fork = gh.repository(self.api_url, head_repo, self.default_branch, fork=True)
            run.update(head_repository=fork, head_repository_id=fork["id"])
        self.workflow_runs.append(run)
        return run_id

    def add_artifact(self, run_id: int, *, name: str, content: bytes, expired: bool = False) -> int:
        """An artifact of run `run_id` holding `content` (a zip: see make_zip); returns its id."""
        run = self._find(self.workflow_runs, run_id)
        if run is None:
            raise ValueError(f"no workflow run {run_id}: add_workflow_run first")
        artifact_id = next(self._ids)
        created = datetime.fromisoformat(run["created_at"])
        expires = created + timedelta(days=90) if not expired else _START - timedelta(days=1)
        fields = {
            "id": artifact_id,
            "name": name,
            "size_in_bytes": len(content),
            "digest": "sha256:" + hashlib.sha256(content).hexdigest(),
            "expired": expired,
            "created_at": run["created_at"],
            "expires_at": _iso(expires),
        }
        self.artifacts.append(gh.artifact(self.api_url, self.repository, run, fields))
        self._blobs[artifact_id] = (secrets.token_hex(16), content)
        return artifact_id

    def add_pull(
        self,
        *,
        number: int,
        head_sha: str | None = None,
        head_ref: str = "changes",
        head_repo: str | None = None,
        base_ref: str | None = None,
        state: str = "open",
        user: str = "Codertocat",
    ) -> dict[str, Any]:
        """A pull request; `head_repo` other than `repo` makes it a fork's. Returns the stored object."""
        head_repo = head_repo or self.repo
        fork = head_repo.lower() != self.repo.lower()
        head = gh.repository(self.api_url, head_repo, self.default_branch, fork=True) if fork else self.repository
        fields = {
            "id": next(self._ids),
            "number": number,
            "state": state,
            "head_sha": head_sha or gh.sha(f"pull {number}"),
            "head_ref": head_ref,
            "base_ref": base_ref or self.default_branch,
            "base_sha": gh.sha(f"base {number}"),
            "created_at": self._now(),
            "user": user,
        }
        self.pulls[number] = gh.pull_request(self.api_url, self.repository, head, fields)
        return self.pulls[number]

    def add_merge_base(self, head_sha: str, merge_base: str) -> None:
        """`head_sha` (a pull request's commit) branched off the default branch at `merge_base`: compare knows it."""
        self.merge_bases[head_sha] = merge_base

    def add_comment(self, *, issue_number: int, body: str, user: str = "someone", user_type: str | None = None) -> int:
        """A comment already on the issue or pull request: someone else's, or (user="github-actions[bot]", typed
        "Bot" unless said otherwise) an earlier run's sticky comment. Returns its id."""
        fields = {"id": next(self._ids), "issue_number": issue_number, "body": body, "user": user}
        comment = gh.issue_comment(
            self.api_url,
            self.repository,
            {**fields, "created_at": self._now()},
            on_pull=issue_number in self.pulls,
            user_type=user_type or ("Bot" if user == gh.BOT_LOGIN else "User"),
        )
        self.comments.setdefault(issue_number, []).append(comment)
        return int(comment["id"])

    def add_issue(self, *, title: str, body: str, user: str = "someone", state: str = "open") -> dict[str, Any]:
        """An issue (not a pull request): someone else's, or (user="github-actions[bot]") an earlier run's."""
        number = 1 + max([*self.pulls, *self.issues, *self.comments], default=0)
        fields = {"id": next(self._ids), "number": number, "title": title, "body": body, "user": user, "state": state}
        user_type = "Bot" if user.endswith("[bot]") else "User"
        made = gh.issue(self.api_url, self.repository, {**fields, "created_at": self._now()}, user_type=user_type)
        self.issues[number] = made
        return made

    def fail_next(
        self,
        *,
        method: str | None = None,
        path_contains: str = "",
        status: int = 500,
        times: int = 1,
        headers: dict[str, str] | None = None,
        body: Any = None,
    ) -> None:
        """Answer the next `times` matching requests with `status` instead (after the token check), in queue order.

        E.g. 429 with {"Retry-After": "3"}, or 403 with {"x-ratelimit-remaining": "0", "x-ratelimit-reset": "…"}
        and body {"message": "API rate limit exceeded for installation."}. The default body is GitHub's shape.
        """
        default = {"message": HTTPStatus(status).phrase, "documentation_url": "https://docs.github.com/rest"}
        self._failures.append(
            _Failure(method, path_contains, status, times, dict(headers or {}), default if body is None else body)
        )

    # -- the server ------------------------------------------------------------------------------------------

    def _handle(self, request: Request) -> Response:
        recorded, parse_error = _record(request)
        if request.path.startswith(BLOB_PREFIX):
            self.blob_requests.append(recorded)
            return self._failure(recorded) or self._blob(request.path, recorded.query)
        self.requests.append(recorded)
        if recorded.path == "/graphql":
            return self._refusal(recorded, parse_error) or self._graphql(recorded)
        if not parse_error:
            self.violations.extend(
                self.spec.check_request(recorded.method, recorded.path, recorded.query, recorded.body)
            )
        if refused := self._refusal(recorded, parse_error):
            return refused
        matched = self.spec.match(recorded.method, recorded.path)
        if isinstance(matched, str):
            return _json(404, _error("Not Found", "https://docs.github.com/rest", 404))
        operation, params = matched
        reply = self._dispatch(_Call(operation, params, recorded.query, recorded.body, recorded.path))
        if isinstance(reply.body, dict) and reply.status >= 400:
            reply = reply._replace(body=_error(reply.body["message"], operation.docs_url, reply.status, reply.body))
        elif 200 <= reply.status < 300 and reply.body is not None:
            self.violations.extend(self.spec.check_response(recorded.method, recorded.path, reply.status, reply.body))
        if reply.status == 302:
            return Response(b"", status=302, headers=reply.headers)
        return _json(reply.status, reply.body, reply.headers)

    def _refusal(self, recorded: RecordedRequest, parse_error: bool) -> Response | None:
        """What GitHub answers before looking at the endpoint: unreadable JSON, a bad token, a queued failure."""
        if parse_error:
            return _json(400, _error("Problems parsing JSON", "https://docs.github.com/rest", 400))
        scheme, _, credential = recorded.headers.get("authorization", "").partition(" ")
        if scheme.lower() not in ("bearer", "token") or not secrets.compare_digest(
            credential.strip().encode(), self.token.encode()
        ):
            return _json(401, _error("Bad credentials", "https://docs.github.com/rest", 401))
        return self._failure(recorded)

    def _dispatch(self, call: _Call) -> _Reply:
        if "owner" in call.params and f"{call.params['owner']}/{call.params['repo']}".lower() != self.repo.lower():
            return _Reply(404, {"message": "Not Found"})
        if self.read_only and call.operation.method in _WRITES:
            return _Reply(403, {"message": "Resource not accessible by integration"})
        problems = self.spec.check_body(call.operation.method, call.path, call.body)
        if call.operation.method in _WRITES and problems:
            # GitHub validates bodies too; its message lists what it refused, as this one does.
            return _Reply(422, {"message": "Invalid request.\n\n" + "\n".join(problems)})
        return self._handlers[call.operation.operation_id](call)

    def _failure(self, recorded: RecordedRequest) -> Response | None:
        for failure in self._failures:
            if failure.method in (None, recorded.method) and failure.path_contains in recorded.path:
                failure.times -= 1
                if failure.times == 0:
                    self._failures.remove(failure)
                return _json(failure.status, failure.body, failure.headers)
        return None

    def _blob(self, path: str, query: dict[str, str]) -> Response:
        """Blob storage: no token needed (the signature in the URL is the credential), so none should arrive."""
        artifact_id = path.removeprefix(BLOB_PREFIX).split("/")[0]
        signature, content = self._blobs.get(int(artifact_id) if artifact_id.isdigit() else -1, ("", b""))
        if not signature or not secrets.compare_digest(query.get("sig", ""), signature):
            return Response(b"BlobNotFound", status=404, content_type="text/plain")
        return Response(content, status=200, content_type="application/zip")

    # -- endpoints ---------------------------------------------------------------------------------------------

    def _list_runs(self, call: _Call) -> _Reply:
        workflow = call.params["workflow_id"]
        workflow_id = self._workflows.get(workflow) or next(
            (i for i in self._workflows.values() if str(i) == workflow), None
        )
        if workflow_id is None:
            return _Reply(404, {"message": "Not Found"})
        q = call.query
        runs = [
            run
            for run in self.workflow_runs
            if run["workflow_id"] == workflow_id
            and q.get("branch", run["head_branch"]) == run["head_branch"]
            and q.get("event", run["event"]) == run["event"]
            and q.get("head_sha", run["head_sha"]) == run["head_sha"]
            and q.get("actor", run["actor"]["login"]) == run["actor"]["login"]
            and ("status" not in q or q["status"] in (run["status"], run["conclusion"]))  # a status or a conclusion
        ]
        runs.sort(key=lambda r: (datetime.fromisoformat(r["created_at"]), r["id"]), reverse=True)
        runs = [self._without_pulls(run, q) for run in runs]
        page, headers = self._paginate(runs, call)
        return _Reply(200, {"total_count": len(runs), "workflow_runs": page}, headers)

    def _compare(self, call: _Call) -> _Reply:
        """BASE...HEAD for the default branch (or a commit) and a head whose merge base was added; else 404, as
        GitHub answers for a commit it does not know or two histories without a common ancestor."""
        base, _, head = call.params["basehead"].partition("...")
        merge_base = self.merge_bases.get(head)
        if merge_base is None or not (base == self.default_branch or re.fullmatch(r"[0-9a-f]{40}", base)):
            return _Reply(404, {"message": "Not Found"})
        base_sha = gh.sha(f"tip of {base}") if base == self.default_branch else base
        return _Reply(
            200,
            gh.comparison(
                self.api_url,
                self.repository,
                call.params["basehead"],
                base_sha=base_sha,
                merge_base_sha=merge_base,
                head_sha=head,
            ),
        )

    def _get_commit(self, call: _Call) -> _Reply:
        """A full SHA as itself, a branch or tag of `refs` (the default branch: its tip, as compare has it); else
        422, as GitHub answers for a name it does not know."""
        ref = call.params["ref"].removeprefix("heads/").removeprefix("tags/")
        found = self.refs.get(ref) or (gh.sha(f"tip of {ref}") if ref == self.default_branch else None)
        found = found or (ref if re.fullmatch(r"[0-9a-f]{40}", ref) else None)
        if found is None:
            return _Reply(422, {"message": f"No commit found for SHA: {ref}"})
        return _Reply(200, {**gh.commit(self.api_url, self.repository, found, []), "files": [], "stats": {}})

    def _graphql(self, recorded: RecordedRequest) -> Response:
        """GitHub's GraphQL endpoint, for the one query the action sends: who this token is."""
        query = " ".join(str((recorded.body or {}).get("query", "")).split()) if recorded.method == "POST" else ""
        if query != "query { viewer { login } }":
            self.violations.append(f"{recorded.method} /graphql: not the viewer query: {query[:200]!r}")
            return _json(200, {"errors": [{"message": "Parse error"}]})
        if self.token_user is None and self.viewer_refused:
            return _json(200, {"data": None, "errors": [{"type": "FORBIDDEN", "message": "Resource not accessible"}]})
        return _json(200, {"data": {"viewer": {"login": self.writer}}})

    def _get_run(self, call: _Call) -> _Reply:
        run = self._find(self.workflow_runs, int(call.params["run_id"]))
        return _Reply(200, self._without_pulls(run, call.query)) if run else _Reply(404, {"message": "Not Found"})

    def _list_artifacts(self, call: _Call) -> _Reply:
        run_id = int(call.params["run_id"])
        if self._find(self.workflow_runs, run_id) is None:
            return _Reply(404, {"message": "Not Found"})
        found = [
            a
            for a in self.artifacts
            if a["workflow_run"]["id"] == run_id and call.query.get("name", a["name"]) == a["name"]
        ]
        found.sort(key=lambda a: a["id"], reverse=call.query.get("direction", "desc") == "desc")
        page, headers = self._paginate(found, call)
        return _Reply(200, {"total_count": len(found), "artifacts": page}, headers)

    def _download_artifact(self, call: _Call) -> _Reply:
        artifact = self._find(self.artifacts, int(call.params["artifact_id"]))
        if artifact is None or call.params["archive_format"] != "zip":
            return _Reply(404, {"message": "Not Found"})
        if artifact["expired"]:
            return _Reply(410, {"message": "Artifact has expired"})
        signature = self._blobs[artifact["id"]][0]
        location = f"{self.blob_url}{BLOB_PREFIX}{artifact['id']}/{artifact['name']}.zip?sig={signature}"
        return _Reply(302, None, {"Location": location})

    def _list_check_runs(self, call: _Call) -> _Reply:
        q = call.query
        found = [
            run
            for run in reversed(self.check_runs)  # newest first
            if run["head_sha"] == call.params["ref"]
            and q.get("check_name", run["name"]) == run["name"]
            and q.get("status", run["status"]) == run["status"]
        ]
        if q.get("filter", "latest") == "latest":  # the newest run of each name
            found = [run for i, run in enumerate(found) if all(run["name"] != r["name"] for r in found[:i])]
        page, headers = self._paginate(found, call)
        return _Reply(200, {"total_count": len(found), "check_runs": page}, headers)

    def _create_check_run(self, call: _Call) -> _Reply:
        body = call.body
        if not re.fullmatch(r"[0-9a-f]{40}", body["head_sha"]):
            return _Reply(422, {"message": f"No commit found for SHA: {body['head_sha']}"})
        run = gh.check_run(self.api_url, self.repository, next(self._ids), body["head_sha"])
        if refused := self._apply_check_run(run, {"status": "queued", **body}):
            return refused
        self.check_runs.append(run)
        return _Reply(201, run)

    def _update_check_run(self, call: _Call) -> _Reply:
        run = self._find(self.check_runs, int(call.params["check_run_id"]))
        if run is None:
            return _Reply(404, {"message": "Not Found"})
        return self._apply_check_run(run, call.body) or _Reply(200, run)

    def _apply_check_run(self, run: dict[str, Any], body: dict[str, Any]) -> _Reply | None:
        """A create or update request's fields onto `run`; annotations are appended, as GitHub does."""
        status = "completed" if "conclusion" in body else body.get("status", run["status"])
        if status == "completed" and "conclusion" not in body and run["conclusion"] is None:
            return _Reply(422, {"message": "Invalid request.\n\nconclusion is required when status is completed."})
        annotations = body.get("output", {}).get("annotations", [])
        for key in ("name", "details_url", "external_id", "conclusion"):
            if key in body:
                run[key] = body[key]
        run["status"] = status
        run["started_at"] = body.get("started_at", run["started_at"] or self._now())
        if status == "completed":
            run["completed_at"] = body.get("completed_at", run["completed_at"] or self._now())
        output = body.get("output", {})
        run["output"].update({k: output[k] for k in ("title", "summary", "text") if k in output})
        stored = self.annotations.setdefault(run["id"], [])
        stored.extend(annotations)
        run["output"]["annotations_count"] = len(stored)
        return None

    def _list_comments(self, call: _Call) -> _Reply:
        number = int(call.params["issue_number"])
        if number not in self.pulls and number not in self.comments:
            return _Reply(404, {"message": "Not Found"})
        since = _moment(call.query.get("since"))
        found = [
            c
            for c in self.comments.get(number, [])
            if since is None or datetime.fromisoformat(c["updated_at"]) >= since
        ]
        page, headers = self._paginate(found, call)
        return _Reply(200, page, headers)

    def _create_comment(self, call: _Call) -> _Reply:
        number = int(call.params["issue_number"])
        if number not in self.pulls and number not in self.comments:
            return _Reply(404, {"message": "Not Found"})
        if len(call.body["body"]) > COMMENT_MAX_CHARS:
            return _too_long()
        comment_id = self.add_comment(issue_number=number, body=call.body["body"], user=self.writer)
        return _Reply(201, self._find(self.comments[number], comment_id))

    def _update_comment(self, call: _Call) -> _Reply:
        comment_id = int(call.params["comment_id"])
        comment = next((c for cs in self.comments.values() for c in cs if c["id"] == comment_id), None)
        if comment is None:
            return _Reply(404, {"message": "Not Found"})
        if comment["user"]["login"] != self.writer:  # a token may edit only its own comments
            return _Reply(403, {"message": "Resource not accessible by integration"})
        if len(call.body["body"]) > COMMENT_MAX_CHARS:
            return _too_long()
        comment.update(body=call.body["body"], updated_at=self._now())
        return _Reply(200, comment)

    def _list_issues(self, call: _Call) -> _Reply:
        """Issues and pull requests (GitHub lists both here; these are issues only), by state and creator."""
        q = call.query
        found = [
            i
            for i in self.issues.values()
            if q.get("state", "open") in ("all", i["state"])
            and q.get("creator", i["user"]["login"]) == i["user"]["login"]
        ]
        found.sort(key=lambda i: (i["created_at"], i["number"]), reverse=q.get("direction", "desc") == "desc")
        page, headers = self._paginate(found, call)
        return _Reply(200, page, headers)

    def _create_issue(self, call: _Call) -> _Reply:
        if len(call.body.get("body") or "") > COMMENT_MAX_CHARS:
            return _too_long()
        made = self.add_issue(title=call.body["title"], body=call.body.get("body") or "", user=self.writer)
        return _Reply(201, made)

    def _update_issue(self, call: _Call) -> _Reply:
        found = self.issues.get(int(call.params["issue_number"]))
        if found is None:
            return _Reply(404, {"message": "Not Found"})
        if found["user"]["login"] != self.writer:  # an installation token's issues_write covers any; ours is stricter
            return _Reply(403, {"message": "Resource not accessible by integration"})
        if len(call.body.get("body") or "") > COMMENT_MAX_CHARS:
            return _too_long()
        found.update({k: call.body[k] for k in ("title", "body", "state") if k in call.body}, updated_at=self._now())
        return _Reply(200, found)

    def _list_pulls(self, call: _Call) -> _Reply:
        q = call.query
        found = [
            self._with_counts(pull)
            for pull in self.pulls.values()
            if q.get("state", "open") in ("all", pull["state"])
            and q.get("head", pull["head"]["label"]) == pull["head"]["label"]
            and q.get("base", pull["base"]["ref"]) == pull["base"]["ref"]
        ]
        found.sort(key=lambda p: p["number"], reverse=q.get("direction", "desc") == "desc")
        page, headers = self._paginate(found, call)
        return _Reply(200, page, headers)

    @property
    def writer(self) -> str:
        """Whom this token writes as: the PAT's user, or the installation's bot."""
        return self.token_user or self.installation_bot

    def _authenticated_user(self, call: _Call) -> _Reply:
        if self.token_user is None:
            return _Reply(403, {"message": "Resource not accessible by integration"})
        return _Reply(200, gh.authenticated_user(self.api_url, self.token_user))

    def _pulls_of_commit(self, call: _Call) -> _Reply:
        # As GitHub answers: a commit that exists only in a fork has no pull requests here ([]); several public
        # projects learnt it from their fork pull requests (issue 25).
        found = [
            self._with_counts(p)
            for p in self.pulls.values()
            # its head commit, or, once merged, its merge commit (what a push to the default branch is)
            if call.params["commit_sha"] in (p["head"]["sha"], p["merge_commit_sha"] if p.get("merged_at") else None)
            and not p["head"]["repo"]["fork"]
        ]
        page, headers = self._paginate(found, call)
        return _Reply(200, page, headers)

    def _get_pull(self, call: _Call) -> _Reply:
        pull = self.pulls.get(int(call.params["pull_number"]))
        return _Reply(200, self._with_counts(pull)) if pull else _Reply(404, {"message": "Not Found"})

    def _git_handlers(self) -> dict[str, Callable[[_Call], _Reply]]:
        git = self.git

        def reply(answer: tuple[int, Any]) -> _Reply:
            return _Reply(*answer)

        return {
            "git/get-ref": lambda c: reply(git.get_ref(c.params["ref"])),
            "git/get-commit": lambda c: reply(git.get_commit(c.params["commit_sha"])),
            "git/get-tree": lambda c: reply(git.get_tree(c.params["tree_sha"])),
            "git/get-blob": lambda c: reply(git.get_blob(c.params["file_sha"])),
            "git/create-blob": lambda c: reply(git.create_blob(c.body)),
            "git/create-tree": lambda c: reply(git.create_tree(c.body)),
            "git/create-commit": lambda c: reply(git.create_commit(c.body)),
            "git/create-ref": lambda c: reply(git.create_ref(c.body)),
            "git/update-ref": lambda c: reply(git.update_ref(c.params["ref"], c.body)),
        }

    # -- helpers -----------------------------------------------------------------------------------------------

    def _paginate(self, items: list[Any], call: _Call) -> tuple[list[Any], dict[str, str]]:
        """GitHub's page/per_page (default 30, at most 100) and its Link header with first/prev/next/last."""
        per_page = min(max(_int(call.query.get("per_page"), 30), 1), 100)
        page = max(_int(call.query.get("page"), 1), 1)
        last = max(1, math.ceil(len(items) / per_page))
        rels = {"prev": page - 1, "first": 1} if page > 1 else {}
        rels |= {"next": page + 1, "last": last} if page < last else {}
        link = ", ".join(
            f'<{self.api_url}{call.path}?{urlencode({**call.query, "page": n})}>; rel="{rel}"'
            for rel, n in rels.items()
        )
        return items[(page - 1) * per_page : page * per_page], ({"Link": link} if link else {})

    def _without_pulls(self, run: dict[str, Any], query: dict[str, str]) -> dict[str, Any]:
        return {**run, "pull_requests": []} if query.get("exclude_pull_requests") == "true" else run

    def _with_counts(self, pull: dict[str, Any]) -> dict[str, Any]:
        return {**pull, "comments": len(self.comments.get(pull["number"], []))}

    def _now(self) -> str:
        """A clock that moves one second per event: orders are deterministic and timestamps distinct."""
        return _iso(_START + timedelta(seconds=next(self._clock)))

    @staticmethod
    def _find(items: list[dict[str, Any]], item_id: int) -> dict[str, Any] | None:
        return next((item for item in items if item["id"] == item_id), None)


def _record(request: Request) -> tuple[RecordedRequest, bool]:
    raw = request.get_data()
    body, bad = None, False
    if raw:
        try:
            body = json.loads(raw)
        except ValueError:
            bad = True
    headers = {k.lower(): v for k, v in request.headers.items()}
    recorded = RecordedRequest(request.method, request.path, request.args.to_dict(), headers, body, request.host)
    return recorded, bad


def _json(status: int, body: Any, headers: dict[str, str] | None = None) -> Response:
    return Response(json.dumps(body), status=status, headers=headers, content_type="application/json; charset=utf-8")


def _error(message: str, docs_url: str, status: int, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """GitHub's error body: message, documentation_url, and (since 2024) the status as a string."""
    return {**(extra or {}), "message": message, "documentation_url": docs_url, "status": str(status)}


def _too_long() -> _Reply:
    problem = {"resource": "IssueComment", "code": "unprocessable", "field": "data"}
    problem["message"] = f"Body is too long (maximum is {COMMENT_MAX_CHARS} characters)"
    return _Reply(422, {"message": "Validation Failed", "errors": [problem]})


def _int(value: str | None, default: int) -> int:
    """GitHub ignores a paging value it cannot read (the contract check has already reported it)."""
    return int(value) if value is not None and value.lstrip("-").isdigit() else default


def _moment(text: str | None) -> datetime | None:
    """A timestamp GitHub would read; an unreadable one is ignored (the contract check has reported it)."""
    try:
        return datetime.fromisoformat(text) if text else None
    except ValueError:
        return None


def _iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")
