"""GitHub REST objects in full, shaped as api.github.com sends them, for the fake GitHub to serve.

Full rather than minimal: the fake's every response is checked against GitHub's OpenAPI description, whose
schemas require dozens of fields (a repository ~70), so a client tested here meets the real shapes, nulls
included. Values follow GitHub's own documentation examples (Codertocat/Hello-World, the github-actions app).
A repository is sent in full wherever GitHub sends a "minimal" one: a superset validates, and nothing we do
depends on the difference.
"""

from __future__ import annotations

import base64
import hashlib
import zlib
from typing import Any, Final

WEB: Final = "https://github.com"
BOT_LOGIN: Final = "github-actions[bot]"
BOT_ID: Final = 41898282
_KNOWN_IDS: Final = {"Codertocat": 21031067, BOT_LOGIN: BOT_ID, "github": 9919}
_REPO_URLS: Final = {  # every *_url field of a repository: its suffix after /repos/{owner}/{repo}
    "archive_url": "/{archive_format}{/ref}",
    "assignees_url": "/assignees{/user}",
    "blobs_url": "/git/blobs{/sha}",
    "branches_url": "/branches{/branch}",
    "collaborators_url": "/collaborators{/collaborator}",
    "comments_url": "/comments{/number}",
    "commits_url": "/commits{/sha}",
    "compare_url": "/compare/{base}...{head}",
    "contents_url": "/contents/{+path}",
    "contributors_url": "/contributors",
    "deployments_url": "/deployments",
    "downloads_url": "/downloads",
    "events_url": "/events",
    "forks_url": "/forks",
    "git_commits_url": "/git/commits{/sha}",
    "git_refs_url": "/git/refs{/sha}",
    "git_tags_url": "/git/tags{/sha}",
    "hooks_url": "/hooks",
    "issue_comment_url": "/issues/comments{/number}",
    "issue_events_url": "/issues/events{/number}",
    "issues_url": "/issues{/number}",
    "keys_url": "/keys{/key_id}",
    "labels_url": "/labels{/name}",
    "languages_url": "/languages",
    "merges_url": "/merges",
    "milestones_url": "/milestones{/number}",
    "notifications_url": "/notifications{?since,all,participating}",
    "pulls_url": "/pulls{/number}",
    "releases_url": "/releases{/id}",
    "stargazers_url": "/stargazers",
    "statuses_url": "/statuses/{sha}",
    "subscribers_url": "/subscribers",
    "subscription_url": "/subscription",
    "tags_url": "/tags",
    "teams_url": "/teams",
    "trees_url": "/git/trees{/sha}",
}


def sha(seed: str) -> str:
    """A stable 40-hex commit SHA for a seed, so tests need not invent them."""
    return hashlib.sha1(seed.encode()).hexdigest()  # an identifier, not a security measure


def node_id(kind: str, number: int) -> str:
    return base64.b64encode(f"0{len(kind)}:{kind}{number}".encode()).decode()


def user_id(login: str) -> int:
    return _KNOWN_IDS.get(login, zlib.crc32(login.encode()) % 10**8 + 1)


def user(api: str, login: str, user_type: str = "User") -> dict[str, Any]:
    uid = user_id(login)
    url = f"{api}/users/{login}"
    return {
        "login": login,
        "id": uid,
        "node_id": node_id(user_type, uid),
        "avatar_url": f"https://avatars.githubusercontent.com/u/{uid}?v=4",
        "gravatar_id": "",
        "url": url,
        "html_url": f"{WEB}/apps/{login.removesuffix('[bot]')}" if user_type == "Bot" else f"{WEB}/{login}",
        "followers_url": f"{url}/followers",
        "following_url": f"{url}/following{{/other_user}}",
        "gists_url": f"{url}/gists{{/gist_id}}",
        "starred_url": f"{url}/starred{{/owner}}{{/repo}}",
        "subscriptions_url": f"{url}/subscriptions",
        "organizations_url": f"{url}/orgs",
        "repos_url": f"{url}/repos",
        "events_url": f"{url}/events{{/privacy}}",
        "received_events_url": f"{url}/received_events",
        "type": user_type,
        "user_view_type": "public",
        "site_admin": False,
    }


