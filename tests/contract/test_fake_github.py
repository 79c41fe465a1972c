"""The contract checker catches what GitHub would refuse, and the fake GitHub behaves as GitHub's REST docs say.

Both are test infrastructure other tests lean on: a checker that lets a bad annotation through, or a fake that
paginates differently from GitHub, would make every test built on them pass for the wrong reason.
"""

from __future__ import annotations

import io
import json
import re
import urllib.error
import urllib.request
import zipfile
from typing import Any
from urllib.parse import urlencode, urlsplit

import pytest

from canary_action.errors import GitHubError
from canary_action.github.client import GitHubClient
from tests.contract.fake_github import FakeGitHub, make_zip
from tests.contract.github_objects import sha
from tests.contract.openapi import OpenApiSpec, json_schema

TOKEN = "ghs_faketoken"  # FakeGitHub's default
REPO = "/repos/Codertocat/Hello-World"
SHA = sha("head")
ANNOTATION = {"path": "README.md", "start_line": 1, "end_line": 1, "annotation_level": "warning", "message": "slow"}


@pytest.fixture(scope="module")
def spec() -> OpenApiSpec:
    return OpenApiSpec.load()


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None  # hand the 302 back to the test instead of following it


def send(
    fake: FakeGitHub,
    method: str,
    path: str,
    *,
    body: Any = None,
    query: dict[str, str] | None = None,
    authorization: str | None = f"Bearer {TOKEN}",
) -> tuple[int, dict[str, str], Any]:
    """One raw request, redirects not followed: (status, lower-case headers, JSON body or raw bytes)."""
    url = fake.api_url + path + ("?" + urlencode(query) if query else "")
    headers = {"Accept": "application/vnd.github+json", **({"Authorization": authorization} if authorization else {})}
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.build_opener(_NoRedirect).open(request) as reply:
            status, reply_headers, raw = reply.status, dict(reply.headers.items()), reply.read()
    except urllib.error.HTTPError as e:
        with e:
            status, reply_headers, raw = e.code, dict(e.headers.items()), e.read()
    parsed = json.loads(raw) if raw and "json" in reply_headers.get("Content-Type", "") else raw
    return status, {k.lower(): v for k, v in reply_headers.items()}, parsed


def links(headers: dict[str, str]) -> dict[str, str]:
    """A Link header as {rel: url}."""
    found = (re.fullmatch(r'<([^>]*)>; rel="(\w+)"', part.strip()) for part in headers.get("link", "").split(","))
    return {m[2]: m[1] for m in found if m}


# -- the contract checker --------------------------------------------------------------------------------------


def test_an_unknown_endpoint_is_a_violation(spec: OpenApiSpec) -> None:
    [violation] = spec.check_request("GET", f"{REPO}/git/tags")
    assert violation.startswith(f"GET {REPO}/git/tags: no operation of the vendored GitHub description matches")
    [violation] = spec.check_request("DELETE", f"{REPO}/issues/comments/5")
    assert "has no DELETE operation (only PATCH)" in violation


def test_an_invalid_annotation_is_named_by_its_path_in_the_body(spec: OpenApiSpec) -> None:
    bad_level = {**ANNOTATION, "annotation_level": "error"}
    no_level = {k: v for k, v in ANNOTATION.items() if k != "annotation_level"}
    body = {"output": {"title": "t", "summary": "s", "annotations": [bad_level, no_level]}}
    assert spec.check_request("PATCH", f"{REPO}/check-runs/1", body=body) == [
        f"PATCH {REPO}/check-runs/1: body.output.annotations[0].annotation_level: 'error' is not one of "
        "['notice', 'warning', 'failure']",
        f"PATCH {REPO}/check-runs/1: body.output.annotations[1]: 'annotation_level' is a required property",
    ]


def test_an_undeclared_query_parameter_is_a_violation(spec: OpenApiSpec) -> None:
    [violation] = spec.check_request("GET", f"{REPO}/issues/2/comments", query={"per_page": "100", "sort": "created"})
    assert violation == (
        f"GET {REPO}/issues/2/comments: query.sort: not a parameter of issues/list-comments "
        "(it takes: page, per_page, since)"
    )


