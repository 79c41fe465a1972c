"""The example workflows in docs/examples/ are what users copy: they must be safe and correct as written.

Checked here, offline: every job states its permissions and a timeout; third-party actions are pinned by
commit SHA (ours by its major tag); every job that trains uploads its results even when it failed; every
`with:` key is a real input of our actions and every literal value parses; the files that refer to each other
agree. Then the trust model (docs/examples/README.md), twice:

- as rules over the files (`trust_violations`): the GPU runner is reachable only from triggers that run the
  default branch's workflow file; a job that checks out pull request code holds no write permission, no token
  and no secret, and runs the action in mode measure with `github-token: ""`; a job holding a write permission
  checks out only the default branch, not on the GPU runner, and reads no output of a job that ran pull request
  code; nothing uses the Actions cache. Each rule is shown to catch a broken copy of a good file.
- by running the jobs' conditions and outputs against webhook payloads (tests/fixtures/webhooks): a fork's
  pull request reaches the GPU runner only through the `run-canary` label, on the commit of that event.

The shell scripts that bind an approval to a commit (rerun.yml's resolve, trust-gate.yml's dispatch) run
against a fake `gh`. Last, scripts/lint-workflows.sh (actionlint + shellcheck, zizmor, GitHub's schemas)
passes on the examples and is shown to fail on a broken workflow, once per tool.
"""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from canary_action.github.inputs import read_inputs
from tests.workflow_expressions import Expression, interpolate, run_jobs, truthy

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "docs" / "examples"
HOOKS = ROOT / "tests" / "fixtures" / "webhooks"
FILES = sorted(EXAMPLES.glob("*.yml"))
EXPECTED = {"pr-canary", "nightly", "rerun", "trust-gate"}
REMOVED = ("fork-safe-run.yml", "fork-safe-report.yml")
LINT_BIN = Path(sys.executable).parent

OURS = re.compile(r"^rlhf-canary/rlhf-canary(/report)?@v1$")
SHA_PINNED = re.compile(r"^[\w.-]+/[\w.-]+(/[\w./-]+)?@[0-9a-f]{40}$")
VERSION_COMMENT = re.compile(r"@[0-9a-f]{40} # v\d+\.\d+\.\d+$")
UPLOAD, CHECKOUT = "actions/upload-artifact", "actions/checkout"
RUN_LABEL = "run-canary"
DEFAULT_BRANCH = "${{ github.event.repository.default_branch }}"
#: Triggers that run the workflow file of the pull request (its merge commit or head): whatever our copy says,
#: the pull request's copy decides.
PR_CONTROLLED = ("pull_request", "pull_request_review", "pull_request_review_comment", "merge_group")
#: Triggers that run the workflow file as it is on the default branch (push: when restricted to it). Any other
#: (workflow_call: whatever the caller's trigger is) keeps a GPU job out.
DEFAULT_BRANCH_FILE = {"push", "schedule", "workflow_dispatch", "workflow_run", "issue_comment", "pull_request_target"}
#: Our two actions: the container action (measure/run) and the light report-only composite (report/action.yml).
ACTION_INPUTS = {
    path: set(yaml.safe_load((ROOT / path / "action.yml").read_text(encoding="utf-8"))["inputs"])
    for path in ("", "report")
}


def our_action(step: dict[str, Any]) -> str:
    """ "" for the container action, "report" for the composite."""
    return "report" if str(step.get("uses", "")).startswith("rlhf-canary/rlhf-canary/report@") else ""


@cache
def load(path: Path) -> dict[str, Any]:
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert isinstance(doc, dict), path
    return doc


def example(stem: str) -> dict[str, Any]:
    return load(EXAMPLES / f"{stem}.yml")


def triggers(doc: dict[str, Any]) -> dict[str, Any]:
    """The `on:` block as a mapping (PyYAML reads the bare key `on` as True)."""
    on = doc.get("on", doc.get(True))
    if isinstance(on, str):
        return {on: None}
    if isinstance(on, list):
        return dict.fromkeys(on)
    assert isinstance(on, dict)
    return on


def jobs(path: Path) -> list[tuple[str, dict[str, Any]]]:
    return list(load(path)["jobs"].items())


def steps(job: dict[str, Any]) -> list[dict[str, Any]]:
    return list(job.get("steps") or [])


def is_ours(step: dict[str, Any]) -> bool:
    return bool(OURS.match(str(step.get("uses", ""))))


def uses(step: dict[str, Any], action: str) -> bool:
    return str(step.get("uses", "")).startswith(action + "@")


def ours_in(job: dict[str, Any]) -> dict[str, Any]:
    (step,) = filter(is_ours, steps(job))
    return step


def checkouts(job: dict[str, Any]) -> list[dict[str, Any]]:
    return [s for s in steps(job) if uses(s, CHECKOUT)]


def on_gpu_runner(job: dict[str, Any]) -> bool:
    """A self-hosted runner: by label, or by runner group (GitHub-hosted larger runners aside)."""
    labels = job.get("runs-on")
    if isinstance(labels, dict):
        return "group" in labels or on_gpu_runner({"runs-on": labels.get("labels")})
    return "self-hosted" in (labels if isinstance(labels, list) else [labels])


def permissions(job: dict[str, Any], doc: dict[str, Any]) -> dict[str, str] | str | None:
    return job["permissions"] if "permissions" in job else doc.get("permissions")


def writes(job: dict[str, Any], doc: dict[str, Any] | None = None) -> list[str]:
    """The scopes the job can write; no permissions anywhere is the repository's default, which may write."""
    granted = permissions(job, doc or {})
    if granted is None or granted == "write-all":
        return ["(the repository's default token permissions)" if granted is None else "write-all"]
    if isinstance(granted, str):
        return []
    return sorted(scope for scope, level in granted.items() if level == "write")


def trains(step: dict[str, Any], doc: dict[str, Any]) -> bool:
    """The container action trains in modes measure, run and bisect, and in mode auto on every event but
    workflow_run; the composite never does."""
    if our_action(step) == "report":
        return False
    mode = (step.get("with") or {}).get("mode", "auto")
    return mode in ("measure", "run", "bisect") or (mode == "auto" and "workflow_run" not in triggers(doc))


