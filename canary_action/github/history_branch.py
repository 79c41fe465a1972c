"""The history branch (docs/history.md), read and written through GitHub's Git Data API: no clone, no git on the
runner, no credential in a git config. The branch holds one file, history.jsonl, and each write is one commit on
top of the one read: a branch that moved meanwhile (another workflow's history job) is read again and the entry
appended again, up to MAX_WRITES times.

A branch that does not exist yet is created as an orphan: its first commit holds the history file alone, none of the
repository's code.
"""

from __future__ import annotations

import base64
import binascii
import random
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from canary_action.errors import GitHubError, HistoryError
from canary_action.github.client import GitHubClient
from canary_action.history.record import HISTORY_FILE, MAX_FILE_BYTES

MAX_WRITES: Final = 6


@dataclass(frozen=True)
class BranchState:
    head: str | None
    """The branch's commit; None: no such branch yet."""
    tree: str | None
    content: bytes | None
    """history.jsonl as the branch holds it; None: no such file."""


@dataclass(frozen=True)
class HistoryBranch:
    client: GitHubClient
    repository: str
    branch: str

    def read(self) -> BranchState:
        head = self._head()
        if head is None:
            return BranchState(None, None, None)
        commit = self._get(f"git/commits/{head}")
        tree_sha = str(commit["tree"]["sha"])
        tree = self._get(f"git/trees/{tree_sha}")
        entry = next((e for e in tree.get("tree", []) if e.get("path") == HISTORY_FILE), None)
        if entry is None:
            return BranchState(head, tree_sha, None)
        if entry.get("type") != "blob" or int(entry.get("size") or 0) > MAX_FILE_BYTES:
            raise HistoryError(
                f"{HISTORY_FILE} on branch {self.branch} is not a file under {MAX_FILE_BYTES:,} bytes",
                fix=f"the branch is the history step's to write: restore it, or delete {self.branch} to start anew",
            )
        blob = self._get(f"git/blobs/{entry['sha']}")
        try:
            content = base64.b64decode(str(blob.get("content", "")), validate=False)
        except (binascii.Error, ValueError):
            raise HistoryError(f"{HISTORY_FILE} on branch {self.branch}: GitHub sent it undecodable") from None
        return BranchState(head, tree_sha, content)

    def write(self, before: BranchState, content: bytes, message: str) -> str:
        """Commit `content` as history.jsonl on top of `before`; the new commit. GitHubError with status 422 when the
        branch moved since `before` (not a fast-forward) or was created meanwhile."""
        blob = self._post("git/blobs", {"content": base64.b64encode(content).decode(), "encoding": "base64"})
        tree_body: dict[str, Any] = {
            "tree": [{"path": HISTORY_FILE, "mode": "100644", "type": "blob", "sha": blob["sha"]}]
        }
        if before.tree is not None:
            tree_body["base_tree"] = before.tree
        tree = self._post("git/trees", tree_body)
        parents = [before.head] if before.head else []
        commit = self._post("git/commits", {"message": message, "tree": tree["sha"], "parents": parents})
        sha = str(commit["sha"])
        if before.head is None:
            self._post("git/refs", {"ref": f"refs/heads/{self.branch}", "sha": sha})
        else:
            self.client.request(
                "PATCH", self._path(f"git/refs/heads/{self._quoted()}"), body={"sha": sha, "force": False}
            )
        return sha

    def update(self, change: Callable[[bytes | None], bytes], message: str) -> str:
        """Read, change, write; again, after a wait that grows with a random share, when the branch moved meanwhile
        (the history jobs of several workflows writing at once: none queues behind another, since a concurrency
        group would cancel a pending one and lose its run). The new commit."""
        for attempt in range(1, MAX_WRITES + 1):
            before = self.read()
            try:
                return self.write(before, change(before.content), message)
            except GitHubError as error:
                if error.status != 422 or attempt == MAX_WRITES:
                    raise
            self.client.sleep(attempt * (1 + random.random()))  # spreading retries, not a secret
        raise AssertionError("unreachable")  # the loop returns or raises

    def _head(self) -> str | None:
        try:
            ref = self._get(f"git/ref/heads/{self._quoted()}")
        except GitHubError as error:
            if error.status == 404:
                return None
            raise
        return str(ref["object"]["sha"])

    def _quoted(self) -> str:
        return urllib.parse.quote(self.branch, safe="/")

    def _path(self, tail: str) -> str:
        return f"/repos/{self.repository}/{tail}"

    def _get(self, tail: str) -> Any:
        return self.client.request("GET", self._path(tail)).body

    def _post(self, tail: str, body: dict[str, Any]) -> Any:
        return self.client.request("POST", self._path(tail), body=body).body