def test_an_invalid_enum_value_is_a_violation(spec: OpenApiSpec) -> None:
    [violation] = spec.check_request("GET", f"{REPO}/pulls", query={"state": "opened"})
    assert violation == f"GET {REPO}/pulls: query.state: 'opened' is not one of ['open', 'closed', 'all']"


def test_query_and_path_values_are_read_as_github_reads_them(spec: OpenApiSpec) -> None:
    runs = f"{REPO}/actions/workflows/canary.yml/runs"
    assert spec.check_request("GET", runs, query={"per_page": "100", "exclude_pull_requests": "true"}) == []
    assert spec.check_request("GET", f"{REPO}/actions/workflows/161335/runs") == []  # oneOf integer | string
    assert spec.check_request("GET", runs, query={"per_page": "many"}) == [
        f"GET {runs}: query.per_page: 'many' is not of type 'integer'"
    ]
    assert spec.check_request("GET", f"{REPO}/pulls/two") == [
        f"GET {REPO}/pulls/two: path.pull_number: 'two' is not of type 'integer'"
    ]
    assert spec.check_request("GET", f"{REPO}/commits/heads/main/check-runs") == []  # ref spans segments


@pytest.mark.parametrize(
    ("method", "path", "query", "body"),
    [
        ("GET", REPO, None, None),
        ("GET", f"{REPO}/actions/workflows/canary.yml/runs", {"branch": "master", "status": "success"}, None),
        ("GET", f"{REPO}/actions/runs/5/artifacts", {"name": "rlhf-canary-tiny-dpo", "per_page": "100"}, None),
        ("GET", f"{REPO}/actions/artifacts/7/zip", None, None),
        ("GET", f"{REPO}/commits/{SHA}/check-runs", {"check_name": "rlhf-canary", "filter": "latest"}, None),
        ("POST", f"{REPO}/check-runs", None, {"name": "rlhf-canary", "head_sha": SHA, "status": "in_progress"}),
        ("PATCH", f"{REPO}/check-runs/3", None, {"conclusion": "failure", "output": {"title": "t", "summary": "s"}}),
        ("POST", f"{REPO}/issues/2/comments", None, {"body": "hello"}),
        ("PATCH", f"{REPO}/issues/comments/9", None, {"body": "edited"}),
        ("GET", f"{REPO}/pulls", {"state": "open", "head": "octo-fork:changes"}, None),
    ],
)
def test_correct_requests_have_no_violations(
    spec: OpenApiSpec, method: str, path: str, query: dict[str, str] | None, body: Any
) -> None:
    assert spec.check_request(method, path, query, body) == []


def test_a_missing_or_unexpected_body_is_a_violation(spec: OpenApiSpec) -> None:
    assert spec.check_request("POST", f"{REPO}/issues/2/comments") == [
        f"POST {REPO}/issues/2/comments: body: required, not sent"
    ]
    assert spec.check_request("PATCH", f"{REPO}/check-runs/3", body={"status": "completed"}) == [
        f"PATCH {REPO}/check-runs/3: body: 'conclusion' is a required property"
    ]
    assert spec.check_request("GET", REPO, body={"x": 1}) == [f"GET {REPO}: body: repos/get takes no request body"]


def test_responses_are_held_to_the_schema_nulls_and_refs_included(spec: OpenApiSpec) -> None:
    [violation, *_] = spec.check_response("GET", f"{REPO}/actions/runs/5", 200, {"id": 5})
    assert violation == f"GET {REPO}/actions/runs/5 -> 200: response: 'node_id' is a required property"
    artifact = {"id": 1, "node_id": "n", "name": "a", "size_in_bytes": 1, "url": "u", "archive_download_url": "u"}
    artifact |= {"expired": False, "created_at": None, "expires_at": None, "updated_at": None, "workflow_run": None}
    assert (
        spec.check_response("GET", f"{REPO}/actions/runs/5/artifacts", 200, {"total_count": 1, "artifacts": [artifact]})
        == []
    )
    artifact["created_at"] = "2026-11-01 00:00"
    [violation] = spec.check_response(
        "GET", f"{REPO}/actions/runs/5/artifacts", 200, {"total_count": 1, "artifacts": [artifact]}
    )
    assert violation.endswith("response.artifacts[0].created_at: '2026-11-01 00:00' is not a 'date-time'")
    assert spec.check_response("GET", REPO, 201, {}) == [
        f"GET {REPO} -> 201: not a documented status of repos/get (200, 301, 403, 404)"
    ]


