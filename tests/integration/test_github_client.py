"""The REST client against a local HTTP server: retries, waits, permission messages, and a token that never leaks."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

from canary_action.errors import GitHubError
from canary_action.github.client import GitHubClient

TOKEN = "ghs_SECRETtoken0123456789"


def client(server: HTTPServer, waits: list[float], **kwargs: Any) -> GitHubClient:
    return GitHubClient(server.url_for("/"), TOKEN, sleep=waits.append, clock=lambda: 1_000.0, **kwargs)


def test_a_call_sends_the_api_headers_and_returns_json(httpserver: HTTPServer) -> None:
    seen: list[Request] = []

    def handler(request: Request) -> Response:
        seen.append(request)
        return Response(json.dumps({"id": 7}), status=201, content_type="application/json")

    httpserver.expect_request("/repos/o/r/check-runs", method="POST").respond_with_handler(handler)
    reply = client(httpserver, []).request("POST", "/repos/o/r/check-runs", body={"name": "rlhf-canary"})
    assert (reply.status, reply.body) == (201, {"id": 7})
    headers = seen[0].headers
    assert headers["Authorization"] == f"Bearer {TOKEN}"
    assert headers["X-GitHub-Api-Version"] == "2022-11-28"
    assert headers["Accept"] == "application/vnd.github+json"
    assert headers["User-Agent"].startswith("rlhf-canary/")
    assert json.loads(seen[0].data) == {"name": "rlhf-canary"}


def test_a_500_then_success_recovers_with_backoff(httpserver: HTTPServer) -> None:
    httpserver.expect_ordered_request("/x").respond_with_data("oops", status=502)
    httpserver.expect_ordered_request("/x").respond_with_data("oops", status=500)
    httpserver.expect_ordered_request("/x").respond_with_json({"ok": True})
    waits: list[float] = []
    assert client(httpserver, waits).request("GET", "/x").body == {"ok": True}
    assert waits == [1.0, 2.0]


def test_a_rate_limit_waits_as_long_as_github_says(httpserver: HTTPServer) -> None:
    httpserver.expect_ordered_request("/x").respond_with_json(
        {"message": "slow down"}, status=429, headers={"Retry-After": "7"}
    )
    secondary = {"message": "You have exceeded a secondary rate limit. Please wait a few minutes."}
    httpserver.expect_ordered_request("/x").respond_with_json(secondary, status=403)
    reset = {"x-ratelimit-remaining": "0", "x-ratelimit-reset": "1030"}
    httpserver.expect_ordered_request("/x").respond_with_json(
        {"message": "API rate limit exceeded"}, status=403, headers=reset
    )
    httpserver.expect_ordered_request("/x").respond_with_json({"ok": True})
    waits: list[float] = []
    assert client(httpserver, waits, max_wait_s=200).request("GET", "/x").body == {"ok": True}
    assert waits == [7.0, 60.0, 30.0]


def test_retries_are_bounded_in_attempts_and_in_time(httpserver: HTTPServer) -> None:
    httpserver.expect_request("/x").respond_with_data("down", status=503)
    waits: list[float] = []
    with pytest.raises(GitHubError, match="failed after 5 attempts") as caught:
        client(httpserver, waits).request("GET", "/x")
    assert waits == [1.0, 2.0, 4.0, 8.0]
    assert "measured results are already written" in caught.value.fix
    httpserver.clear()
    httpserver.expect_request("/y").respond_with_json({}, status=429, headers={"Retry-After": "100"})
    waits.clear()
    with pytest.raises(GitHubError, match="failed after 2 attempts"):
        client(httpserver, waits, max_wait_s=150).request("GET", "/y")
    assert waits == [100.0]


@pytest.mark.parametrize(
    ("method", "path", "status", "permission"),
    [
        ("POST", "/repos/o/r/check-runs", 403, "checks: write"),
        ("PATCH", "/repos/o/r/issues/comments/9", 403, "pull-requests: write"),
        ("POST", "/repos/o/r/issues/3/comments", 403, "pull-requests: write"),
        ("GET", "/repos/o/r/actions/artifacts", 404, "actions: read"),
    ],
)
def test_a_missing_permission_is_named(
    httpserver: HTTPServer, method: str, path: str, status: int, permission: str
) -> None:
    httpserver.expect_request(path, method=method).respond_with_json(
        {"message": "Resource not accessible by integration"}, status=status
    )
    with pytest.raises(GitHubError) as caught:
        client(httpserver, []).request(method, path)
    text = caught.value.render()
    assert f"the token lacks `{permission}`" in text
    assert f"add `{permission}` to the job's `permissions:` block" in text
    assert "Resource not accessible by integration" in text


def test_a_bad_token_says_so_and_is_never_shown(httpserver: HTTPServer) -> None:
    httpserver.expect_request("/user").respond_with_json({"message": f"Bad credentials {TOKEN}"}, status=401)
    gh = client(httpserver, [])
    with pytest.raises(GitHubError, match="401") as caught:
        gh.request("GET", "/user")
    assert "github-token" in caught.value.fix
    assert TOKEN not in caught.value.render()
    assert TOKEN not in repr(gh)


def test_an_unreachable_github_is_an_infrastructure_error() -> None:
    waits: list[float] = []
    gh = GitHubClient("http://127.0.0.1:9", TOKEN, sleep=waits.append, max_attempts=2)
    with pytest.raises(GitHubError, match=r"cannot reach 127\.0\.0\.1:9"):
        gh.request("GET", "/x")
    assert waits == [1.0]