def authenticated_user(api: str, login: str) -> dict[str, Any]:
    """GET /user for a personal access token's owner (the public shape)."""
    created = "2020-01-01T00:00:00Z"
    profile = {"name": login, "company": None, "blog": "", "location": None, "email": None, "hireable": None}
    counts = {"bio": None, "public_repos": 1, "public_gists": 0, "followers": 0, "following": 0}
    return {**user(api, login), **profile, **counts, "created_at": created, "updated_at": created}


def actions_app(api: str) -> dict[str, Any]:
    """The GitHub App behind GITHUB_TOKEN: the author of the action's check runs and comments."""
    return {
        "id": 15368,
        "slug": "github-actions",
        "node_id": "MDM6QXBwMTUzNjg=",
        "client_id": "Iv1.05c79e9ad1f6bdfa",
        "owner": user(api, "github", "Organization"),
        "name": "GitHub Actions",
        "description": "Automate your workflow from idea to production",
        "external_url": "https://help.github.com/en/actions",
        "html_url": f"{WEB}/apps/github-actions",
        "created_at": "2018-07-30T09:30:17Z",
        "updated_at": "2024-04-10T20:33:16Z",
        "permissions": {"actions": "write", "checks": "write", "issues": "write", "metadata": "read"},
        "events": ["check_run", "check_suite", "pull_request", "push", "workflow_dispatch"],
    }


def repository(api: str, full_name: str, default_branch: str, *, fork: bool = False) -> dict[str, Any]:
    owner, name = full_name.split("/")
    repo_id = 1296269 if full_name == "Codertocat/Hello-World" else zlib.crc32(full_name.encode()) % 10**8 + 1
    base = f"{api}/repos/{full_name}"
    return {
        "id": repo_id,
        "node_id": node_id("Repository", repo_id),
        "name": name,
        "full_name": full_name,
        "owner": user(api, owner),
        "private": False,
        "visibility": "public",
        "html_url": f"{WEB}/{full_name}",
        "description": "This your first repo!",
        "fork": fork,
        "url": base,
        **{field: base + suffix for field, suffix in _REPO_URLS.items()},
        "clone_url": f"{WEB}/{full_name}.git",
        "git_url": f"git://github.com/{full_name}.git",
        "ssh_url": f"git@github.com:{full_name}.git",
        "svn_url": f"{WEB}/{full_name}",
        "mirror_url": None,
        "homepage": None,
        "language": "Python",
        "default_branch": default_branch,
        "created_at": "2011-01-26T19:01:12Z",
        "updated_at": "2026-10-01T12:00:00Z",
        "pushed_at": "2026-10-01T12:00:00Z",
        "size": 108,
        "forks": 0,
        "forks_count": 0,
        "stargazers_count": 80,
        "watchers": 80,
        "watchers_count": 80,
        "open_issues": 0,
        "open_issues_count": 0,
        "network_count": 0,
        "subscribers_count": 42,
        "has_issues": True,
        "has_projects": True,
        "has_wiki": True,
        "has_pages": False,
        "has_downloads": True,
        "has_discussions": False,
        "archived": False,
        "disabled": False,
        "is_template": False,
        "allow_forking": True,
        "web_commit_signoff_required": False,
        "topics": [],
        "license": None,
    }


