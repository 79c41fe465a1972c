"""A small GitHub REST client: JSON in and out, bounded retries, and refusals that name the fix.

Why not a general SDK: the canary needs a handful of endpoints, and it needs to control exactly three things
an SDK hides — retrying (5xx, 429 and secondary rate limits, honouring Retry-After and x-ratelimit-reset,
bounded in attempts *and* total wait, so a GitHub outage costs minutes, not the job's six hours), the
message of a 403/404 (which permission to add to the workflow's `permissions:` block, instead of
"Resource not accessible by integration"), and the token, which no message, log line or exception carries.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from canary_action import __version__
from canary_action.errors import GitHubError

API_VERSION: Final = "2022-11-28"
MAX_ATTEMPTS: Final = 5
MAX_WAIT_S: Final = 120.0  # all retries of one request together: past this, GitHub is down for us
MAX_BODY_BYTES: Final = 32 * 2**20
#: Which permission an endpoint needs, by a fragment of its path (first match wins).
PERMISSIONS: Final = (
    ("/check-runs", "checks: write"),
    ("/comments", "pull-requests: write"),  # a pull request's comments: /issues/N/comments, /issues/comments/ID
    ("/issues", "issues: write"),  # a bisect's issue: /issues, /issues/N
    ("/pulls/", "pull-requests: read"),
    ("/actions/", "actions: read"),
)


@dataclass(frozen=True)
class Response:
    status: int
    headers: Mapping[str, str]
    body: Any


@dataclass
class GitHubClient:
    api_url: str
    token: str | None = field(repr=False)
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.time
    max_attempts: int = MAX_ATTEMPTS
    max_wait_s: float = MAX_WAIT_S

    def request(
        self, method: str, path: str, *, body: object = None, params: Mapping[str, str] | None = None
    ) -> Response:
        """One call, retried while GitHub says "later"; GitHubError (exit 3) when it never says yes."""
        status, headers, raw = self._call(method, path, body, params, MAX_BODY_BYTES)
        return Response(status, headers, _json(raw))

    def graphql(self, query: str) -> Any:
        """A GraphQL query's `data` (POST to graphql_url, retried like `request`); GitHubError with GitHub's first
        message and status 200 when it answers with errors instead, as GraphQL does."""
        _, _, raw = self._call(
            "POST", "/graphql", {"query": query}, None, MAX_BODY_BYTES, url=graphql_url(self.api_url)
        )
        body = _json(raw)
        errors = body.get("errors") if isinstance(body, dict) else None
        if errors or not isinstance(body, dict) or "data" not in body:
            first = errors[0] if isinstance(errors, list) and errors and isinstance(errors[0], dict) else {}
            said = " ".join(str(first.get("message") or "no data").split())[:200]
            raise _redacted(
                GitHubError(f"POST /graphql: {said}", fix="see GitHub's GraphQL API documentation", status=200),
                self.token,
            )
        return body["data"]

    def download(self, path: str, *, max_bytes: int) -> bytes:
        """A binary download (an artifact zip), retried like `request`; refused past `max_bytes`.

        GitHub answers with a redirect to a signed storage URL on another host: the token goes to GitHub
        only (an unredirected header), never to where the redirect points.
        """
        _, _, raw = self._call("GET", path, None, None, max_bytes)
        if len(raw) > max_bytes:
            raise GitHubError(
                f"GET {path}: the download is over {max_bytes / 2**20:.0f} MiB",
                fix="the artifact is not one the canary wrote (its results are a few MiB): check the upload step's "
                "`path:`",
            )
        return raw

    def _call(
        self,
        method: str,
        path: str,
        body: object,
        params: Mapping[str, str] | None,
        limit: int,
        *,
        url: str | None = None,
    ) -> tuple[int, Mapping[str, str], bytes]:
        """`url` (the GraphQL endpoint) instead of the REST API's `path`; `path` still names the call in errors."""
        url = url or self.api_url.rstrip("/") + path + ("?" + urllib.parse.urlencode(params) if params else "")
        waited, last = 0.0, ""
        for attempt in range(1, self.max_attempts + 1):
            status, headers, raw, failure = self._send(method, url, body, limit)
            if failure is None and status < 400:
                return status, headers, raw
            delay = _retry_after(status, headers, raw, attempt, self.clock())
            last = failure or f"{status} {_message(raw)}"
            if delay is None:
                raise _redacted(_refusal(method, path, status, raw), self.token)
            if attempt == self.max_attempts or waited + delay > self.max_wait_s:
                break
            self.sleep(delay)
            waited += delay
        raise _redacted(
            GitHubError(
                f"{method} {path} failed after {attempt} attempt{'s' if attempt > 1 else ''} and {waited:.0f} s of "
                f"waiting: {last}",
                fix="GitHub may be down or rate-limiting this token; the measured results are already written — rerun "
                "the job (or `canary report`) when it answers again",
            ),
            self.token,
        )

    def paginate(self, path: str, key: str, *, params: Mapping[str, str] | None = None, limit: int = 1000) -> list[Any]:
        """Every item of a list endpoint (under `key`, or the body itself when key is ""), up to `limit`."""
        items: list[Any] = []
        page = 1
        while len(items) < limit:
            body = self.request("GET", path, params={**(params or {}), "per_page": "100", "page": str(page)}).body
            batch = (body or {}).get(key, []) if key else (body or [])
            if not isinstance(batch, list):
                raise GitHubError(
                    f"GET {path}: unexpected answer (no list)", fix="a GitHub API change: please report it"
                )
            items.extend(batch)
            if len(batch) < 100:
                break
            page += 1
        return items[:limit]

    def _send(self, method: str, url: str, body: object, limit: int) -> tuple[int, dict[str, str], bytes, str | None]:
        data = None if body is None else json.dumps(body).encode()
        headers = {
            "Accept": "application/vnd.github+json",
            "X-GitHub-Api-Version": API_VERSION,
            "User-Agent": f"rlhf-canary/{__version__}",
            **({"Content-Type": "application/json"} if data is not None else {}),
        }
        request = urllib.request.Request(url, data=data, method=method, headers=headers)
        if self.token:
            request.add_unredirected_header("Authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(request, timeout=30) as reply:  # the API URL comes from the runner
                return reply.status, {k.lower(): v for k, v in reply.headers.items()}, reply.read(limit + 1), None
        except urllib.error.HTTPError as e:
            return e.code, {k.lower(): v for k, v in e.headers.items()}, e.read(MAX_BODY_BYTES), None
        except (urllib.error.URLError, TimeoutError, ConnectionError) as e:
            reason = getattr(e, "reason", e)
            return 599, {}, b"", f"cannot reach {urllib.parse.urlsplit(url).netloc}: {reason}"


def graphql_url(api_url: str) -> str:
    """GitHub's GraphQL endpoint beside its REST API: https://api.github.com/graphql; a GitHub Enterprise Server's
    /api/graphql beside /api/v3."""
    return api_url.rstrip("/").removesuffix("/v3") + "/graphql"


def _redacted(error: GitHubError, token: str | None) -> GitHubError:
    """GitHub echoes what it was sent in some messages: the token must not reach a log that way either."""
    if token and (token in error.message or token in error.fix):
        return GitHubError(
            error.message.replace(token, "***"), fix=error.fix.replace(token, "***"), status=error.status
        )
    return error


def _retry_after(status: int, headers: Mapping[str, str], raw: bytes, attempt: int, now: float) -> float | None:
    """Seconds to wait before trying again, or None when retrying cannot help."""
    rate_limited = status == 429 or (
        status == 403 and (headers.get("x-ratelimit-remaining") == "0" or "rate limit" in _message(raw).lower())
    )
    if not rate_limited and status < 500:
        return None
    if "retry-after" in headers and headers["retry-after"].strip().isdigit():
        return float(headers["retry-after"])
    reset = headers.get("x-ratelimit-reset", "")
    if rate_limited and reset.isdigit():
        return max(1.0, float(reset) - now)
    return 60.0 if rate_limited else float(2 ** (attempt - 1))  # GitHub: wait a minute on a secondary limit


def _refusal(method: str, path: str, status: int, raw: bytes) -> GitHubError:
    message = _message(raw)
    if status == 401:
        return GitHubError(
            f"{method} {path}: 401 {message}",
            fix="the token is missing, expired or wrong: pass `github-token: ${{ github.token }}` (the default; for "
            "`canary gh-report`, the step's `env: GITHUB_TOKEN: ${{ github.token }}`)",
            status=status,
        )
    needed = next((perm for fragment, perm in PERMISSIONS if fragment in path), None)
    if status in (403, 404) and needed:
        return GitHubError(
            f"{method} {path}: {status} {message} — the token lacks `{needed}`",
            fix=f"add `{needed}` to the job's `permissions:` block (on a pull request from a fork the token is "
            "read-only: publish from a workflow_run job instead, see docs/examples)",
            status=status,
        )
    return GitHubError(
        f"{method} {path}: {status} {message}",
        fix="see the GitHub REST API documentation for this status",
        status=status,
    )


def _message(raw: bytes) -> str:
    try:
        body = json.loads(raw)
    except ValueError:
        return raw[:200].decode("utf-8", "replace")
    text = body.get("message", "") if isinstance(body, dict) else ""
    return " ".join(str(text).split())[:200]


def _json(raw: bytes) -> Any:
    return json.loads(raw) if raw.strip() else None
