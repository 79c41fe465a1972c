"""The fake GitHub's Git Data API: blobs, trees, commits and branches in memory, answered in GitHub's shapes.

Enough of git for the history step (canary_action/github/history_branch.py): content-addressed objects (sha1 as git
computes it for a blob; a stable digest for trees and commits), a tree built on a base tree, a commit's parents, and
refs that move only forward unless forced (422 "Update is not a fast forward", as GitHub answers).
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable
from typing import Any

Reply = tuple[int, Any]


class FakeGit:
    def __init__(self, api_url: str, repo: str, now: Callable[[], str]) -> None:
        self.base = f"{api_url}/repos/{repo}/git"
        self.html = f"https://github.com/{repo}/commit"
        self.now = now
        self.blobs: dict[str, bytes] = {}
        self.trees: dict[str, list[dict[str, Any]]] = {}
        self.commits: dict[str, dict[str, Any]] = {}
        self.branches: dict[str, str] = {}
        """branch name -> commit sha (refs/heads/...)."""
        self.moved_behind: list[str] = []
        """Branches to move once more, behind the writer's back, before its next ref update (a concurrent writer)."""

    # -- what a test reads ------------------------------------------------------------------------------------

    def file(self, branch: str, path: str) -> bytes | None:
        head = self.branches.get(branch)
        if head is None:
            return None
        entry = next((e for e in self.trees[self.commits[head]["tree"]] if e["path"] == path), None)
        return self.blobs[entry["sha"]] if entry else None

    def history_of(self, branch: str) -> list[dict[str, Any]]:
        """The branch's commits, newest first (first parents)."""
        found, sha = [], self.branches.get(branch)
        while sha is not None:
            found.append(self.commits[sha])
            sha = self.commits[sha]["parents"][0] if self.commits[sha]["parents"] else None
        return found

    def commit_file(self, branch: str, path: str, content: bytes, message: str = "by hand") -> str:
        """A commit made outside the action (a person's push, or another job's)."""
        blob = self._blob(content)
        head = self.branches.get(branch)
        base = self.trees[self.commits[head]["tree"]] if head else []
        tree = self._tree([e for e in base if e["path"] != path] + [_entry(path, blob, len(content))])
        sha = self._commit(message, tree, [head] if head else [])
        self.branches[branch] = sha
        return sha

    # -- handlers ---------------------------------------------------------------------------------------------

    def get_ref(self, ref: str) -> Reply:
        branch = ref.removeprefix("heads/")
        if not ref.startswith("heads/") or branch not in self.branches:
            return 404, {"message": "Not Found"}
        return 200, self._ref(branch)

    def get_commit(self, sha: str) -> Reply:
        return (200, self._commit_json(sha)) if sha in self.commits else (404, {"message": "Not Found"})

    def get_tree(self, sha: str) -> Reply:
        if sha not in self.trees:
            return 404, {"message": "Not Found"}
        return 200, {"sha": sha, "url": f"{self.base}/trees/{sha}", "truncated": False, "tree": self.trees[sha]}

    def get_blob(self, sha: str) -> Reply:
        if sha not in self.blobs:
            return 404, {"message": "Not Found"}
        data = self.blobs[sha]
        return 200, {"sha": sha, "url": f"{self.base}/blobs/{sha}", "node_id": f"B_{sha[:10]}", "size": len(data),
                     "content": base64.encodebytes(data).decode(), "encoding": "base64"}  # fmt: skip

    def create_blob(self, body: dict[str, Any]) -> Reply:
        content = body["content"]
        data = base64.b64decode(content) if body.get("encoding") == "base64" else content.encode()
        sha = self._blob(data)
        return 201, {"sha": sha, "url": f"{self.base}/blobs/{sha}"}

    def create_tree(self, body: dict[str, Any]) -> Reply:
        base = body.get("base_tree")
        if base is not None and base not in self.trees:
            return 422, {"message": "base_tree is not a valid tree"}
        entries = {e["path"]: e for e in (self.trees[base] if base else [])}
        for item in body["tree"]:
            if item.get("sha") not in self.blobs:
                return 422, {"message": "tree.sha is not a valid blob"}
            entries[item["path"]] = _entry(item["path"], item["sha"], len(self.blobs[item["sha"]]))
        sha = self._tree(list(entries.values()))
        return 201, {"sha": sha, "url": f"{self.base}/trees/{sha}", "truncated": False, "tree": self.trees[sha]}

    def create_commit(self, body: dict[str, Any]) -> Reply:
        if body["tree"] not in self.trees or any(p not in self.commits for p in body.get("parents", [])):
            return 422, {"message": "Tree SHA does not exist / Parent SHA does not exist"}
        sha = self._commit(body["message"], body["tree"], list(body.get("parents", [])))
        return 201, self._commit_json(sha)

    def create_ref(self, body: dict[str, Any]) -> Reply:
        ref, sha = body["ref"], body["sha"]
        branch = ref.removeprefix("refs/heads/")
        if not ref.startswith("refs/heads/") or sha not in self.commits:
            return 422, {"message": "Reference update failed"}
        if branch in self.branches:
            return 422, {"message": "Reference already exists"}
        self.branches[branch] = sha
        return 201, self._ref(branch)

    def update_ref(self, ref: str, body: dict[str, Any]) -> Reply:
        branch = ref.removeprefix("heads/")
        if branch not in self.branches:
            return 422, {"message": "Reference does not exist"}
        if branch in self.moved_behind:
            self.moved_behind.remove(branch)
            self.commit_file(branch, "other.txt", b"another writer\n", "another writer")
        sha = body["sha"]
        if sha not in self.commits:
            return 422, {"message": "Object does not exist"}
        if not body.get("force") and self.branches[branch] not in self._ancestors(sha):
            return 422, {"message": "Update is not a fast forward"}
        self.branches[branch] = sha
        return 200, self._ref(branch)

    # -- objects ----------------------------------------------------------------------------------------------

    def _blob(self, data: bytes) -> str:
        sha = hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()
        self.blobs[sha] = data
        return sha

    def _tree(self, entries: list[dict[str, Any]]) -> str:
        entries = sorted(entries, key=lambda e: e["path"])
        sha = _digest("tree", entries)
        self.trees[sha] = entries
        return sha

    def _commit(self, message: str, tree: str, parents: list[str]) -> str:
        moment = self.now()
        sha = _digest("commit", [message, tree, parents, moment, len(self.commits)])
        self.commits[sha] = {"message": message, "tree": tree, "parents": parents, "date": moment}
        return sha

    def _ancestors(self, sha: str) -> set[str]:
        seen, stack = set(), [sha]
        while stack:
            current = stack.pop()
            if current not in seen:
                seen.add(current)
                stack += self.commits[current]["parents"]
        return seen

    def _ref(self, branch: str) -> dict[str, Any]:
        sha = self.branches[branch]
        return {"ref": f"refs/heads/{branch}", "node_id": f"REF_{sha[:10]}", "url": f"{self.base}/refs/heads/{branch}",
                "object": {"type": "commit", "sha": sha, "url": f"{self.base}/commits/{sha}"}}  # fmt: skip

    def _commit_json(self, sha: str) -> dict[str, Any]:
        commit = self.commits[sha]
        person = {"name": "github-actions[bot]", "email": "41898282+github-actions[bot]@users.noreply.github.com",
                  "date": commit["date"]}  # fmt: skip
        return {
            "sha": sha, "node_id": f"C_{sha[:10]}", "url": f"{self.base}/commits/{sha}",
            "html_url": f"{self.html}/{sha}",
            "author": person, "committer": person, "message": commit["message"],
            "tree": {"sha": commit["tree"], "url": f"{self.base}/trees/{commit['tree']}"},
            "parents": [{"sha": p, "url": f"{self.base}/commits/{p}", "html_url": f"{self.html}/{p}"}
                        for p in commit["parents"]],
            "verification": {"verified": False, "reason": "unsigned", "signature": None, "payload": None,
                             "verified_at": None},
        }  # fmt: skip


def _entry(path: str, sha: str, size: int) -> dict[str, Any]:
    return {"path": path, "mode": "100644", "type": "blob", "sha": sha, "size": size}


def _digest(kind: str, parts: object) -> str:
    return hashlib.sha1(f"{kind} {json.dumps(parts, sort_keys=True)}".encode(), usedforsecurity=False).hexdigest()