def workflow_run(
    api: str, repo: dict[str, Any], fields: dict[str, Any], *, workflow_file: str, workflow_id: int
) -> dict[str, Any]:
    """`fields`: id, run_number, head_branch, head_sha, event, status, conclusion, created_at, actor (a login)."""
    run_id, full_name = fields["id"], repo["full_name"]
    base = f"{api}/repos/{full_name}/actions/runs/{run_id}"
    actor = user(api, fields["actor"])
    check_suite_id = run_id + 7
    return {
        **{k: fields[k] for k in ("id", "run_number", "head_branch", "head_sha", "event", "status", "conclusion")},
        "name": workflow_file.rsplit(".", 1)[0],
        "node_id": node_id("WorkflowRun", run_id),
        "display_title": f"Canary for {fields['head_sha'][:7]}",
        "path": f".github/workflows/{workflow_file}",
        "workflow_id": workflow_id,
        "check_suite_id": check_suite_id,
        "check_suite_node_id": node_id("CheckSuite", check_suite_id),
        "run_attempt": 1,
        "url": base,
        "html_url": f"{WEB}/{full_name}/actions/runs/{run_id}",
        "jobs_url": f"{base}/jobs",
        "logs_url": f"{base}/logs",
        "artifacts_url": f"{base}/artifacts",
        "cancel_url": f"{base}/cancel",
        "rerun_url": f"{base}/rerun",
        "previous_attempt_url": None,
        "check_suite_url": f"{api}/repos/{full_name}/check-suites/{check_suite_id}",
        "workflow_url": f"{api}/repos/{full_name}/actions/workflows/{workflow_id}",
        "pull_requests": [],
        "referenced_workflows": [],
        "created_at": fields["created_at"],
        "updated_at": fields["created_at"],
        "run_started_at": fields["created_at"],
        "actor": actor,
        "triggering_actor": actor,
        "head_commit": {
            "id": fields["head_sha"],
            "tree_id": sha("tree" + fields["head_sha"]),
            "message": "Update the canary",
            "timestamp": fields["created_at"],
            "author": {"name": "Monalisa Octocat", "email": "mona@github.com"},
            "committer": {"name": "GitHub", "email": "noreply@github.com"},
        },
        "repository": repo,
        "head_repository": repo,
        "head_repository_id": repo["id"],
    }


def pull_request(api: str, repo: dict[str, Any], head_repo: dict[str, Any], fields: dict[str, Any]) -> dict[str, Any]:
    """`fields`: id, number, state, head_sha, head_ref, base_ref, base_sha, created_at, user (a login)."""
    number, full_name = fields["number"], repo["full_name"]
    base, html = f"{api}/repos/{full_name}", f"{WEB}/{full_name}/pull/{fields['number']}"
    links = {
        "self": f"{base}/pulls/{number}",
        "html": html,
        "issue": f"{base}/issues/{number}",
        "comments": f"{base}/issues/{number}/comments",
        "review_comments": f"{base}/pulls/{number}/comments",
        "review_comment": f"{base}/pulls/comments{{/number}}",
        "commits": f"{base}/pulls/{number}/commits",
        "statuses": f"{base}/statuses/{fields['head_sha']}",
    }
    closed = fields["state"] == "closed"
    return {
        "id": fields["id"],
        "node_id": node_id("PullRequest", fields["id"]),
        "number": number,
        "state": fields["state"],
        "locked": False,
        "title": "Update the README with new information.",
        "body": "This is a pretty simple change that we need to pull into the default branch.",
        "user": user(api, fields["user"]),
        "url": links["self"],
        "html_url": html,
        "diff_url": f"{html}.diff",
        "patch_url": f"{html}.patch",
        "issue_url": links["issue"],
        "commits_url": links["commits"],
        "comments_url": links["comments"],
        "review_comments_url": links["review_comments"],
        "review_comment_url": links["review_comment"],
        "statuses_url": links["statuses"],
        "_links": {rel: {"href": href} for rel, href in links.items()},
        "labels": [],
        "milestone": None,
        "active_lock_reason": None,
        "assignee": None,
        "assignees": [],
        "requested_reviewers": [],
        "requested_teams": [],
        "created_at": fields["created_at"],
        "updated_at": fields["created_at"],
        "closed_at": fields["created_at"] if closed else None,
        "merged_at": None,
        "merge_commit_sha": sha("merge" + fields["head_sha"]),
        "head": _ref(api, head_repo, fields["head_ref"], fields["head_sha"]),
        "base": _ref(api, repo, fields["base_ref"], fields["base_sha"]),
        "author_association": "OWNER",
        "auto_merge": None,
        "draft": False,
        "merged": False,
        "mergeable": None if closed else True,
        "rebaseable": None if closed else True,
        "mergeable_state": "unknown" if closed else "clean",
        "merged_by": None,
        "comments": 0,
        "review_comments": 0,
        "maintainer_can_modify": False,
        "commits": 1,
        "additions": 1,
        "deletions": 1,
        "changed_files": 1,
    }