def checkout_ref(step: dict[str, Any]) -> str | None:
    ref = (step.get("with") or {}).get("ref")
    return None if ref is None else " ".join(str(ref).split())


def checks_out_pull_request_code(job: dict[str, Any]) -> bool:
    """A checkout of a ref chosen by the event or an earlier job (the gate's or resolve's SHA, the pull request's
    head, refs/pull/...) or of another repository. No ref is the event's own commit (the default branch on
    push and schedule, the base branch on pull_request_target); the default branch by name is trusted."""
    return any(
        checkout_ref(s) not in (None, DEFAULT_BRANCH) or "repository" in (s.get("with") or {}) for s in checkouts(job)
    )


def ids(paths: list[Path]) -> list[str]:
    return [p.stem for p in paths]


def test_the_examples_are_the_documented_set() -> None:
    assert {p.stem for p in FILES} == EXPECTED
    readme = (EXAMPLES / "README.md").read_text(encoding="utf-8")
    for path in FILES:
        assert f"`{path.name}`" in readme, f"docs/examples/README.md does not describe {path.name}"


def test_nothing_names_a_removed_example() -> None:
    """pr-canary.yml took over the fork-safe pair's job (the run-canary label): no doc or message may send a
    reader to them."""
    texts = [ROOT / "README.md", *(ROOT / "docs").rglob("*.md"), *(ROOT / "docs").rglob("*.yml")]
    texts += [*(ROOT / "canary_action").rglob("*.py"), ROOT / "action.yml", ROOT / "report" / "action.yml"]
    stale = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in texts
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if any(name in line for name in REMOVED)
    ]
    assert not stale, f"{', '.join(REMOVED)} are gone (pr-canary.yml covers forks): update {stale}"


@pytest.mark.parametrize("path", FILES, ids=ids(FILES))
def test_each_starts_by_saying_what_it_does_why_it_is_safe_and_what_to_change(path: Path) -> None:
    header = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            break
        header.append(line)
    text = "\n".join(header)
    assert len(header) >= 5, f"{path.name} starts without a comment block"
    for heading in ("What it does", "Why it is safe", "What to change when copying"):
        assert f"# {heading}" in text, f"{path.name}: the header needs a `{heading}` part"


@pytest.mark.parametrize("path", FILES, ids=ids(FILES))
def test_every_job_states_its_permissions_and_a_timeout(path: Path) -> None:
    doc = load(path)
    assert doc.get("permissions") == {}, "the top level grants nothing; each job asks for its own"
    for name, job in jobs(path):
        assert isinstance(job.get("permissions"), dict), f"job {name} has no permissions block"
        assert isinstance(job.get("timeout-minutes"), int), f"job {name} has no timeout-minutes"
        for scope, level in job["permissions"].items():
            assert level in ("read", "write"), f"job {name}: {scope}: {level}"


@pytest.mark.parametrize("path", FILES, ids=ids(FILES))
def test_actions_are_pinned_by_sha_and_ours_by_its_major_tag(path: Path) -> None:
    lines = path.read_text(encoding="utf-8").splitlines()
    for name, job in jobs(path):
        assert "uses" not in job, f"job {name}: a reusable workflow would search baselines under another file"
        for step in steps(job):
            ref = step.get("uses")
            if ref is None or is_ours(step):
                continue
            assert SHA_PINNED.match(ref), f"job {name}: {ref} is not pinned by a full commit SHA"
            line = next(text for text in lines if f"uses: {ref}" in text)
            assert VERSION_COMMENT.search(line), f"job {name}: {ref} needs its version in a `# vX.Y.Z` comment"
    assert any(is_ours(s) for _, job in jobs(path) for s in steps(job)) or path.stem == "trust-gate"


@pytest.mark.parametrize("path", FILES, ids=ids(FILES))
def test_checkouts_leave_no_credentials_behind(path: Path) -> None:
    for name, job in jobs(path):
        for step in checkouts(job):
            assert (step.get("with") or {}).get("persist-credentials") is False, f"job {name}"


@pytest.mark.parametrize("path", FILES, ids=ids(FILES))
def test_every_training_job_uploads_its_results_whatever_happened(path: Path) -> None:
    doc = load(path)
    for name, job in jobs(path):
        job_steps = steps(job)
        for i, step in enumerate(job_steps):
            if not is_ours(step):
                continue
            config = step.get("with") or {}
            if not trains(step, doc):
                assert not on_gpu_runner(job), f"job {name}: report mode needs no GPU runner"
                continue
            assert on_gpu_runner(job), f"job {name}: a training canary runs on the self-hosted GPU runner"
            assert step.get("id"), f"job {name}: the canary step needs an id for its outputs"
            upload = job_steps[i + 1] if i + 1 < len(job_steps) else {}
            assert uses(upload, UPLOAD), f"job {name}: the canary step must be followed by {UPLOAD}"
            condition = str(upload.get("if", ""))
            assert "!cancelled()" in condition or "always()" in condition, f"job {name}: upload also on failure"
            given = upload.get("with") or {}
            assert f"steps.{step['id']}.outputs.artifact-name" in str(given.get("name"))
            output_dir = str(config.get("output-dir", "canary-output")).rstrip("/")
            assert str(given.get("path", "")).rstrip("/") == output_dir


@pytest.mark.parametrize("path", FILES, ids=ids(FILES))
def test_with_keys_are_inputs_of_action_yml_and_literal_values_parse(path: Path) -> None:
    for name, job in jobs(path):
        for step in filter(is_ours, steps(job)):
            given = {str(k): str(v) for k, v in (step.get("with") or {}).items()}
            unknown = set(given) - ACTION_INPUTS[our_action(step)]
            assert not unknown, f"job {name}: {sorted(unknown)} not inputs of {our_action(step) or '.'}/action.yml"
            literal = {k: v for k, v in given.items() if "${{" not in v}
            read_inputs({f"INPUT_{k.upper()}": v for k, v in literal.items()})  # raises on a bad value


# --- the trust model, as rules over the files ----------------------------------------------------------------


