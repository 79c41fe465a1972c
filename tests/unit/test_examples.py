"""The example workflows in docs/examples/ are what users copy: they must be safe and correct as written.

Checked here, offline: every job states its permissions and a timeout; third-party actions are pinned by
commit SHA (ours by its major tag); every canary that trains uploads its results even when it failed; every
`with:` key is a real input of action.yml and every literal value parses; the files that refer to each other
agree. The job conditions are the trust gate for the self-hosted GPU runner, so they are *evaluated* against
webhook-shaped contexts: no fork's pull request event reaches a GPU job unless a maintainer's label says so,
and then only with a read-only token. Last, scripts/lint-workflows.sh (actionlint + shellcheck, zizmor,
GitHub's schemas) passes on the examples and is shown to fail on a broken workflow, once per tool.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from canary_action.github.inputs import read_inputs
from tests.workflow_expressions import Expression, truthy

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "docs" / "examples"
FILES = sorted(EXAMPLES.glob("*.yml"))
EXPECTED = {"pr-canary", "nightly", "rerun", "fork-safe-run", "fork-safe-report", "trust-gate"}
LINT_BIN = Path(sys.executable).parent

OURS = re.compile(r"^rlhf-canary/rlhf-canary(/report)?@v1$")
SHA_PINNED = re.compile(r"^[\w.-]+/[\w.-]+(/[\w./-]+)?@[0-9a-f]{40}$")
VERSION_COMMENT = re.compile(r"@[0-9a-f]{40} # v\d+\.\d+\.\d+$")
UPLOAD, CHECKOUT = "actions/upload-artifact", "actions/checkout"
REPO = "acme/models"
RUN_LABEL = "run-canary"
#: Our two actions: the container action (run/report) and the light report-only composite (report/action.yml).
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


def on_gpu_runner(job: dict[str, Any]) -> bool:
    labels = job.get("runs-on")
    labels = labels if isinstance(labels, list) else [labels]
    return "self-hosted" in labels


def writes(job: dict[str, Any]) -> bool:
    return any(level == "write" for level in (job.get("permissions") or {}).values())


def run_mode(step: dict[str, Any], doc: dict[str, Any]) -> bool:
    """The action trains in mode run, and in mode auto on every event but workflow_run; the composite never."""
    if our_action(step) == "report":
        return False
    mode = (step.get("with") or {}).get("mode", "auto")
    return mode == "run" or (mode == "auto" and "workflow_run" not in triggers(doc))


def ids(paths: list[Path]) -> list[str]:
    return [p.stem for p in paths]


def test_the_examples_are_the_documented_set() -> None:
    assert {p.stem for p in FILES} == EXPECTED
    readme = (EXAMPLES / "README.md").read_text(encoding="utf-8")
    for path in FILES:
        assert f"`{path.name}`" in readme, f"docs/examples/README.md does not describe {path.name}"


@pytest.mark.parametrize("path", FILES, ids=ids(FILES))
def test_each_starts_by_saying_what_it_does_and_what_to_change(path: Path) -> None:
    header = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            break
        header.append(line)
    text = "\n".join(header)
    assert len(header) >= 5, f"{path.name} starts without a comment block"
    assert "What it does" in text or "What to change" in text
    assert "What to change when copying" in text, f"{path.name}: say what to change when copying it"


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
        for step in steps(job):
            if uses(step, CHECKOUT):
                assert (step.get("with") or {}).get("persist-credentials") is False, f"job {name}"


@pytest.mark.parametrize("path", FILES, ids=ids(FILES))
def test_every_training_canary_uploads_its_results_whatever_happened(path: Path) -> None:
    doc = load(path)
    for name, job in jobs(path):
        job_steps = steps(job)
        for i, step in enumerate(job_steps):
            if not is_ours(step):
                continue
            config = step.get("with") or {}
            if not run_mode(step, doc):
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


# --- the trust gate: job conditions evaluated against event contexts --------------------------------------


def job_runs(job: dict[str, Any], github: dict[str, Any]) -> bool:
    condition = job.get("if")
    return True if condition is None else truthy(Expression(str(condition)).evaluate({"github": github}))


def pull_request(action: str, *, fork: bool, label: str | None = None) -> dict[str, Any]:
    head_repo = "mallory/models" if fork else REPO
    event: dict[str, Any] = {
        "action": action,
        "number": 7,
        "pull_request": {"number": 7, "head": {"sha": "a" * 40, "repo": {"full_name": head_repo}}},
        "repository": {"full_name": REPO, "default_branch": "main"},
    }
    if label is not None:
        event["label"] = {"name": label}
    return {"event_name": "pull_request", "repository": REPO, "event": event}


PUSH = {"event_name": "push", "repository": REPO, "ref": "refs/heads/main", "event": {}}
FORK_EVENTS = [
    pull_request("opened", fork=True),
    pull_request("synchronize", fork=True),
    pull_request("reopened", fork=True),
    pull_request("edited", fork=True),
    pull_request("labeled", fork=True, label="needs-review"),
    pull_request("unlabeled", fork=True, label=RUN_LABEL),  # taking the approval back is no approval
]


@pytest.mark.parametrize("path", FILES, ids=ids(FILES))
def test_no_fork_reaches_the_gpu_runner_without_a_maintainers_label(path: Path) -> None:
    events = triggers(load(path))
    assert "pull_request_target" not in events, "pull_request_target runs with a write token: never for PR code"
    for name, job in jobs(path):
        if not on_gpu_runner(job) or "pull_request" not in events:
            continue
        for github in FORK_EVENTS:
            action = github["event"]["action"]
            assert not job_runs(job, github), f"job {name} runs a fork's code on the GPU runner on {action}"
        if job_runs(job, pull_request("labeled", fork=True, label=RUN_LABEL)):
            assert not writes(job), f"job {name} runs a fork's code with a write token"


def test_the_pull_request_canary_runs_branches_and_main_but_no_fork() -> None:
    (_, job), *_ = jobs(EXAMPLES / "pr-canary.yml")
    assert job_runs(job, PUSH)
    for action in ("opened", "synchronize", "reopened"):
        assert job_runs(job, pull_request(action, fork=False))
    assert not job_runs(job, pull_request("labeled", fork=True, label=RUN_LABEL))


def test_the_fork_safe_pair_runs_a_labeled_fork_read_only_and_reports_it() -> None:
    run = dict(jobs(EXAMPLES / "fork-safe-run.yml"))
    assert set(run) == {"canary", "canary-fork"}
    assert job_runs(run["canary"], PUSH)
    assert job_runs(run["canary"], pull_request("synchronize", fork=False))
    assert not job_runs(run["canary"], pull_request("labeled", fork=False, label="docs"))
    assert not job_runs(run["canary"], pull_request("labeled", fork=True, label=RUN_LABEL))
    assert job_runs(run["canary-fork"], pull_request("labeled", fork=True, label=RUN_LABEL))
    assert not job_runs(run["canary-fork"], pull_request("labeled", fork=False, label=RUN_LABEL))
    assert not writes(run["canary-fork"])

    (_, report), *_ = jobs(EXAMPLES / "fork-safe-report.yml")

    def finished(conclusion: str, *, fork: bool = True, event: str = "pull_request") -> dict[str, Any]:
        head = "mallory/models" if fork else REPO
        workflow_run = {"event": event, "conclusion": conclusion, "head_repository": {"full_name": head}}
        return {"event_name": "workflow_run", "repository": REPO, "event": {"workflow_run": workflow_run}}

    assert job_runs(report, finished("success"))
    assert job_runs(report, finished("failure")), "a regression fails the run and must be reported"
    for skipped in (finished("skipped"), finished("cancelled"), finished("success", fork=False)):
        assert not job_runs(report, skipped)
    assert not job_runs(report, finished("success", event="push"))


def test_the_slash_command_needs_a_maintainer_on_a_pull_request() -> None:
    (_, job), *_ = jobs(EXAMPLES / "trust-gate.yml")

    def comment(body: str, association: str, *, on_pull_request: bool = True) -> dict[str, Any]:
        issue: dict[str, Any] = {"number": 7}
        if on_pull_request:
            issue["pull_request"] = {"url": f"https://api.github.com/repos/{REPO}/pulls/7"}
        event = {"issue": issue, "comment": {"body": body, "author_association": association}}
        return {"event_name": "issue_comment", "repository": REPO, "event": event}

    for association in ("OWNER", "MEMBER", "COLLABORATOR"):
        assert job_runs(job, comment("/canary", association))
    for association in ("CONTRIBUTOR", "FIRST_TIME_CONTRIBUTOR", "NONE"):
        assert not job_runs(job, comment("/canary", association))
    assert not job_runs(job, comment("/canary", "OWNER", on_pull_request=False))
    assert not job_runs(job, comment("looks good, /canary later", "OWNER"))


@pytest.mark.parametrize("path", FILES, ids=ids(FILES))
def test_privileged_triggers_run_no_pull_request_code(path: Path) -> None:
    """issue_comment and workflow_run run with this repository's token: nothing is checked out there."""
    if not {"issue_comment", "workflow_run"} & set(triggers(load(path))):
        return
    for name, job in jobs(path):
        assert not on_gpu_runner(job), f"job {name}"
        assert not any(uses(step, CHECKOUT) for step in steps(job)), f"job {name} checks out code"


