"""The action's inputs and the runner's variables: the one place that reads `INPUT_*` and `GITHUB_*`, and the
typed, frozen objects passed inward.

The runner exposes an input `baseline-runs` as `INPUT_BASELINE-RUNS` (upper case, hyphen kept), which a
shell cannot even name; other launchers (a job-level `container:`, tests) write `INPUT_BASELINE_RUNS`. Both
spellings are read; when both are set and differ, the runner's (hyphen) wins and the result says so.
Values are parsed once and strictly: "5 " is 5, "five" is an error naming the input, a `tier` outside
its choices is an error with a "did you mean". An empty value means "not set" (the runner passes every
declared input, empty when it has no default), so the model's default applies.

action.yml is generated from this model's fields — their descriptions and defaults — and a test keeps the
two equal (tests/unit/test_action_inputs.py).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator

from canary_action.errors import UsageError

Tier = Literal["default", "smoke", "perf", "nightly"]
#: action.yml's defaults that are expressions the runner evaluates (the model cannot hold them literally).
EXPRESSION_DEFAULTS: Final = {"github_token": "${{ github.token }}"}
WORKFLOWS_DIR: Final = ".github/workflows/"
#: A workflow file as GitHub finds one: directly in .github/workflows/, named *.yml or *.yaml.
_WORKFLOW_FILE: Final = re.compile(r"(?:\.github/workflows/)?([A-Za-z0-9_][A-Za-z0-9_.-]*\.ya?ml)")
#: A commit as git names it (a SHA, a branch or a tag): never an option, a range or a path outside the history (no
#: `..`, which git refuses in a ref name too: _no_range).
_REVISION: Final = r"^[A-Za-z0-9_][A-Za-z0-9_./-]{0,199}$"
#: A full commit SHA, as the API and metrics.json write one.
FULL_SHA: Final = re.compile(r"[0-9a-f]{40}")


class ActionInputs(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    config: str = Field("canary.yaml", description="Path of the canary config, relative to the repository root.")
    tier: Tier = Field(
        "smoke",
        description="Threshold tier: default, smoke, perf or nightly (rlhf-canary 0.1's tiers). Read wherever a run is "
        "judged: modes run and report, and in mode measure by a lockstep pair (whether a failing pair runs its "
        "confirming second pair): give measure and report the same.",
    )
    thresholds: str | None = Field(
        None, description="Path of a thresholds YAML file (base_tier plus overrides); empty for none."
    )
    templates: str | None = Field(
        None,
        description="A folder of your own report templates (*.j2 named as rlhf-canary's, each replacing ours of its "
        "name; docs/report.md), relative to the repository root: read from the workspace in mode run, from the "
        "default branch's checkout in mode report, never from a pull request's files; unused in mode measure. "
        "Empty: ours.",
    )
    mode: Literal["auto", "run", "measure", "report", "bisect", "history"] = Field(
        "auto",
        description="measure: train and write the results for upload, using no token (the job that runs pull "
        "request code); report: compare a measured run's uploaded results and publish them (a separate job with "
        "the write token), or a bisect's as an issue; run: train, compare and publish in one job (trusted code "
        "only; on pull_request_target, issue_comment and a workflow_dispatch given pr-number only with the event's "
        "commit checked out); bisect: find the commit between good and bad that made the canary regress, with "
        "lockstep pairs, using no token (docs/bisect.md); history: append the measured run of this default-branch "
        "run to the history branch and build the history site, in a job that trains nothing (docs/history.md); "
        "auto: report on workflow_run, measure on "
        "pull_request_target (and on issue_comment and a workflow_dispatch given pr-number, unless the event's "
        "commit is checked out), run otherwise.",
    )
    github_token: SecretStr | None = Field(
        None,
        description="Token for the REST API: needs checks: write, pull-requests: write and actions: read.",
    )
    baseline: Literal["auto", "artifacts", "lockstep", "both"] = Field(
        "auto",
        description="auto: on a pull request, both (its base commit trained beside it, judged paired, plus "
        "artifact history), else artifacts; artifacts: compare with default-branch runs' uploaded results only "
        "(opt out of pairing); lockstep: the paired A/B alone; both: lockstep for speed, artifacts as history for "
        "the learning checks. A pair trains both sides: docs/lockstep.md says what it costs. In mode report, what the "
        "measure job was set to make: a pair under artifacts is refused.",
    )
    setup: str | None = Field(
        None,
        description="A shell command run in the checked-out repository before training, installing what its "
        "code needs into an environment of its own over the job's packages (the image's; the python action's: "
        "yours), e.g. pip install -r requirements.txt, or pip install --no-deps . for your package; with a "
        "lockstep baseline, once per side, each in its own.",
    )
    gpu: Literal["auto", "required", "none"] = Field(
        "auto",
        description="auto: a job that trains must see a GPU when its machine has the NVIDIA driver loaded "
        "(/proc/driver/nvidia/version, which a container sees even when it was not given the GPU), unless the "
        "config says device: cpu; required: it must see one whatever the machine; none: train where the config "
        "says. A job that must see a GPU and does not fails with the fix, before training: never a neutral CPU "
        "run.",
    )
    baseline_artifact: str | None = Field(
        None, description="Name of the baseline artifact; empty: rlhf-canary-<config name>."
    )
    baseline_branch: str | None = Field(
        None, description="Branch whose runs are the baseline; empty: the repository's default branch."
    )
    baseline_workflow: str | None = Field(
        None,
        description="The workflow file whose runs upload the baseline artifact (e.g. nightly.yml or "
        ".github/workflows/nightly.yml); empty: the file of the workflow that measured.",
    )
    baseline_runs: int = Field(
        5, ge=1, le=20, description="How many past successful baseline runs to compare with (1-20)."
    )
    baseline_run_id: int | None = Field(
        None, ge=1, description="Use this workflow run's artifact as the only baseline; empty: search."
    )
    measured_run_id: int | None = Field(
        None,
        ge=1,
        description="report: the workflow run whose artifact holds the measurement (github.run_id for a "
        "measure job of the same run); empty: the run of the workflow_run event.",
    )
    measured_workflow: str | None = Field(
        None,
        description="report on a workflow_run: the workflow file whose runs may be reported (e.g. pr-canary.yml); a "
        "run of any other file is refused, since a pull request can add a workflow of any name.",
    )
    head_sha: str | None = Field(
        None,
        pattern=f"^{FULL_SHA.pattern}$",
        description="The commit that was measured, as the trusted side chose it: results are published on it and "
        "refused when the pull request's head has moved on; empty: the event's head commit.",
    )
    pr_number: int | None = Field(
        None, ge=1, description="The pull request to report on, for workflow_dispatch and workflow_run events."
    )
    accept_config_change: str | None = Field(
        None,
        pattern=f"^{FULL_SHA.pattern}$",
        description="report: the full SHA of a pull request commit whose canary config change a maintainer "
        "accepted (a key not in docs/action.md's list of what a pull request may change: steps, batch, model...); "
        "that commit is then "
        "judged as measured. Empty: a measured config that differs from the default branch's is a failed check "
        "naming the change.",
    )
    accept_numerics_change: str | None = Field(
        None,
        pattern=f"^{FULL_SHA.pattern}$",
        description="report (and run): the full SHA of a pull request commit whose change of the training numerics "
        "a maintainer accepted, where the default branch's thresholds set fail_on_numerics_change; that commit's "
        "numerics check then passes, said in it. Empty: such a change fails the check, naming the first step.",
    )
    good: str | None = Field(
        None,
        pattern=_REVISION,
        description="mode bisect: the last commit known good (a SHA, branch or tag of the checkout's history; the "
        "nightly's baseline-sha output). Required in mode bisect.",
    )
    bad: str | None = Field(
        None,
        pattern=_REVISION,
        description="mode bisect: the first commit known bad; empty: the event's commit (GITHUB_SHA).",
    )
    bisect_bad: str | None = Field(
        None,
        pattern=_REVISION,
        description="report: publish a bisect, not a measured run: the bad commit the bisect job was given (a SHA, "
        "or a tag or branch, resolved through the API: one that moved since is refused), as the trusted side names "
        "it; the run's artifact rlhf-canary-bisect-<config name> must be there, and its bisect.json must name this "
        "commit. Empty: report mode publishes a measured run and never looks for a bisect.",
    )
    history_branch: str = Field(
        "rlhf-canary-history",
        pattern=r"^[A-Za-z0-9_-][A-Za-z0-9._-]{0,99}(/[A-Za-z0-9_-][A-Za-z0-9._-]{0,99}){0,4}$",
        description="mode history: the branch that holds the history (history.jsonl alone; created on the first "
        "run as a branch of its own; never the branch measured).",
    )
    history_url: str | None = Field(
        None,
        pattern=r"^https://[A-Za-z0-9.-]+(:[0-9]+)?(/[A-Za-z0-9._~/-]*)?$",
        description="report and run: the published history site (its GitHub Pages URL, e.g. "
        "https://OWNER.github.io/REPO/): the PR comment links to the config's page there. Empty: no link.",
    )
    comment: Literal["always", "on-change", "on-failure", "never"] = Field(
        "always",
        description="When to write the sticky PR comment: always, on-change (the verdict changed), on-failure, "
        "or never.",
    )
    fail_on: Literal["regression", "never"] = Field(
        "regression", description="regression: fail the step on a regression; never: only report it."
    )
    output_dir: str = Field("canary-output", description="Where metrics.json, result.json and the reports are written.")

    @field_validator("good", "bad", "bisect_bad", "history_branch")
    @classmethod
    def _no_range(cls, value: str | None) -> str | None:
        """`a..b` is a range to git, and `..` a step up in the API's paths: never a commit's name."""
        if value is not None and ".." in value:
            raise ValueError("a commit's SHA, branch or tag, without `..`")
        return value

    @field_validator("baseline_workflow")
    @classmethod
    def _workflow_file(cls, value: str | None) -> str | None:
        """A file name or its path, as .github/workflows/<name>: the form GITHUB_WORKFLOW_REF gives."""
        if value is None:
            return None
        found = _WORKFLOW_FILE.fullmatch(value)
        if found is None or ".." in value:
            raise ValueError(
                "not a workflow file of this repository: give its file name (nightly.yml) or its path "
                "(.github/workflows/nightly.yml), ending .yml or .yaml, without `..` or a URL"
            )
        return WORKFLOWS_DIR + found.group(1)


#: The action's outputs (the entrypoint writes each to GITHUB_OUTPUT); action.yml must list exactly these.
OUTPUTS: Final[dict[str, str]] = {
    "verdict": "pass, regression, neutral or crashed.",
    "metrics-path": "Path of the run's metrics.json (empty in report mode).",
    "result-path": "Path of the comparison result (result.json; mode bisect: bisect.json).",
    "report-path": "Path of the markdown report (mode bisect: bisect.md).",
    "comment-url": "URL of the sticky PR comment, when one was written.",
    "check-run-url": "URL of the check run, when one was written.",
    "issue-url": "URL of the bisect's issue, when mode report wrote one.",
    "artifact-name": "The artifact name under which a default-branch run's metrics become the baseline (mode "
    "bisect: the name to upload the bisect under).",
    "baseline-sha": "mode run: the commit of the newest baseline run compared with (a nightly's last good "
    "commit, for mode bisect's good input); empty without one.",
    "history-commit": "mode history: the history branch's new commit; empty when it could not be written.",
    "history-site": "mode history: the folder of the built history site (for actions/upload-pages-artifact).",
}


def input_name(field: str) -> str:
    """The action.yml name of a model field: kebab-case."""
    return field.replace("_", "-")


def read_inputs(env: Mapping[str, str]) -> tuple[ActionInputs, list[str]]:
    """The inputs from the environment, and notices (e.g. both spellings set, differently)."""
    values: dict[str, str] = {}
    notices: list[str] = []
    for field in ActionInputs.model_fields:
        name = input_name(field)
        hyphen, underscore = env.get(f"INPUT_{name.upper()}"), env.get(f"INPUT_{field.upper()}")
        if hyphen is not None and underscore is not None and hyphen.strip() != underscore.strip() and "-" in name:
            notices.append(f"input {name} is set twice, differently; using INPUT_{name.upper()} (the runner's)")
        raw = hyphen if hyphen is not None else underscore
        if raw is not None and raw.strip():
            values[field] = raw.strip()
    try:
        return ActionInputs.model_validate(values), notices
    except ValidationError as e:
        problems = [_problem(err) for err in e.errors(include_url=False)]
        raise UsageError(
            "invalid action input" + ("s" if len(problems) > 1 else "") + ": " + "; ".join(problems),
            fix="correct the `with:` block of the rlhf-canary step in your workflow (see action.yml)",
        ) from e


def _problem(err: Mapping[str, object]) -> str:
    loc = err.get("loc") or ("?",)
    field = str(loc[0]) if isinstance(loc, tuple) else str(loc)
    name = input_name(field)
    ctx = err.get("ctx")
    expected = ctx.get("expected") if isinstance(ctx, dict) else None
    given = str(err.get("input", ""))[:60]
    if expected:
        choices = [c.strip(" '") for c in str(expected).replace(" or ", ",").split(",") if c.strip(" '")]
        close = difflib.get_close_matches(given, choices, n=1)
        hint = f" — did you mean {close[0]!r}?" if close else ""
        return f"{name}: {given!r} is not one of {', '.join(choices)}{hint}"
    said = str(err.get("msg")).removeprefix("Value error, ")  # a validator's own message needs no prefix
    return f"{name}: {said} (got {given!r})"


@dataclass(frozen=True)
class RunnerEnv:
    """What the Actions runner tells a step about itself (docs: "Store information in variables")."""

    event_name: str
    event_path: Path | None
    repository: str
    api_url: str
    server_url: str
    run_id: int | None
    workflow_ref: str | None
    """owner/repo/.github/workflows/file.yml@refs/heads/branch"""
    sha: str | None
    ref: str | None
    workspace: Path
    output_path: Path | None
    summary_path: Path | None


def read_runner(env: Mapping[str, str]) -> RunnerEnv:
    """The GITHUB_* variables; UsageError when the two the action cannot work without are missing."""
    missing = [name for name in ("GITHUB_EVENT_NAME", "GITHUB_REPOSITORY") if not env.get(name)]
    if missing:
        raise UsageError(
            f"not running inside GitHub Actions: {' and '.join(missing)} unset",
            fix="use the action from a workflow step, or the `canary` command (run, compare, report) elsewhere",
        )
    run_id = env.get("GITHUB_RUN_ID", "")

    def path(name: str) -> Path | None:
        value = env.get(name, "")
        return Path(value) if value else None

    return RunnerEnv(
        event_name=env["GITHUB_EVENT_NAME"],
        event_path=path("GITHUB_EVENT_PATH"),
        repository=env["GITHUB_REPOSITORY"],
        api_url=env.get("GITHUB_API_URL") or "https://api.github.com",
        server_url=env.get("GITHUB_SERVER_URL") or "https://github.com",
        run_id=int(run_id) if run_id.isdigit() else None,
        workflow_ref=env.get("GITHUB_WORKFLOW_REF") or None,
        sha=env.get("GITHUB_SHA") or None,
        ref=env.get("GITHUB_REF") or None,
        workspace=path("GITHUB_WORKSPACE") or Path.cwd(),
        output_path=path("GITHUB_OUTPUT"),
        summary_path=path("GITHUB_STEP_SUMMARY"),
    )


#: Where `canary gh-report` finds its token: the variables a workflow step sets for gh and the REST clients.
TOKEN_VARIABLES: Final = ("GITHUB_TOKEN", "GH_TOKEN")


def read_token(env: Mapping[str, str]) -> str | None:
    """`canary gh-report`'s token: from the environment only, never a flag (a command line shows in `ps`)."""
    return next((env[name].strip() for name in TOKEN_VARIABLES if env.get(name, "").strip()), None)