def test_required_query_parameters_and_bounds_are_checked() -> None:
    per_page = {"name": "per_page", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 100}}
    needed = {"name": "q", "in": "query", "required": True, "schema": {"type": "string"}}
    operation = {"operationId": "search", "parameters": [per_page, needed], "responses": {"200": {}}}
    spec = OpenApiSpec({"openapi": "3.0.3", "paths": {"/search": {"get": operation}}})
    assert spec.check_request("GET", "/search", {"q": "x", "per_page": "100"}) == []
    assert spec.check_request("GET", "/search", {"per_page": "101"}) == [
        "GET /search: query.per_page: 101 is greater than the maximum of 100",
        "GET /search: query.q: required, not sent",
    ]


def test_openapi_3_0_keywords_become_json_schema() -> None:
    assert json_schema({"type": "string", "enum": ["a"], "nullable": True, "example": "a"}) == {
        "type": ["string", "null"],
        "enum": ["a", None],
    }
    assert json_schema({"nullable": True, "allOf": [{"$ref": "#/x"}]}) == {
        "anyOf": [{"type": "null"}, {"allOf": [{"$ref": "#/x"}]}]
    }
    assert json_schema({"type": "integer", "minimum": 1, "exclusiveMinimum": True}) == {
        "type": "integer",
        "exclusiveMinimum": 1,
    }
    named_like_keywords = {"type": "object", "properties": {"example": {"type": "string", "x-github": {}}}}
    assert json_schema(named_like_keywords) == {"type": "object", "properties": {"example": {"type": "string"}}}


# -- the fake GitHub -----------------------------------------------------------------------------------------


def test_a_whole_publish_round_stays_within_the_contract(fake_github: FakeGitHub) -> None:
    fake = fake_github
    client = GitHubClient(fake.api_url, TOKEN)
    run_id = fake.add_workflow_run(head_sha=sha("base"))
    fake.add_artifact(run_id, name="rlhf-canary-tiny-dpo", content=make_zip({"metrics.json": b"{}"}))
    fake.add_pull(number=2, head_sha=SHA)
    assert client.request("GET", REPO).body["default_branch"] == "master"
    runs = client.request("GET", f"{REPO}/actions/workflows/canary.yml/runs", params={"branch": "master"}).body
    assert client.request("GET", f"{REPO}/actions/runs/{run_id}").body["head_sha"] == sha("base")
    [artifact] = client.request("GET", f"{REPO}/actions/runs/{runs['workflow_runs'][0]['id']}/artifacts").body[
        "artifacts"
    ]
    assert artifact["name"] == "rlhf-canary-tiny-dpo"
    created = client.request(
        "POST", f"{REPO}/check-runs", body={"name": "rlhf-canary", "head_sha": SHA, "status": "in_progress"}
    ).body
    for _ in range(2):
        output = {"title": "Regression", "summary": "slower", "annotations": [ANNOTATION]}
        client.request("PATCH", f"{REPO}/check-runs/{created['id']}", body={"conclusion": "failure", "output": output})
    [listed] = client.request("GET", f"{REPO}/commits/{SHA}/check-runs", params={"check_name": "rlhf-canary"}).body[
        "check_runs"
    ]
    assert (listed["status"], listed["conclusion"], listed["output"]["annotations_count"]) == (
        "completed",
        "failure",
        2,
    )
    assert listed["html_url"] == f"https://github.com/Codertocat/Hello-World/runs/{created['id']}"
    assert fake.annotations[created["id"]] == [ANNOTATION, ANNOTATION]  # appended across PATCHes
    assert client.request("GET", f"{REPO}/issues/2/comments", params={"since": "2026-11-01T00:00:00Z"}).body == []
    comment = client.request("POST", f"{REPO}/issues/2/comments", body={"body": "<!-- canary -->"}).body
    assert comment["user"] == {**comment["user"], "login": "github-actions[bot]", "type": "Bot"}
    assert comment["html_url"].endswith(f"/Codertocat/Hello-World/pull/2#issuecomment-{comment['id']}")
    client.request("PATCH", f"{REPO}/issues/comments/{comment['id']}", body={"body": "<!-- canary --> v2"})
    assert [c["body"] for c in fake.comments[2]] == ["<!-- canary --> v2"]
    assert fake.requests[0].headers["authorization"] == f"Bearer {TOKEN}"