# --- how the files refer to each other ---------------------------------------------------------------------


def test_the_report_workflow_names_the_fork_safe_run_workflow() -> None:
    names = {load(p).get("name") for p in FILES}
    watched = triggers(load(EXAMPLES / "fork-safe-report.yml"))["workflow_run"]["workflows"]
    assert watched == [load(EXAMPLES / "fork-safe-run.yml")["name"]]
    assert set(watched) <= names


def test_dispatched_workflows_exist_and_take_the_inputs_given() -> None:
    dispatch = re.compile(r"gh workflow run (\S+)((?: [^\n]*)?)")
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
    assert found, "trust-gate.yml starts rerun.yml"


def test_pull_request_canaries_produce_their_own_baselines() -> None:
    """The action searches baselines among runs of the running workflow file on the default branch."""
    for path in FILES:
        doc = load(path)
        events = triggers(doc)
        training = [s for _, job in jobs(path) for s in steps(job) if is_ours(s) and run_mode(s, doc)]
        if training and "pull_request" in events:
            assert "push" in events, f"{path.name} measures pull requests but never the default branch"


def test_by_hand_pull_request_runs_never_upload_a_baseline() -> None:
    """A workflow_dispatch run on main is a baseline candidate: measuring a pull request there must upload
    under another name than the one baselines are searched by."""
    for path in FILES:
        for _, job in jobs(path):
            job_steps = steps(job)
            for i, step in enumerate(job_steps):
                if is_ours(step) and "pr-number" in (step.get("with") or {}):
                    name = str(job_steps[i + 1]["with"]["name"]).strip()
                    assert name != f"${{{{ steps.{step['id']}.outputs.artifact-name }}}}", path.name


