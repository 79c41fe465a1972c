"""Vendor the real webhook payloads the action's tests use, from npm's @octokit/webhooks-examples (MIT).

    python scripts/vendor_webhooks.py [--version 7.6.1]

Runs `npm pack @octokit/webhooks-examples@VERSION` in a temporary directory and writes one file per case to
tests/fixtures/webhooks/, unchanged, with a README naming the source. The examples have no fork pull
request, so `pull_request.fork.json` is the `opened` example with its head repository renamed to a fork:
the one derived file, said so in the README.
"""

from __future__ import annotations

import argparse
import copy
import json
import subprocess
import tarfile
import tempfile
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "webhooks"
#: file name -> (event, the example's action, which of the matching examples)
CASES = {
    "pull_request.opened.json": ("pull_request", "opened", 0),
    "pull_request.synchronize.json": ("pull_request", "synchronize", 0),
    "pull_request.reopened.json": ("pull_request", "reopened", 0),
    "push.json": ("push", None, 0),
    "workflow_dispatch.json": ("workflow_dispatch", None, 0),
    "workflow_run.completed.json": ("workflow_run", "completed", 0),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", default="7.6.1")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        spec = f"@octokit/webhooks-examples@{args.version}"
        subprocess.run(["npm", "pack", spec, "--pack-destination", tmp], check=True, capture_output=True)
        [tarball] = Path(tmp).glob("*.tgz")
        with tarfile.open(tarball) as tar:
            member = tar.extractfile("package/api.github.com/index.json")
            assert member is not None
            index = json.load(member)
    examples = {entry["name"]: entry["examples"] for entry in index}
    OUT.mkdir(parents=True, exist_ok=True)
    for name, (event, action, nth) in CASES.items():
        matching = [x for x in examples[event] if action is None or x.get("action") == action]
        write(name, matching[nth])
    write("pull_request.fork.json", fork_of(json.loads((OUT / "pull_request.opened.json").read_text())))
    (OUT / "README.md").write_text(
        f"Webhook payloads from npm `{spec}` (MIT, github.com/octokit/webhooks), written by "
        "`scripts/vendor_webhooks.py`; unchanged except `pull_request.fork.json`, the `opened` example with its "
        "head repository made a fork (`octo-fork/Hello-World`), since the examples hold no fork pull request.\n"
    )


def fork_of(payload: dict[str, Any]) -> dict[str, Any]:
    fork = copy.deepcopy(payload)
    head = fork["pull_request"]["head"]
    head["repo"]["full_name"] = "octo-fork/Hello-World"
    head["repo"]["owner"]["login"] = "octo-fork"
    head["repo"]["fork"] = True
    head["label"] = "octo-fork:changes"
    return fork


def write(name: str, payload: dict[str, Any]) -> None:
    (OUT / name).write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {OUT / name}")


if __name__ == "__main__":
    main()