def test_a_missing_or_wrong_token_is_401_and_both_schemes_work(fake_github: FakeGitHub) -> None:
    assert send(fake_github, "GET", REPO, authorization=None)[0] == 401
    status, _, body = send(fake_github, "GET", REPO, authorization="Bearer ghs_wrong")
    assert (status, body["message"]) == (401, "Bad credentials")
    assert send(fake_github, "GET", REPO, authorization=f"token {TOKEN}")[0] == 200
    with pytest.raises(GitHubError, match="401 Bad credentials"):
        GitHubClient(fake_github.api_url, "ghs_wrong").request("GET", REPO)


def test_a_read_only_token_is_refused_every_write(fake_github: FakeGitHub) -> None:
    fake_github.add_pull(number=2)
    fake_github.read_only = True
    for method, path, body in [
        ("POST", f"{REPO}/check-runs", {"name": "rlhf-canary", "head_sha": SHA}),
        ("POST", f"{REPO}/issues/2/comments", {"body": "hi"}),
    ]:
        status, _, reply = send(fake_github, method, path, body=body)
        assert (status, reply["message"]) == (403, "Resource not accessible by integration")
        assert reply["documentation_url"].startswith("https://docs.github.com/rest/")
    assert send(fake_github, "GET", f"{REPO}/pulls/2")[0] == 200
    assert (fake_github.check_runs, fake_github.comments) == ([], {})


def test_someone_elses_comment_cannot_be_edited(fake_github: FakeGitHub) -> None:
    theirs = fake_github.add_comment(issue_number=2, body="LGTM", user="octocat")
    status, _, reply = send(fake_github, "PATCH", f"{REPO}/issues/comments/{theirs}", body={"body": "hijacked"})
    assert (status, reply["message"]) == (403, "Resource not accessible by integration")
    assert send(fake_github, "PATCH", f"{REPO}/issues/comments/999", body={"body": "x"})[0] == 404


def test_comments_paginate_oldest_first_with_link_headers(fake_github: FakeGitHub) -> None:
    fake_github.add_pull(number=2)
    ids = [fake_github.add_comment(issue_number=2, body=f"c{i}") for i in range(5)]
    status, headers, first = send(fake_github, "GET", f"{REPO}/issues/2/comments", query={"per_page": "2"})
    assert (status, [c["id"] for c in first]) == (200, ids[:2])
    assert links(headers) == {
        "next": f"{fake_github.api_url}{REPO}/issues/2/comments?per_page=2&page=2",
        "last": f"{fake_github.api_url}{REPO}/issues/2/comments?per_page=2&page=3",
    }
    seen, url = [], f"{fake_github.api_url}{REPO}/issues/2/comments?per_page=2"
    while url:  # follow rel="next" the way a client must
        path = urlsplit(url)
        status, headers, page = send(fake_github, "GET", path.path + "?" + path.query)
        seen += [c["id"] for c in page]
        url = links(headers).get("next", "")
    assert seen == ids
    assert set(links(headers)) == {"prev", "first"}
    assert send(fake_github, "GET", f"{REPO}/issues/3/comments")[0] == 404