def trust_violations(doc: dict[str, Any]) -> list[str]:
    """What breaks the trust model of docs/examples/README.md in one workflow; empty when nothing does."""
    pr_code = {name for name, job in doc["jobs"].items() if checks_out_pull_request_code(job)}
    found: list[str] = []
    for name, job in doc["jobs"].items():
        found += gpu_reached_from_pull_request_files(name, job, triggers(doc))
        if name in pr_code:
            found += pull_request_code_near_a_token(name, job, doc)
        if writes(job, doc):
            found += writer_near_pull_request_code(name, job, doc, pr_code)
        found += [
            f"job {name} uses the Actions cache, which pull request code can write to in the default branch's scope "
            "(ACTIONS_RUNTIME_TOKEN)"
            for step in steps(job)
            if str(step.get("uses", "")).startswith("actions/cache") or "cache" in (step.get("with") or {})
        ]
    return found


def gpu_reached_from_pull_request_files(name: str, job: dict[str, Any], events: dict[str, Any]) -> list[str]:
    """A GPU job is reachable only from triggers that run the default branch's copy of the workflow file."""
    if not on_gpu_runner(job):
        return []
    found = []
    for event, spec in events.items():
        if event in PR_CONTROLLED:
            found.append(
                f"job {name} runs on the GPU runner, and on `{event}` GitHub runs the pull request's copy of this "
                "workflow file: the pull request can change any condition, or add a GPU job of its own"
            )
        elif event == "push" and (spec or {}).get("branches") != ["main"]:
            found.append(
                f"job {name} runs on the GPU runner on a push to any branch, and each branch runs its own copy of "
                "this workflow file: `push: branches: [main]`"
            )
        elif event not in DEFAULT_BRANCH_FILE:
            found.append(f"job {name} runs on the GPU runner on `{event}`, not known to run the default branch's file")
    return found


def pull_request_code_near_a_token(name: str, job: dict[str, Any], doc: dict[str, Any]) -> list[str]:
    """The job that runs pull request code holds nothing that writes, and measures only."""
    said = f"job {name} checks out pull request code and"
    found = [f"{said} holds a write permission: {writes(job, doc)}"] if writes(job, doc) else []
    text = yaml.safe_dump(job)
    if "secrets." in text or "github.token" in text:
        found.append(f"{said} hands it a token or secret")
    for step in filter(is_ours, steps(job)):
        given = step.get("with") or {}
        if "github-token" not in given:
            found.append(f'{said} does not pass `github-token: ""` to the action (its default is the job\'s token)')
        elif given["github-token"] != "":
            found.append(f"{said} passes a token to the action")
        if given.get("mode") != "measure":
            found.append(f"{said} runs the action in mode {given.get('mode', 'auto')}, not mode measure")
    return found


def writer_near_pull_request_code(name: str, job: dict[str, Any], doc: dict[str, Any], pr_code: set[str]) -> list[str]:
    """The job with a write permission runs no pull request code: the default branch only, not on the GPU runner
    (which runs pull request code), and no output of a job that ran it."""
    found = []
    for step in checkouts(job):
        ref = checkout_ref(step)
        if ref != DEFAULT_BRANCH or "repository" in (step.get("with") or {}):
            what = "the event's ref" if ref is None else ref
            found.append(f"job {name} holds a write permission and checks out {what}, not `ref: {DEFAULT_BRANCH}`")
    if on_gpu_runner(job):
        found.append(f"job {name} holds a write permission on the GPU runner, where pull request code runs")
    text = yaml.safe_dump(job)
    found += [
        f"job {name} holds a write permission and reads outputs of job {other}, which ran pull request code"
        for other in sorted(pr_code)
        if f"needs.{other}.outputs" in text
    ]
    return found


@pytest.mark.parametrize("path", FILES, ids=ids(FILES))
def test_the_examples_keep_the_trust_model(path: Path) -> None:
    assert trust_violations(load(path)) == []


def _add_trigger(event: str) -> Callable[[dict[str, Any]], object]:
    return lambda doc: triggers(doc).update({event: None})


def _insert_step(job: str, step: dict[str, Any]) -> Callable[[dict[str, Any]], object]:
    return lambda doc: doc["jobs"][job]["steps"].insert(0, step)


PR_CHECKOUT = {
    "uses": f"{CHECKOUT}@de0fac2e4500dabe0009e67214ff5f5447ce83dd",
    "with": {"ref": "refs/pull/${{ github.event.issue.number }}/head", "persist-credentials": False},
}
CACHE = {"uses": "actions/cache@0400d5f644dc74513175e3cd8d07132dd4860809", "with": {"path": "~/.cache", "key": "k"}}