def _ref(api: str, repo: dict[str, Any], ref: str, commit: str) -> dict[str, Any]:
    owner = repo["owner"]["login"]
    return {"label": f"{owner}:{ref}", "ref": ref, "sha": commit, "user": user(api, owner), "repo": repo}


def artifact(api: str, repo: dict[str, Any], run: dict[str, Any], fields: dict[str, Any]) -> dict[str, Any]:
    """`fields`: id, name, size_in_bytes, digest, expired, created_at, expires_at."""
    url = f"{api}/repos/{repo['full_name']}/actions/artifacts/{fields['id']}"
    return {
        **fields,
        "node_id": node_id("Artifact", fields["id"]),
        "url": url,
        "archive_download_url": f"{url}/zip",
        "updated_at": fields["created_at"],
        "workflow_run": {
            "id": run["id"],
            "repository_id": repo["id"],
            "head_repository_id": run["head_repository"]["id"],
            "head_branch": run["head_branch"],
            "head_sha": run["head_sha"],
        },
    }


def check_run(api: str, repo: dict[str, Any], check_run_id: int, head_sha: str) -> dict[str, Any]:
    """A new check run, before the fields of its create request are applied."""
    url = f"{api}/repos/{repo['full_name']}/check-runs/{check_run_id}"
    return {
        "id": check_run_id,
        "node_id": node_id("CheckRun", check_run_id),
        "head_sha": head_sha,
        "external_id": "",
        "url": url,
        "html_url": f"{WEB}/{repo['full_name']}/runs/{check_run_id}",
        "details_url": f"{WEB}/{repo['full_name']}/runs/{check_run_id}",
        "status": "queued",
        "conclusion": None,
        "started_at": None,
        "completed_at": None,
        "output": {
            "title": None,
            "summary": None,
            "text": None,
            "annotations_count": 0,
            "annotations_url": url + "/annotations",
        },
        "check_suite": {"id": check_run_id + 3},
        "app": actions_app(api),
        "pull_requests": [],
    }


def issue_comment(
    api: str, repo: dict[str, Any], fields: dict[str, Any], *, on_pull: bool, user_type: str
) -> dict[str, Any]:
    """`fields`: id, issue_number, body, user (a login), created_at."""
    full_name, number, comment_id = repo["full_name"], fields["issue_number"], fields["id"]
    bot = user_type == "Bot"
    return {
        "id": comment_id,
        "node_id": node_id("IssueComment", comment_id),
        "url": f"{api}/repos/{full_name}/issues/comments/{comment_id}",
        "html_url": f"{WEB}/{full_name}/{'pull' if on_pull else 'issues'}/{number}#issuecomment-{comment_id}",
        "issue_url": f"{api}/repos/{full_name}/issues/{number}",
        "body": fields["body"],
        "user": user(api, fields["user"], user_type),
        "created_at": fields["created_at"],
        "updated_at": fields["created_at"],
        "author_association": "NONE" if bot else "CONTRIBUTOR",
        "performed_via_github_app": actions_app(api) if bot else None,
    }