def test_workflow_runs_are_filtered_newest_first(fake_github: FakeGitHub) -> None:
    fake = fake_github
    old = fake.add_workflow_run(created_at="2026-10-01T00:00:00Z")
    new = fake.add_workflow_run(created_at="2026-10-02T00:00:00Z")
    fake.add_workflow_run(conclusion="failure")
    fake.add_workflow_run(branch="changes", event="pull_request")
    fake.add_workflow_run(workflow_file="other.yml")
    runs = f"{REPO}/actions/workflows/canary.yml/runs"
    query = {"branch": "master", "event": "push", "status": "success", "exclude_pull_requests": "true"}
    _, _, body = send(fake, "GET", runs, query=query)
    assert (body["total_count"], [r["id"] for r in body["workflow_runs"]]) == (2, [new, old])
    assert body["workflow_runs"][0]["path"] == ".github/workflows/canary.yml"
    workflow_id = body["workflow_runs"][0]["workflow_id"]
    _, _, by_id = send(fake, "GET", f"{REPO}/actions/workflows/{workflow_id}/runs", query={"status": "completed"})
    assert by_id["total_count"] == 4
    _, headers, paged = send(fake, "GET", runs, query={"per_page": "1", "page": "2"})
    assert len(paged["workflow_runs"]) == 1
    assert 'rel="last"' in headers["link"]
    assert send(fake, "GET", f"{REPO}/actions/workflows/missing.yml/runs")[0] == 404
    assert send(fake, "GET", "/repos/someone/else/actions/workflows/canary.yml/runs")[0] == 404


def test_an_artifact_download_redirects_to_another_host_that_needs_no_token(fake_github: FakeGitHub) -> None:
    content = make_zip({"metrics.json": b'{"ok": true}'})
    artifact_id = fake_github.add_artifact(fake_github.add_workflow_run(), name="rlhf-canary-tiny-dpo", content=content)
    _, _, listed = send(fake_github, "GET", f"{REPO}/actions/runs/{fake_github.workflow_runs[0]['id']}/artifacts")
    assert listed["artifacts"][0]["archive_download_url"].endswith(f"/actions/artifacts/{artifact_id}/zip")
    status, headers, _ = send(fake_github, "GET", f"{REPO}/actions/artifacts/{artifact_id}/zip")
    location = urlsplit(headers["location"])
    assert status == 302
    assert location.hostname != urlsplit(fake_github.api_url).hostname
    assert location.port == urlsplit(fake_github.api_url).port
    with urllib.request.urlopen(headers["location"]) as blob:  # no Authorization: none needed
        assert (blob.status, blob.headers["Content-Type"], blob.read()) == (200, "application/zip", content)
    [fetched] = fake_github.blob_requests
    assert "authorization" not in fetched.headers
    assert fetched.host == location.netloc


def test_a_client_that_follows_the_redirect_with_its_token_is_caught(fake_github: FakeGitHub) -> None:
    content = make_zip({"metrics.json": b"{}"})
    artifact_id = fake_github.add_artifact(fake_github.add_workflow_run(), name="a", content=content)
    url = f"{fake_github.api_url}{REPO}/actions/artifacts/{artifact_id}/zip"
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(request) as reply:  # urllib forwards headers across hosts on redirect
        assert reply.read() == content
    assert fake_github.blob_requests[0].headers.get("authorization") == f"Bearer {TOKEN}"


def test_an_expired_artifact_is_gone(fake_github: FakeGitHub) -> None:
    artifact_id = fake_github.add_artifact(fake_github.add_workflow_run(), name="a", content=b"PK", expired=True)
    status, _, body = send(fake_github, "GET", f"{REPO}/actions/artifacts/{artifact_id}/zip")
    assert (status, body["message"]) == (410, "Artifact has expired")
    assert fake_github.blob_requests == []


def test_more_than_50_annotations_in_one_request_is_422_and_a_violation(fake_github: FakeGitHub) -> None:
    output = {"title": "t", "summary": "s", "annotations": [ANNOTATION] * 51}
    status, _, _ = send(
        fake_github, "POST", f"{REPO}/check-runs", body={"name": "c", "head_sha": SHA, "output": output}
    )
    assert status == 422
    assert fake_github.check_runs == []
    [violation] = fake_github.violations
    assert violation == f"POST {REPO}/check-runs: body.output.annotations: [51 items] is too long"
    fake_github.violations.clear()