#: (example, how it is broken, what trust_violations must say): each a small bad workflow made from a good one.
BROKEN: dict[str, tuple[str, Callable[[dict[str, Any]], object], str]] = {
    **{
        f"gpu-job-on-{event}": ("pr-canary", _add_trigger(event), f"on `{event}` GitHub runs the pull request's copy")
        for event in PR_CONTROLLED
    },
    "nightly-on-pull_request": ("nightly", _add_trigger("pull_request"), "the pull request's copy"),
    "gpu-job-in-a-reusable-workflow": ("nightly", _add_trigger("workflow_call"), "not known to run the default branch"),
    "gpu-job-on-a-push-to-any-branch": (
        "pr-canary",
        lambda d: triggers(d)["push"].pop("branches"),
        "push to any branch",
    ),
    "measure-writes-comments": (
        "pr-canary",
        lambda d: d["jobs"]["measure"]["permissions"].update({"pull-requests": "write"}),
        "checks out pull request code and holds a write permission: ['pull-requests']",
    ),
    "rerun-measure-writes-checks": (
        "rerun",
        lambda d: d["jobs"]["measure"]["permissions"].update({"checks": "write"}),
        "checks out pull request code and holds a write permission: ['checks']",
    ),
    "measure-inherits-default-permissions": (
        "pr-canary",
        lambda d: [d["jobs"]["measure"].pop("permissions"), d.pop("permissions")],
        'holds a write permission: ["(the repository\'s default token permissions)"]',
    ),
    "measure-gets-the-default-token": (
        "pr-canary",
        lambda d: ours_in(d["jobs"]["measure"])["with"].pop("github-token"),
        'does not pass `github-token: ""`',
    ),
    "measure-passes-the-token": (
        "rerun",
        lambda d: ours_in(d["jobs"]["measure"])["with"].update({"github-token": "${{ github.token }}"}),
        "passes a token to the action",
    ),
    "measure-gets-a-secret": (
        "pr-canary",
        lambda d: ours_in(d["jobs"]["measure"]).update({"env": {"HF_TOKEN": "${{ secrets.HF_TOKEN }}"}}),
        "hands it a token or secret",
    ),
    "measure-in-mode-run": (
        "pr-canary",
        lambda d: ours_in(d["jobs"]["measure"])["with"].update({"mode": "run"}),
        "in mode run, not mode measure",
    ),
    "publish-checks-out-the-gate-sha": (
        "pr-canary",
        lambda d: checkouts(d["jobs"]["publish"])[0]["with"].update({"ref": "${{ needs.gate.outputs.sha }}"}),
        "holds a write permission and checks out ${{ needs.gate.outputs.sha }}",
    ),
    "publish-checks-out-the-event-ref": (
        "pr-canary",
        lambda d: checkouts(d["jobs"]["publish"])[0]["with"].pop("ref"),
        "holds a write permission and checks out the event's ref",
    ),
    "rerun-publish-checks-out-the-pr-head": (
        "rerun",
        lambda d: checkouts(d["jobs"]["publish"])[0]["with"].update({"ref": "${{ needs.resolve.outputs.head-sha }}"}),
        "holds a write permission and checks out ${{ needs.resolve.outputs.head-sha }}",
    ),
    "trust-gate-checks-out-the-pr": (
        "trust-gate",
        _insert_step("dispatch", PR_CHECKOUT),
        "checks out pull request code and holds a write permission: ['actions']",
    ),
    "publish-reads-an-output-of-measure": (
        "pr-canary",
        lambda d: ours_in(d["jobs"]["publish"])["with"].update({"head-sha": "${{ needs.measure.outputs.sha }}"}),
        "reads outputs of job measure",
    ),
    "nightly-writes-on-the-gpu-runner": (
        "nightly",
        lambda d: d["jobs"]["nightly"]["permissions"].update({"checks": "write"}),
        "holds a write permission on the GPU runner",
    ),
    "publish-on-the-gpu-runner": (
        "rerun",
        lambda d: d["jobs"]["publish"].update({"runs-on": ["self-hosted", "linux", "gpu"]}),
        "holds a write permission on the GPU runner",
    ),
    "measure-uses-the-cache": ("pr-canary", _insert_step("measure", CACHE), "uses the Actions cache"),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_the_trust_rules_catch_a_broken_copy(case: str) -> None:
    stem, breaks, message = BROKEN[case]
    doc = copy.deepcopy(example(stem))
    assert trust_violations(doc) == []
    breaks(doc)
    found = trust_violations(doc)
    assert any(message in line for line in found), f"{case}: {found}"


# --- the trust model, by running the jobs against webhook payloads ---------------------------------------------

PUSHED = "d" * 40
APPROVED = "c" * 40  # the head commit as of the labeling event, unlike the payload's older head


def hook(name: str) -> dict[str, Any]:
    event = json.loads((HOOKS / name).read_text(encoding="utf-8"))
    assert isinstance(event, dict)
    return event


def pull_request_target(payload: str, action: str | None = None, *, label: str | None = None) -> dict[str, Any]:
    """The `github` context of a pull_request_target run: the pull_request payload, the base branch's ref."""
    event = hook(payload)
    if action is not None:
        event["action"] = action
    if label is not None:
        event["label"] = {"name": label}
    base = event["pull_request"]["base"]
    return {
        "event_name": "pull_request_target",
        "event": event,
        "repository": event["repository"]["full_name"],
        "sha": base["sha"],
        "ref": f"refs/heads/{base['ref']}",
        "run_id": "4242",
    }


def push_to_main() -> dict[str, Any]:
    event = {**hook("push.json"), "ref": "refs/heads/main", "after": PUSHED}
    return {"event_name": "push", "event": event, "repository": event["repository"]["full_name"], "sha": PUSHED}


def fires(doc: dict[str, Any], github: dict[str, Any]) -> bool:
    """Whether the event starts the workflow at all (its `types:` filter)."""
    events = triggers(doc)
    if github["event_name"] not in events:
        return False
    types = (events[github["event_name"]] or {}).get("types")
    return types is None or github["event"].get("action") in types


def measured(doc: dict[str, Any], github: dict[str, Any], **results: str) -> dict[str, str] | None:
    """What the measure job checks out and what publish reports, or None when no GPU job runs."""
    if not fires(doc, github):
        return None
    ran = run_jobs(doc, github, results)
    gpu = [name for name, job in doc["jobs"].items() if on_gpu_runner(job) and ran[name].ran]
    if not gpu:
        assert not ran["publish"].ran, "publish without a measurement"
        return None
    (name,) = gpu
    context = {"github": github, "needs": {n: {"result": r.result, "outputs": r.outputs} for n, r in ran.items()}}
    said = {"ref": interpolate(str(checkout_ref(checkouts(doc["jobs"][name])[0])), context)}
    if ran["publish"].ran:
        given = ours_in(doc["jobs"]["publish"])["with"]
        said |= {key: interpolate(str(given[key]), context) for key in ("head-sha", "pr-number", "measured-run-id")}
    return said


FORK_EVENTS = [
    pull_request_target("pull_request.fork.json", "opened"),
    pull_request_target("pull_request.fork.json", "synchronize"),
    pull_request_target("pull_request.fork.json", "reopened"),
    pull_request_target("pull_request.fork.json", "edited"),
    pull_request_target("pull_request.fork.json", "labeled", label="needs-review"),
    pull_request_target("pull_request.fork.json", "unlabeled", label=RUN_LABEL),  # taking the approval back
]


@pytest.mark.parametrize("path", FILES, ids=ids(FILES))
@pytest.mark.parametrize("github", FORK_EVENTS, ids=[g["event"]["action"] for g in FORK_EVENTS])
def test_a_forks_pull_request_never_reaches_the_gpu_runner_by_itself(path: Path, github: dict[str, Any]) -> None:
    doc = load(path)
    if fires(doc, github):
        ran = run_jobs(doc, github)
        assert not [name for name, job in doc["jobs"].items() if on_gpu_runner(job) and ran[name].ran]


def test_the_run_canary_label_measures_the_commit_of_that_event() -> None:
    github = pull_request_target("pull_request.fork.json", "labeled", label=RUN_LABEL)
    github["event"]["pull_request"]["head"]["sha"] = APPROVED
    number = str(github["event"]["pull_request"]["number"])
    said = measured(example("pr-canary"), github)
    assert said == {"ref": APPROVED, "head-sha": APPROVED, "pr-number": number, "measured-run-id": "4242"}


@pytest.mark.parametrize(
    "payload", ["pull_request.opened.json", "pull_request.synchronize.json", "pull_request.reopened.json"]
)
def test_a_branch_of_this_repository_is_measured_on_its_head(payload: str) -> None:
    github = pull_request_target(payload)
    head = github["event"]["pull_request"]["head"]["sha"]
    said = measured(example("pr-canary"), github)
    assert said == {"ref": head, "head-sha": head, "pr-number": "2", "measured-run-id": "4242"}
    other_label = pull_request_target(payload, "labeled", label="documentation")
    assert measured(example("pr-canary"), other_label) is None, "any other label measures nothing"


def test_a_push_to_main_measures_its_commit_and_publishes_nothing() -> None:
    assert measured(example("pr-canary"), push_to_main()) == {"ref": PUSHED}
    dispatch = {**push_to_main(), "event_name": "workflow_dispatch", "event": hook("workflow_dispatch.json")}
    assert measured(example("pr-canary"), dispatch) == {"ref": PUSHED}


def test_publish_reports_a_crashed_measurement_but_not_a_cancelled_one() -> None:
    github = pull_request_target("pull_request.opened.json")
    said = measured(example("pr-canary"), github, measure="failure")
    assert said is not None
    assert "head-sha" in said
    ran = run_jobs(example("pr-canary"), github, {"measure": "cancelled"})
    assert not ran["publish"].ran


@pytest.mark.parametrize("stem", ["pr-canary", "rerun"])
def test_publish_reports_the_measured_commit_with_the_trusted_config(stem: str) -> None:
    """The check goes on the commit measure checked out, of this run, under the default branch's config."""
    doc = example(stem)
    measure, publish = doc["jobs"]["measure"], doc["jobs"]["publish"]
    told, reported = ours_in(measure)["with"], ours_in(publish)["with"]
    assert reported["measured-run-id"] == "${{ github.run_id }}"
    assert reported["head-sha"] == checkout_ref(checkouts(measure)[0])
    for key in ("config", "tier", "thresholds"):
        assert reported.get(key) == told.get(key), f"{key}: the same in measure and publish"
    (trusted,) = checkouts(publish)
    sparse = str(trusted["with"].get("sparse-checkout", "")).split()
    assert [reported["config"], *filter(None, [reported.get("thresholds")])] == sparse


def test_the_slash_command_needs_a_maintainer_on_a_pull_request() -> None:
    (_, job), *_ = jobs(EXAMPLES / "trust-gate.yml")

    def comment(body: str, association: str, *, on_pull_request: bool = True) -> dict[str, Any]:
        issue: dict[str, Any] = {"number": 7}
        if on_pull_request:
            issue["pull_request"] = {"url": "https://api.github.com/repos/acme/models/pulls/7"}
        event = {"issue": issue, "comment": {"body": body, "author_association": association}}
        return {"event_name": "issue_comment", "repository": "acme/models", "event": event}

    def runs(github: dict[str, Any]) -> bool:
        return truthy(Expression(str(job["if"])).evaluate({"github": github}))

    for association in ("OWNER", "MEMBER", "COLLABORATOR"):
        assert runs(comment(f"/canary {APPROVED}", association))
    for association in ("CONTRIBUTOR", "FIRST_TIME_CONTRIBUTOR", "NONE"):
        assert not runs(comment(f"/canary {APPROVED}", association))
    assert not runs(comment(f"/canary {APPROVED}", "OWNER", on_pull_request=False))
    assert not runs(comment("looks good, /canary later", "OWNER"))
    assert runs(comment("/canary", "OWNER")), "a bare /canary runs, to be refused with the usage"


@pytest.mark.parametrize("path", FILES, ids=ids(FILES))
def test_comment_and_workflow_run_triggers_check_out_nothing(path: Path) -> None:
    """issue_comment and workflow_run run with this repository's token and nothing of the pull request to
    look at: they start or report, and check out nothing."""
    if not {"issue_comment", "workflow_run"} & set(triggers(load(path))):
        return
    for name, job in jobs(path):
        assert not on_gpu_runner(job), f"job {name}"
        assert not checkouts(job), f"job {name} checks out code"


GOOD_NIGHT = "9" * 40


def nightly_jobs(github: dict[str, Any], results: dict[str, str], **outputs: str) -> dict[str, dict[str, str] | None]:
    """nightly.yml's jobs that run, each with the `with:` of its step of ours as the runner would render it."""
    doc = example("nightly")
    ran = run_jobs(doc, github, results, {"nightly": outputs})
    context = {"github": github, "inputs": github["event"].get("inputs"),
               "needs": {n: {"result": r.result, "outputs": r.outputs} for n, r in ran.items()}}  # fmt: skip
    said: dict[str, dict[str, str] | None] = {}
    for name, job in doc["jobs"].items():
        if ran[name].ran:
            if not any(is_ours(step) for step in steps(job)):  # pages: GitHub's deploy action alone
                said[name] = None
                continue
            given = ours_in(job).get("with") or {}
            commits = ("good", "bad", "bisect-bad", "mode")
            said[name] = {k: interpolate(str(v), context) for k, v in given.items() if k in commits}
    return said


def schedule() -> dict[str, Any]:
    return {"event_name": "schedule", "event": {"schedule": "23 2 * * *"}, "sha": PUSHED, "run_id": "4242"}


def test_the_nightly_bisects_a_regression_from_its_newest_baseline_to_its_commit() -> None:
    failed = {"nightly": "failure"}
    said = nightly_jobs(schedule(), failed, verdict="regression", **{"baseline-sha": GOOD_NIGHT})
    assert said == {
        "nightly": {"mode": "run"},
        "bisect": {"mode": "bisect", "good": GOOD_NIGHT, "bad": PUSHED},
        "publish-bisect": {"bisect-bad": PUSHED},
        "history": {"mode": "history"},  # a regression is history too
        "pages": None,
    }
    bisect_failed = {**failed, "bisect": "failure"}
    assert "publish-bisect" not in nightly_jobs(schedule(), bisect_failed, verdict="regression",
                                                **{"baseline-sha": GOOD_NIGHT})  # fmt: skip


@pytest.mark.parametrize(
    ("result", "outputs"),
    [
        ("success", {"verdict": "pass", "baseline-sha": GOOD_NIGHT}),
        ("failure", {"verdict": "crashed", "baseline-sha": GOOD_NIGHT}),
        ("failure", {"verdict": "regression", "baseline-sha": ""}),  # no baseline to start from
        ("failure", {"verdict": "regression", "baseline-sha": PUSHED}),  # no commit since it: nothing to bisect
        ("cancelled", {"verdict": "", "baseline-sha": ""}),
    ],
    ids=["pass", "crash", "no-baseline", "no-new-commit", "cancelled"],
)
def test_the_nightly_bisects_nothing_else(result: str, outputs: dict[str, str]) -> None:
    ran = set(nightly_jobs(schedule(), {"nightly": result}, **outputs))
    assert ran <= {"nightly", "history", "pages"}
    assert ("history" in ran) == (result != "cancelled")  # every night that measured, crashed ones too


def test_a_dispatch_with_good_runs_only_the_bisect() -> None:
    dispatch = {**schedule(), "event_name": "workflow_dispatch", "event": {"inputs": {"good": GOOD_NIGHT, "bad": ""}}}
    assert nightly_jobs(dispatch, {}) == {
        "bisect": {"mode": "bisect", "good": GOOD_NIGHT, "bad": PUSHED},
        "publish-bisect": {"bisect-bad": PUSHED},
    }
    dispatch["event"]["inputs"] = {"good": GOOD_NIGHT, "bad": "v1.2.0"}
    assert nightly_jobs(dispatch, {}) == {
        "bisect": {"mode": "bisect", "good": GOOD_NIGHT, "bad": "v1.2.0"},
        "publish-bisect": {"bisect-bad": "v1.2.0"},  # the same trusted expression: it chooses the issue
    }
    dispatch["event"]["inputs"] = {"good": "", "bad": ""}
    assert set(nightly_jobs(dispatch, {})) == {"nightly", "history", "pages"}


def test_the_history_jobs_write_only_the_branch_and_deploy_only_pages() -> None:
    """The history job (docs/history.md) holds contents: write and runs no commit's code: the default branch's
    config, the light report action in mode history, the measured artifact of this run; pages deploys, no more."""
    for stem in ("nightly", "pr-canary"):
        doc = example(stem)
        history, pages = doc["jobs"]["history"], doc["jobs"]["pages"]
        # a push's merged pull request, and its check run
        ledger = {"checks": "read", "pull-requests": "read"} if stem == "pr-canary" else {}
        assert history["permissions"] == {"actions": "read", "contents": "write", **ledger}
        # never a group shared between runs: a pending history job cancelled by a newer one would lose its run
        group = history.get("concurrency", {}).get("group", "${{ github.run_id }}")
        assert "${{ github.run_id }}" in group
        assert history["runs-on"] == "ubuntu-latest"
        (checkout,) = checkouts(history)
        assert checkout_ref(checkout) == "${{ github.event.repository.default_branch }}"
        step = ours_in(history)
        assert str(step["uses"]).endswith("/report@v1")
        assert step["with"]["mode"] == "history"
        assert step["with"]["measured-run-id"] == "${{ github.run_id }}"
        assert pages["permissions"] == {"pages": "write", "id-token": "write"}
        assert [str(s["uses"]).split("@")[0] for s in steps(pages)] == ["actions/deploy-pages"]


@pytest.mark.parametrize(
    "github",
    [
        pull_request_target("pull_request.opened.json"),
        pull_request_target("pull_request.fork.json", "labeled", label=RUN_LABEL),
    ],
    ids=["branch", "fork-labeled"],
)
def test_a_pull_requests_run_never_reaches_the_history(github: dict[str, Any]) -> None:
    ran = run_jobs(example("pr-canary"), github)
    assert ran["measure"].ran
    assert not ran["history"].ran
    assert not ran["pages"].ran
    assert run_jobs(example("pr-canary"), push_to_main())["history"].ran


def test_the_bisect_publisher_reads_the_trusted_config_and_no_output_of_a_gpu_job() -> None:
    doc = example("nightly")
    bisect, publish = doc["jobs"]["bisect"], doc["jobs"]["publish-bisect"]
    assert (checkouts(bisect)[0]["with"]["fetch-depth"], ours_in(bisect)["with"]["github-token"]) == (0, "")
    assert bisect["permissions"] == {"contents": "read"}
    assert publish["permissions"] == {"actions": "read", "contents": "read", "issues": "write"}
    told, reported = ours_in(bisect)["with"], ours_in(publish)["with"]
    assert reported == {"config": told["config"], "measured-run-id": "${{ github.run_id }}", "bisect-bad": told["bad"]}
    assert str(checkouts(publish)[0]["with"]["sparse-checkout"]).split() == [reported["config"]]
    assert "needs." not in yaml.safe_dump(publish).replace("needs.bisect.result", "")


# --- how the files refer to each other ---------------------------------------------------------------------


def test_dispatched_workflows_exist_and_take_the_inputs_given() -> None:
    dispatch = re.compile(r"^\s*gh workflow run (\S+)((?: [^\n]*)?)", re.M)  # a command, not a message
    found = 0
    for path in FILES:
        for _, job in jobs(path):
            for step in steps(job):
                for target, rest in dispatch.findall(str(step.get("run", ""))):
                    found += 1
                    inputs = triggers(load(EXAMPLES / target))["workflow_dispatch"]["inputs"]
                    given = set(re.findall(r"-f ([\w-]+)=", rest))
                    assert given <= set(inputs), f"{path.name} passes {given - set(inputs)} to {target}"
                    required = {k for k, v in inputs.items() if v.get("required")}
                    assert required <= given, f"{path.name} leaves {required - given} of {target} out"
                    assert "head-sha" in given, f"{path.name}: the approval names its commit"
    assert found, "trust-gate.yml starts rerun.yml"


def test_pull_request_canaries_produce_their_own_baselines() -> None:
    """The action searches baselines among runs of the measured workflow file on the default branch."""
    for path in FILES:
        doc = load(path)
        events = triggers(doc)
        training = [s for _, job in jobs(path) for s in steps(job) if is_ours(s) and trains(s, doc)]
        if training and "pull_request_target" in events:
            assert "push" in events, f"{path.name} measures pull requests but never the default branch"


def test_rerun_never_searches_its_own_runs_for_baselines() -> None:
    """rerun.yml's runs are workflow_dispatch runs on the default branch that measured a pull request: were its
    publish job to search this file's runs, earlier pull requests would be its baselines. So it always names
    one run of pr-canary.yml, and resolve refuses when there is none (test_rerun_resolve below)."""
    reported = ours_in(example("rerun")["jobs"]["publish"])["with"]
    assert reported["baseline-run-id"] == "${{ needs.resolve.outputs.baseline-run-id }}"


def test_rerun_takes_its_baseline_from_the_pull_request_canary() -> None:
    doc = example("rerun")
    workflow = doc["env"]["CANARY_WORKFLOW"]
    assert "push" in triggers(load(EXAMPLES / workflow))
    config = {s["with"]["config"] for p in (EXAMPLES / "rerun.yml", EXAMPLES / workflow) for s in canary_steps(p)}
    assert len(config) == 1, "the same config, or the artifact names differ and no baseline is found"


def canary_steps(path: Path) -> list[dict[str, Any]]:
    return [s for _, job in jobs(path) for s in steps(job) if is_ours(s)]


# --- the scripts that bind an approval to a commit, against a fake gh ----------------------------------------

HEAD = "a" * 40
OLD = "b" * 40
#: Answers what the two scripts ask: the pull request's head (as rerun.yml's jq and as trust-gate.yml's), the
#: commenter's permission, the baseline run; logs every call.
FAKE_GH = """#!/bin/sh
echo "$*" >> "$FAKE_LOG"
case "$*" in
  *collaborators*) echo "$FAKE_PERMISSION" ;;
  *"--jq .head.sha"*) echo "$FAKE_HEAD" ;;
  "api "*) printf '%s\\t%s\\n' "$FAKE_HEAD" "$FAKE_HEAD_REPO" ;;
  "run list"*) printf '%s\\n' "$FAKE_BASELINE" ;;
esac
"""


def script(stem: str, job: str) -> str:
    (step,) = (s for s in steps(example(stem)["jobs"][job]) if "run" in s)
    return str(step["run"])


def run_script(tmp_path: Path, source: str, **env: str) -> tuple[subprocess.CompletedProcess[str], str, str]:
    """Runs a workflow's `run:` script as the runner does (bash -e); returns it, GITHUB_OUTPUT and gh's log."""
    gh = tmp_path / "bin" / "gh"
    gh.parent.mkdir(exist_ok=True)
    gh.write_text(FAKE_GH, encoding="utf-8")
    gh.chmod(0o755)
    files = {name: tmp_path / name for name in ("output", "summary", "gh.log")}
    for path in files.values():
        path.write_text("", encoding="utf-8")
    defaults = {"GH_REPO": "acme/models", "DEFAULT_BRANCH": "main", "PR_NUMBER": "2", "FAKE_HEAD": HEAD,
                "FAKE_HEAD_REPO": "acme/models", "FAKE_BASELINE": "99", "FAKE_PERMISSION": "write",
                "CANARY_WORKFLOW": "pr-canary.yml"}  # fmt: skip
    full_env = {
        "PATH": f"{gh.parent}:/usr/bin:/bin",
        "GITHUB_OUTPUT": str(files["output"]),
        "GITHUB_STEP_SUMMARY": str(files["summary"]),
        "FAKE_LOG": str(files["gh.log"]),
        **defaults,
        **env,
    }
    done = subprocess.run(["bash", "-e", "-c", source], env=full_env, capture_output=True, text=True, check=False)
    read = [files[name].read_text(encoding="utf-8") for name in ("output", "gh.log")]
    return done, read[0], read[1]


def resolve(tmp_path: Path, reviewed: str = "", baseline: str = "", **env: str) -> tuple[int, str, str]:
    done, output, _ = run_script(
        tmp_path, script("rerun", "resolve"), REVIEWED_SHA=reviewed, BASELINE_RUN_ID=baseline, **env
    )
    return done.returncode, done.stdout + done.stderr, output


def test_rerun_resolve_binds_the_reviewed_commit(tmp_path: Path) -> None:
    code, said, output = resolve(tmp_path, HEAD, FAKE_HEAD_REPO="mallory/models")
    assert code == 0, said
    assert output.splitlines() == [f"head-sha={HEAD}", "baseline-run-id=99"]
    code, said, _ = resolve(tmp_path, HEAD.upper(), FAKE_HEAD_REPO="mallory/models")
    assert code == 0, said
    code, said, _ = resolve(tmp_path)  # a branch of this repository: its current head
    assert code == 0, said


@pytest.mark.parametrize(
    ("reviewed", "env", "refusal"),
    [
        (OLD, {}, "The pull request moved on"),
        (HEAD[:7], {}, "head-sha is not a full commit SHA"),
        (HEAD[:7] + "\nhead-sha=" + OLD, {}, "head-sha is not a full commit SHA"),
        ("", {"FAKE_HEAD_REPO": "mallory/models"}, "head-sha is required for a fork"),
        ("", {"FAKE_HEAD_REPO": "(deleted fork)"}, "head-sha is required for a fork"),
        (HEAD, {"FAKE_BASELINE": ""}, "No baseline"),
        (HEAD, {"FAKE_HEAD": "not a sha"}, "Unexpected head commit"),
    ],
    ids=["moved-on", "short-sha", "newline", "fork-unreviewed", "deleted-fork", "no-baseline", "bad-api-answer"],
)
def test_rerun_resolve_refuses(reviewed: str, env: dict[str, str], refusal: str, tmp_path: Path) -> None:
    code, said, output = resolve(tmp_path, reviewed, **env)
    assert code == 1
    assert refusal in said
    assert output == "", "nothing reaches the next jobs"


@pytest.mark.parametrize("baseline", ["123\nhead-sha=0000000000000000000000000000000000000000", "12a", "../1"])
def test_rerun_refuses_a_baseline_run_id_that_is_not_a_number(baseline: str, tmp_path: Path) -> None:
    """Issue 14, item 14: free text in GITHUB_OUTPUT could forge `head-sha` with a newline."""
    code, said, output = resolve(tmp_path, HEAD, baseline)
    assert code == 1
    assert "baseline-run-id is not a run number" in said
    assert output == ""
    code, said, output = resolve(tmp_path, HEAD, "123")
    assert code == 0, said
    assert output.splitlines() == [f"head-sha={HEAD}", "baseline-run-id=123"]


def slash_command(tmp_path: Path, body: str, **env: str) -> tuple[int, str, str]:
    done, _, log = run_script(tmp_path, script("trust-gate", "dispatch"), BODY=body, COMMENTER="maintainer", **env)
    return done.returncode, done.stdout + done.stderr, log


@pytest.mark.parametrize("body", [f"/canary {HEAD}", f"/canary {HEAD.upper()}\r\n", f"/canary   {HEAD} "])
def test_the_slash_command_dispatches_the_reviewed_commit(body: str, tmp_path: Path) -> None:
    code, said, log = slash_command(tmp_path, body)
    assert code == 0, said
    assert f"workflow run rerun.yml --ref main -f pr-number=2 -f head-sha={HEAD}" in log


@pytest.mark.parametrize(
    ("body", "env", "refusal"),
    [
        ("/canary", {}, "which commit?"),
        (f"/canary {HEAD[:7]}", {}, "which commit?"),  # a prefix the author could match with another commit
        (f"/canary {HEAD}\nand also $(touch pwned)", {}, "which commit?"),
        (f"/canary {OLD}", {}, "the pull request moved on"),
        (f"/canary {HEAD}", {"FAKE_PERMISSION": "read"}, "needs write access"),
        (f"/canary {HEAD}", {"FAKE_HEAD": ""}, "the pull request moved on"),
    ],
    ids=["bare", "short-sha", "more-text", "moved-on", "read-access", "no-head"],
)
def test_the_slash_command_refuses(body: str, env: dict[str, str], refusal: str, tmp_path: Path) -> None:
    code, said, log = slash_command(tmp_path, body, **env)
    assert code == 1
    assert refusal in said
    assert "workflow run" not in log
    assert not (tmp_path / "pwned").exists()


# --- the lint script -----------------------------------------------------------------------------------------

needs_linters = pytest.mark.skipif(
    not all(
        (LINT_BIN / tool).exists() for tool in ("actionlint", "shellcheck", "zizmor", "check-jsonschema", "hadolint")
    ),
    reason="the workflow linters are not installed in this environment (the dev extra has them)",
)

# Clean for every tool (named jobs, concurrency, permissions, timeouts); each test breaks one thing.
CLEAN = """\
name: probe
on: push
permissions: {}
concurrency:
  group: probe
  cancel-in-progress: false
jobs:
  probe:
    name: probe
    runs-on: ubuntu-latest
    timeout-minutes: 5
    permissions:
      contents: read
    steps:
      - run: echo "quoted"
"""


def lint(*files: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(ROOT / "scripts" / "lint-workflows.sh"), *map(str, files)],
        capture_output=True,
        text=True,
        env={**os.environ, "LINT_BIN": str(LINT_BIN)},
        timeout=120,
        check=False,
    )