def test_rerun_takes_its_baseline_from_the_pull_request_canary() -> None:
    doc = load(EXAMPLES / "rerun.yml")
    workflow = doc["env"]["CANARY_WORKFLOW"]
    assert "push" in triggers(load(EXAMPLES / workflow))
    config = {s["with"]["config"] for p in (EXAMPLES / "rerun.yml", EXAMPLES / workflow) for s in canary_steps(p)}
    assert len(config) == 1, "the same config, or the artifact names differ and no baseline is found"


def canary_steps(path: Path) -> list[dict[str, Any]]:
    return [s for _, job in jobs(path) for s in steps(job) if is_ours(s)]


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


def _resolve_script() -> str:
    workflow = yaml.safe_load((EXAMPLES / "rerun.yml").read_text(encoding="utf-8"))
    steps = [s for job in workflow["jobs"].values() for s in job.get("steps", [])]
    return next(s["run"] for s in steps if s.get("id") == "resolve")


@pytest.mark.parametrize("baseline", ["123\nhead-sha=0000000000000000000000000000000000000000", "12a", "../1"])
def test_rerun_refuses_a_baseline_run_id_that_is_not_a_number(baseline: str, tmp_path: Path) -> None:
    """Issue 14, item 14: free text in GITHUB_OUTPUT could forge `head-sha` with a newline."""
    fake_gh = tmp_path / "bin" / "gh"
    fake_gh.parent.mkdir()
    fake_gh.write_text("#!/bin/sh\nprintf '%s\\t%s\\n' " + "a" * 40 + " owner/repo\n", encoding="utf-8")
    fake_gh.chmod(0o755)
    output = tmp_path / "output"
    env = {"PATH": f"{fake_gh.parent}:/usr/bin:/bin", "GH_REPO": "o/r", "DEFAULT_BRANCH": "main", "PR_NUMBER": "2",
           "REVIEWED_SHA": "", "BASELINE_RUN_ID": baseline, "CANARY_WORKFLOW": "pr-canary.yml",
           "GITHUB_OUTPUT": str(output), "GITHUB_STEP_SUMMARY": str(tmp_path / "summary")}  # fmt: skip
    done = subprocess.run(["bash", "-e", "-c", _resolve_script()], env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 1
    assert "baseline-run-id is not a run number" in done.stdout
    assert not output.exists() or "head-sha" not in output.read_text(encoding="utf-8")
    env["BASELINE_RUN_ID"] = "123"
    ok = subprocess.run(["bash", "-e", "-c", _resolve_script()], env=env, capture_output=True, text=True, check=False)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert output.read_text(encoding="utf-8").splitlines()[:2] == [f"head-sha={'a' * 40}", "baseline-run-id=123"]