def issue(api: str, repo: dict[str, Any], fields: dict[str, Any], *, user_type: str) -> dict[str, Any]:
    """`fields`: id, number, title, body, user (a login), state, created_at."""
    full_name, number, issue_id = repo["full_name"], fields["number"], fields["id"]
    url = f"{api}/repos/{full_name}/issues/{number}"
    bot = user_type == "Bot"
    return {
        "id": issue_id,
        "node_id": node_id("Issue", issue_id),
        "url": url,
        "repository_url": f"{api}/repos/{full_name}",
        "labels_url": f"{url}/labels{{/name}}",
        "comments_url": f"{url}/comments",
        "events_url": f"{url}/events",
        "html_url": f"{WEB}/{full_name}/issues/{number}",
        "number": number,
        "state": fields["state"],
        "title": fields["title"],
        "body": fields["body"],
        "user": user(api, fields["user"], user_type),
        "labels": [],
        "assignee": None,
        "assignees": [],
        "milestone": None,
        "locked": False,
        "comments": 0,
        "created_at": fields["created_at"],
        "updated_at": fields["created_at"],
        "closed_at": None,
        "author_association": "NONE" if bot else "CONTRIBUTOR",
        "performed_via_github_app": actions_app(api) if bot else None,
    }


def commit(api: str, repo: dict[str, Any], commit_sha: str, parents: list[str]) -> dict[str, Any]:
    """A commit as the compare endpoint lists it (authored by Codertocat, committed through the web UI)."""
    full_name = repo["full_name"]
    url = f"{api}/repos/{full_name}/commits/{commit_sha}"
    when = "2026-11-01T00:00:00Z"
    return {
        "sha": commit_sha,
        "node_id": base64.b64encode(f"05:Commit{commit_sha}".encode()).decode(),
        "url": url,
        "html_url": f"{WEB}/{full_name}/commit/{commit_sha}",
        "comments_url": f"{url}/comments",
        "commit": {
            "url": f"{api}/repos/{full_name}/git/commits/{commit_sha}",
            "author": {"name": "Monalisa Octocat", "email": "mona@github.com", "date": when},
            "committer": {"name": "GitHub", "email": "noreply@github.com", "date": when},
            "message": "Update the canary",
            "comment_count": 0,
            "tree": {"sha": sha("tree" + commit_sha), "url": f"{api}/repos/{full_name}/git/trees/{commit_sha}"},
        },
        "author": user(api, "Codertocat"),
        "committer": user(api, "Codertocat"),
        "parents": [
            {"sha": p, "url": f"{api}/repos/{full_name}/commits/{p}", "html_url": f"{WEB}/{full_name}/commit/{p}"}
            for p in parents
        ],
    }


def comparison(
    api: str, repo: dict[str, Any], basehead: str, *, base_sha: str, merge_base_sha: str, head_sha: str
) -> dict[str, Any]:
    """GET compare/BASE...HEAD: the head one commit past the merge base, the base `behind_by` it unless equal."""
    full_name = repo["full_name"]
    behind = 0 if base_sha == merge_base_sha else 1
    return {
        "url": f"{api}/repos/{full_name}/compare/{basehead}",
        "html_url": f"{WEB}/{full_name}/compare/{basehead}",
        "permalink_url": f"{WEB}/{full_name}/compare/{full_name.split('/')[0]}:{base_sha[:7]}...{head_sha[:7]}",
        "diff_url": f"{WEB}/{full_name}/compare/{basehead}.diff",
        "patch_url": f"{WEB}/{full_name}/compare/{basehead}.patch",
        "base_commit": commit(api, repo, base_sha, [merge_base_sha] if behind else []),
        "merge_base_commit": commit(api, repo, merge_base_sha, []),
        "status": "diverged" if behind else "ahead",
        "ahead_by": 1,
        "behind_by": behind,
        "total_commits": 1,
        "commits": [commit(api, repo, head_sha, [merge_base_sha])],
        "files": [],
    }