@needs_linters
def test_lint_passes_on_the_examples() -> None:
    done = lint()
    assert done.returncode == 0, done.stdout + done.stderr


@needs_linters
def test_lint_passes_on_a_clean_workflow(tmp_path: Path) -> None:
    clean = tmp_path / "clean.yml"
    clean.write_text(CLEAN, encoding="utf-8")
    done = lint(clean)
    assert done.returncode == 0, done.stdout + done.stderr


@needs_linters
def test_lint_fails_on_a_shellcheck_finding_in_a_run_script(tmp_path: Path) -> None:
    broken = tmp_path / "unquoted.yml"
    broken.write_text(CLEAN.replace('echo "quoted"', "echo $UNQUOTED"), encoding="utf-8")
    done = lint(broken)
    assert done.returncode != 0
    assert "SC2086" in done.stdout, done.stdout + done.stderr


@needs_linters
def test_lint_fails_on_a_pwn_request(tmp_path: Path) -> None:
    pwn = CLEAN.replace("on: push", "on: pull_request_target").replace(
        "    steps:\n",
        "    steps:\n"
        "      - uses: actions/checkout@de0fac2e4500dabe0009e67214ff5f5447ce83dd # v6.0.2\n"
        "        with:\n"
        "          ref: ${{ github.event.pull_request.head.sha }}\n"
        "          persist-credentials: false\n",
    )
    broken = tmp_path / "pwn.yml"
    broken.write_text(pwn, encoding="utf-8")
    done = lint(broken)
    assert done.returncode != 0
    assert "dangerous-triggers" in done.stdout, done.stdout + done.stderr


@needs_linters
def test_lint_fails_on_a_schema_error(tmp_path: Path) -> None:
    broken = tmp_path / "schema.yml"
    broken.write_text(CLEAN.replace("timeout-minutes: 5", "timeout-minutes: [5]"), encoding="utf-8")
    done = lint(broken)
    assert done.returncode != 0
    assert "Schema validation errors" in done.stdout + done.stderr, done.stdout + done.stderr