def test_check_runs_need_a_conclusion_to_complete_and_list_the_latest_per_name(fake_github: FakeGitHub) -> None:
    run = {"name": "rlhf-canary", "head_sha": SHA}
    assert send(fake_github, "POST", f"{REPO}/check-runs", body={**run, "status": "completed"})[0] == 422
    assert send(fake_github, "POST", f"{REPO}/check-runs", body={**run, "head_sha": "merge"})[0] == 422
    first = send(fake_github, "POST", f"{REPO}/check-runs", body=run)[2]
    second = send(fake_github, "POST", f"{REPO}/check-runs", body={**run, "conclusion": "success"})[2]
    assert (first["status"], second["status"]) == ("queued", "completed")
    _, _, latest = send(fake_github, "GET", f"{REPO}/commits/{SHA}/check-runs")
    assert [r["id"] for r in latest["check_runs"]] == [second["id"]]
    _, _, every = send(fake_github, "GET", f"{REPO}/commits/{SHA}/check-runs", query={"filter": "all"})
    assert every["total_count"] == 2


def test_a_comment_over_githubs_limit_is_422(fake_github: FakeGitHub) -> None:
    fake_github.add_pull(number=2)
    status, _, body = send(fake_github, "POST", f"{REPO}/issues/2/comments", body={"body": "x" * 65537})
    assert (status, body["errors"][0]["message"]) == (422, "Body is too long (maximum is 65536 characters)")
    assert send(fake_github, "POST", f"{REPO}/issues/2/comments", body={"body": "x" * 65536})[0] == 201


def test_pulls_are_found_by_number_and_by_head(fake_github: FakeGitHub) -> None:
    fake_github.add_pull(number=2, head_repo="octo-fork/Hello-World", head_sha=SHA)
    fake_github.add_pull(number=3, state="closed")
    _, _, pull = send(fake_github, "GET", f"{REPO}/pulls/2")
    assert (pull["head"]["sha"], pull["head"]["repo"]["fork"], pull["head"]["label"]) == (
        SHA,
        True,
        "octo-fork:changes",
    )
    assert [p["number"] for p in send(fake_github, "GET", f"{REPO}/pulls", query={"head": "octo-fork:changes"})[2]] == [
        2
    ]
    assert [p["number"] for p in send(fake_github, "GET", f"{REPO}/pulls", query={"state": "all"})[2]] == [3, 2]
    assert send(fake_github, "GET", f"{REPO}/pulls/4")[0] == 404


def test_an_unknown_endpoint_is_404_and_a_violation(fake_github: FakeGitHub) -> None:
    assert send(fake_github, "GET", f"{REPO}/git/tags")[0] == 404
    [violation] = fake_github.violations
    assert violation.startswith(f"GET {REPO}/git/tags: no operation")
    fake_github.violations.clear()


def test_queued_failures_exercise_the_clients_retries(fake_github: FakeGitHub) -> None:
    fake_github.add_pull(number=2)
    fake_github.fail_next(path_contains="/pulls/", status=429, headers={"Retry-After": "3"})
    fake_github.fail_next(method="GET", path_contains="/pulls/", status=502, times=2)
    reset = {"x-ratelimit-remaining": "0", "x-ratelimit-reset": "1030"}
    fake_github.fail_next(
        path_contains="/pulls/", status=403, headers=reset, body={"message": "API rate limit exceeded"}
    )
    waits: list[float] = []
    client = GitHubClient(fake_github.api_url, TOKEN, sleep=waits.append, clock=lambda: 1000.0)
    assert client.request("GET", f"{REPO}/pulls/2").body["number"] == 2
    assert waits == [3.0, 2.0, 4.0, 30.0]  # Retry-After, backoff, backoff, until x-ratelimit-reset
    assert len(fake_github.requests) == 5
    fake_github.fail_next(status=500, times=10)
    with pytest.raises(GitHubError, match="failed after 5 attempts"):
        client.request("GET", REPO)


def test_make_zip_writes_hostile_names_as_given() -> None:
    with zipfile.ZipFile(io.BytesIO(make_zip({"../evil": b"x", "ok/metrics.json": b"{}"}))) as archive:
        assert archive.namelist() == ["../evil", "ok/metrics.json"]
