"""Publishing: the check run on a pull request's head commit, the one sticky comment per config, a bisect's issue.

Check run: a new one per action run, named `rlhf-canary (<config>)`, on the measured commit. GitHub shows the
newest run of a name on a commit, and it does not let a completed check run go back to in_progress (a rerun
that PATCHed its earlier run would fail or lie), so an earlier run's check is never touched. GitHub takes at
most 50 annotations per request and appends those of later updates, so more are sent in batches.

Anyone can type a marker into a comment or an issue, and what someone else wrote is theirs to edit back, so only
what this token's identity wrote is updated: the user of a personal access token (GET /user); for an app's
installation token, which GET /user refuses, see each below.

Bisect issue (mode report on a bisect's artifact): one open issue per bad commit and config, found by the hidden
lines at the start of its body among the open issues this token's identity opened, and updated in place. An
installation token's identity is the bot GraphQL's `viewer` names (github-actions[bot] for GITHUB_TOKEN, another
app's own bot): another app's token never takes over GITHUB_TOKEN's issue. When no identity is told, any open issue
may be someone else's: none is updated, a new one is opened, and Published.note says why.

Sticky comment: the comment whose first line is the config's marker and that this token's identity wrote (a personal
access token's user; an installation token's bot as GraphQL's viewer names it: another app's token never takes over
GITHUB_TOKEN's comment). When no identity is told, no comment is written (a new one every run would spam, updating any
bot's would take over another's), and Published.note says why; the check run still carries the report. The `comment`
input decides when to write:

- always: every run creates or updates it;
- on-change: only when the verdict differs from the comment's (a first comment only when not pass);
- on-failure: on regression or crash; an existing comment is still updated when the PR recovers, so it
  never shows a stale failure;
- never: no comment.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final, Literal

from canary_action.compare.result import Verdict
from canary_action.errors import GitHubError
from canary_action.github.client import GitHubClient

MAX_ANNOTATIONS_PER_REQUEST: Final = 50
MAX_ISSUES_SCANNED: Final = 1000
VIEWER_QUERY: Final = "query { viewer { login } }"
CommentMode = Literal["always", "on-change", "on-failure", "never"]
Conclusion = Literal["success", "failure", "neutral", "cancelled"]
_VERDICT_IN_TITLE: Final = re.compile(r"rlhf-canary \*\*(pass|regression|neutral|crashed)\*\*")


@dataclass(frozen=True)
class Annotation:
    path: str
    line: int
    level: Literal["failure", "warning", "notice"]
    title: str
    message: str

    def body(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "start_line": self.line,
            "end_line": self.line,
            "annotation_level": self.level,
            "title": self.title[:255],
            "message": self.message[:64000],
        }


@dataclass(frozen=True)
class Published:
    id: int
    url: str | None
    note: str = ""
    """What the caller should say about how it was written (a new issue where an earlier one was not updated)."""


UNKNOWN_IDENTITY_NOTE: Final = (
    "this token's identity is unknown (GET /user and GraphQL's viewer both refused it), so no comment was written: "
    "an earlier one cannot be told from another app's; the check run carries the report"
)


def check_name(config_name: str) -> str:
    return f"rlhf-canary ({config_name})"


@dataclass
class Publisher:
    client: GitHubClient
    repository: str

    def start_check(self, name: str, head_sha: str, details_url: str | None) -> Published:
        """A new check run, shown as running while the canary trains (or until this run publishes)."""
        body: dict[str, Any] = {"name": name, "head_sha": head_sha, "status": "in_progress", "started_at": _now()}
        if details_url:
            body["details_url"] = details_url
        reply = self.client.request("POST", f"/repos/{self.repository}/check-runs", body=body).body
        return Published(int(reply["id"]), reply.get("html_url"))

    def finish_check(
        self,
        check: Published,
        conclusion: Conclusion,
        output: dict[str, str],
        annotations: Sequence[Annotation] = (),
    ) -> Published:
        batches = [
            annotations[i : i + MAX_ANNOTATIONS_PER_REQUEST]
            for i in range(0, len(annotations), MAX_ANNOTATIONS_PER_REQUEST)
        ] or [()]
        path = f"/repos/{self.repository}/check-runs/{check.id}"
        first = {"status": "completed", "conclusion": conclusion, "completed_at": _now()}
        reply: dict[str, Any] = {}
        for i, batch in enumerate(batches):
            out: dict[str, Any] = {"title": output["title"], "summary": output["summary"]}
            if i == 0 and output.get("text"):
                out["text"] = output["text"]
            if batch:
                out["annotations"] = [a.body() for a in batch]
            reply = self.client.request("PATCH", path, body={**(first if i == 0 else {}), "output": out}).body
        return Published(check.id, reply.get("html_url") or check.url)

    def upsert_comment(
        self, pr_number: int, marker: str, body: str, verdict: Verdict, mode: CommentMode
    ) -> Published | None:
        """Create or update the sticky comment as `mode` says; None when nothing was written."""
        if mode == "never":
            return None
        mine = self._identity() or self._installation_identity()
        if mine is None:
            return Published(0, None, UNKNOWN_IDENTITY_NOTE)
        existing = self._find_comment(pr_number, marker, mine)
        if not _wanted(mode, verdict, None if existing is None else _verdict_of(existing.get("body", ""))):
            return None
        if existing is not None:
            reply = self.client.request(
                "PATCH", f"/repos/{self.repository}/issues/comments/{existing['id']}", body={"body": body}
            ).body
        else:
            reply = self.client.request(
                "POST", f"/repos/{self.repository}/issues/{pr_number}/comments", body={"body": body}
            ).body
        return Published(int(reply["id"]), reply.get("html_url"))

    def _find_comment(self, pr_number: int, marker: str, mine: str) -> dict[str, Any] | None:
        comments = self.client.paginate(f"/repos/{self.repository}/issues/{pr_number}/comments", "", limit=5000)
        for comment in comments:
            if not isinstance(comment, dict):
                continue
            first_line = str(comment.get("body") or "").split("\n", 1)[0].strip()
            user = comment.get("user") or {}
            if first_line == marker and isinstance(user, dict) and _written_by(user, mine):
                return comment
        return None

    def _identity(self) -> str | None:
        """The login of a personal access token's user; None for an installation token (GET /user refuses it)."""
        try:
            return str(self.client.request("GET", "/user").body["login"])
        except GitHubError as e:
            if e.forbidden:
                return None
            raise

    def _installation_identity(self) -> str | None:
        """The bot an installation token writes as, as GraphQL's viewer names it; None when it does not say."""
        try:
            viewer = self.client.graphql(VIEWER_QUERY)
        except GitHubError as e:
            if e.status is None or e.status >= 500:  # GitHub is down: the write would fail too
                raise
            return None  # refused, or answered with errors
        login = viewer.get("viewer", {}).get("login") if isinstance(viewer, dict) else None
        return login if isinstance(login, str) and login else None

    def upsert_issue(self, key: str, title: str, body: str) -> Published:
        """Create, or update in place, the one open issue this token's identity opened whose body's first lines
        hold `key` (hidden marker lines): a rerun never opens a second one. With the identity unknown, any open
        issue could be someone else's: a new one is opened, and the note says so. Published.id is its number."""
        mine = self._identity() or self._installation_identity()
        existing = None if mine is None else self._find_issue(key, mine)
        fields = {"title": title, "body": body}
        if existing is not None:
            path = f"/repos/{self.repository}/issues/{int(existing['number'])}"
            reply = self.client.request("PATCH", path, body=fields).body
        else:
            reply = self.client.request("POST", f"/repos/{self.repository}/issues", body=fields).body
        note = (
            "this token's identity is unknown (GET /user and GraphQL's viewer both refused it), so no earlier issue "
            "of this bisect was looked for or updated: this one is new"
            if mine is None
            else ""
        )
        return Published(int(reply["number"]), reply.get("html_url"), note)

    def _find_issue(self, key: str, mine: str) -> dict[str, Any] | None:
        params = {"state": "open", "creator": mine, "sort": "created", "direction": "desc"}
        listed = self.client.paginate(f"/repos/{self.repository}/issues", "", params=params, limit=MAX_ISSUES_SCANNED)
        lines = key.splitlines()
        return next(
            (
                issue
                for issue in listed
                if isinstance(issue, dict)
                and "pull_request" not in issue  # the issues list holds pull requests too
                and str(issue.get("body") or "").splitlines()[: len(lines)] == lines
                and isinstance(issue.get("user"), dict)
                and _written_by(issue["user"], mine)
            ),
            None,
        )


def _written_by(user: dict[str, Any], login: str) -> bool:
    return user.get("login") == login


def conclusion_of(verdict: Verdict, fail_on: Literal["regression", "never"]) -> Conclusion:
    """success for pass, failure for a regression (neutral with fail-on: never) or a crash, else neutral."""
    if verdict == "pass":
        return "success"
    if verdict == "crashed" or (verdict == "regression" and fail_on == "regression"):
        return "failure"
    return "neutral"


def _wanted(mode: CommentMode, verdict: Verdict, previous: str | None) -> bool:
    failing = verdict in ("regression", "crashed")
    if mode == "always":
        return True
    if mode == "on-failure":
        return failing or previous is not None
    if previous is None:  # on-change, no comment yet: a first comment only when there is news
        return verdict != "pass"
    return previous != verdict


def _verdict_of(body: str) -> str:
    """The verdict an earlier comment showed (its title line); '' when it cannot be read."""
    found = _VERDICT_IN_TITLE.search(body[:2000])
    return found.group(1) if found else ""


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
