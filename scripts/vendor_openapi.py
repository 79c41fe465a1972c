"""Vendor the part of GitHub's OpenAPI description the action uses, from npm's @octokit/openapi (MIT).

    python scripts/vendor_openapi.py [--version 23.0.2]

Runs `npm pack @octokit/openapi@VERSION` in a temporary directory, reads GitHub's description of api.github.com
(`package/generated/api.github.com.json`, the one with `$ref`s kept) and writes to tests/fixtures/openapi/ only
the OPERATIONS below plus every `#/components/...` entry they reach, transitively: the contract tests' fake
GitHub is checked against it. The full description is ~12 MB; the subset stays reviewable. Examples are dropped
(they are documentation, not contract), and keys are sorted so that a regeneration diff shows what GitHub changed.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "openapi"
SOURCE = "package/generated/api.github.com.json"
#: (method, path template): every REST call the action makes, in the order of one run.
OPERATIONS = (
    ("get", "/repos/{owner}/{repo}"),
    ("get", "/repos/{owner}/{repo}/compare/{basehead}"),
    ("get", "/repos/{owner}/{repo}/actions/workflows/{workflow_id}/runs"),
    ("get", "/repos/{owner}/{repo}/actions/runs/{run_id}"),
    ("get", "/repos/{owner}/{repo}/actions/runs/{run_id}/artifacts"),
    ("get", "/repos/{owner}/{repo}/actions/artifacts/{artifact_id}/{archive_format}"),
    ("get", "/repos/{owner}/{repo}/commits/{ref}/check-runs"),
    ("post", "/repos/{owner}/{repo}/check-runs"),
    ("patch", "/repos/{owner}/{repo}/check-runs/{check_run_id}"),
    ("get", "/repos/{owner}/{repo}/issues/{issue_number}/comments"),
    ("post", "/repos/{owner}/{repo}/issues/{issue_number}/comments"),
    ("patch", "/repos/{owner}/{repo}/issues/comments/{comment_id}"),
    ("get", "/repos/{owner}/{repo}/issues"),
    ("post", "/repos/{owner}/{repo}/issues"),
    ("patch", "/repos/{owner}/{repo}/issues/{issue_number}"),
    ("get", "/repos/{owner}/{repo}/pulls"),
    ("get", "/repos/{owner}/{repo}/pulls/{pull_number}"),
    ("get", "/repos/{owner}/{repo}/commits/{commit_sha}/pulls"),
    ("get", "/repos/{owner}/{repo}/commits/{ref}"),
    ("get", "/user"),
    # The history step (github/history_mode.py): the history branch read and written through the Git Data API.
    ("get", "/repos/{owner}/{repo}/git/ref/{ref}"),
    ("get", "/repos/{owner}/{repo}/git/commits/{commit_sha}"),
    ("get", "/repos/{owner}/{repo}/git/trees/{tree_sha}"),
    ("get", "/repos/{owner}/{repo}/git/blobs/{file_sha}"),
    ("post", "/repos/{owner}/{repo}/git/blobs"),
    ("post", "/repos/{owner}/{repo}/git/trees"),
    ("post", "/repos/{owner}/{repo}/git/commits"),
    ("post", "/repos/{owner}/{repo}/git/refs"),
    ("patch", "/repos/{owner}/{repo}/git/refs/{ref}"),
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", default="23.0.2", help="check the latest with `npm view @octokit/openapi version`")
    args = parser.parse_args()
    spec = f"@octokit/openapi@{args.version}"
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(["npm", "pack", spec, "--pack-destination", tmp], check=True, capture_output=True)
        [tarball] = Path(tmp).glob("*.tgz")
        with tarfile.open(tarball) as tar:
            member = tar.extractfile(SOURCE)
            assert member is not None
            document = json.load(member)
    OUT.mkdir(parents=True, exist_ok=True)
    target = OUT / "api.github.com.subset.json"
    target.write_text(json.dumps(subset(document), indent=1, sort_keys=True) + "\n", encoding="utf-8")
    (OUT / "README.md").write_text(readme(spec), encoding="utf-8")
    print(f"wrote {target} ({target.stat().st_size:,} bytes)")


def subset(document: dict[str, Any]) -> dict[str, Any]:
    """The OPERATIONS and the components they reach; a missing operation is an error, not a smaller file."""
    paths: dict[str, dict[str, Any]] = {}
    for method, path in OPERATIONS:
        item = document["paths"].get(path, {})
        if method not in item:
            raise SystemExit(f"{method.upper()} {path} is not in {SOURCE}: did GitHub rename or drop it?")
        kept = paths.setdefault(path, {k: v for k, v in item.items() if k == "parameters"})
        kept[method] = _without_examples(item[method])
    components: dict[str, dict[str, Any]] = {}
    pending = list(_refs(paths))
    while pending:
        kind, name = pending.pop()
        if name in components.get(kind, {}):
            continue
        found = _without_examples(document["components"][kind][name])
        components.setdefault(kind, {})[name] = found
        pending.extend(_refs(found))
    return {"openapi": document["openapi"], "info": document["info"], "paths": paths, "components": components}


def _without_examples(operation: Any) -> Any:
    """Drops media types' `examples` (refs into components/examples, the bulk of the file), keeps the rest."""
    if isinstance(operation, list):
        return [_without_examples(x) for x in operation]
    if not isinstance(operation, dict):
        return operation
    if "schema" in operation and "examples" in operation:  # a media type object, not a schema
        operation = {k: v for k, v in operation.items() if k != "examples"}
    return {k: _without_examples(v) for k, v in operation.items()}


def _refs(node: Any) -> Iterator[tuple[str, str]]:
    """(kind, name) of every `#/components/KIND/NAME` reference under node."""
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/components/"):
            kind, name = ref.removeprefix("#/components/").split("/", 1)
            yield kind, name
        for value in node.values():
            yield from _refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from _refs(value)


def readme(spec: str) -> str:
    operations = "\n".join(f"- `{method.upper()} {path}`" for method, path in OPERATIONS)
    return (
        "# GitHub REST API contract (subset)\n\n"
        f"`api.github.com.subset.json` is a trimmed copy of `{SOURCE}` from npm `{spec}` (MIT License, Copyright "
        "(c) 2020 Octokit contributors; github.com/octokit/openapi, itself generated from "
        "github.com/github/rest-api-description). It holds only the operations below and every `#/components/...` "
        "entry they reference, transitively; response examples are dropped. The contract tests "
        "(`tests/contract/`) check every request the fake GitHub receives, and every response it sends, against "
        "it.\n\n"
        "Regenerate (needs `npm`; check the newest version with `npm view @octokit/openapi version`):\n\n"
        "    python scripts/vendor_openapi.py --version VERSION\n\n"
        "Operations:\n\n"
        f"{operations}\n"
    )


if __name__ == "__main__":
    main()
