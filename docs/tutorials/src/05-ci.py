# Source of docs/tutorials/05-ci.ipynb: edit here, then `python scripts/build_tutorials.py`.
# %% [markdown]
# # CI integration: the workflows, the trust gate, the check and the comment
#
# In CI, the canary runs on a self-hosted GPU runner and answers on the pull request with a **check run** and one
# **sticky comment**. Everything in a pull request is code — the canary config, a custom trainer, a reward
# function, whatever they import — so the workflows are cut in two: the job that runs that code holds no write
# token, and the job that holds the write token runs none of it. In this notebook, offline, on the CPU, in a
# minute or two, you will:
#
# 1. read the example workflows in `docs/examples/` as data: which job runs what, where, with which permissions,
#    and draw them;
# 2. put the **trust gate** to real webhook payloads — which events reach the GPU runner, on which commit — and
#    the maintainers' `/canary <sha>` command to a few comments;
# 3. run the **fork-safe pair** for real: the action's `measure` mode trains a pull request that slows every
#    step, with no token, and its `report` mode publishes the result against a fake GitHub, as the two jobs of
#    `pr-canary.yml` would; you see the exact check run and comment it posts;
# 4. **read** the check run and the comment, part by part;
# 5. watch the publishing side **refuse**: a pull request that moved on, and a measurement from a workflow a
#    pull request added.
#
# The fake GitHub is the one the contract tests use (`tests/contract/fake_github.py`): a local HTTP server that
# answers as GitHub's REST API does and checks every request against GitHub's OpenAPI description. So this
# notebook needs the checkout with its `tests/` folder, and `pip install -e '.[train,dev]'`.

# %%
import json
import logging
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import matplotlib.pyplot as plt
import yaml
from IPython.display import Markdown, display
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch
from pytest_httpserver import HTTPServer

from canary_action import api


def find_repo() -> Path:
    """The rlhf-canary checkout: $CANARY_REPO, else the first folder from here up that holds configs/tiny."""
    if "CANARY_REPO" in os.environ:
        return Path(os.environ["CANARY_REPO"]).resolve()
    for folder in [Path.cwd(), *Path.cwd().parents]:
        if (folder / "configs" / "tiny").is_dir():
            return folder
    raise FileNotFoundError("open this notebook inside the rlhf-canary checkout, or set CANARY_REPO to it")


REPO = find_repo()
CONFIG = REPO / "configs" / "tiny" / "sft.yaml"
EXAMPLES = REPO / "docs" / "examples"
HOOKS = REPO / "tests" / "fixtures" / "webhooks"  # real webhook payloads (octokit's examples)
WORK = Path("runs") / "ci"  # beside the notebook; runs/ is ignored by git
if WORK.exists():
    shutil.rmtree(WORK)  # a fresh start: the fake GitHub's artifacts are this notebook's runs only
WORK.mkdir(parents=True)
# The tests' fake GitHub and their evaluator of workflow expressions are imported from the checkout.
sys.path.insert(0, str(REPO))
from tests.contract.fake_github import FakeGitHub, make_zip  # noqa: E402
from tests.workflow_expressions import Expression, interpolate, run_jobs, truthy  # noqa: E402

print(f"examples in {EXAMPLES}\nruns in {WORK.resolve()}")

# %% [markdown]
# ## 1. The workflows
#
# `docs/examples/` holds four workflows to copy into `.github/workflows/`. Each is plain YAML, so we can read
# them as data. (PyYAML reads the key `on:` as the boolean `True`, YAML 1.1's spelling of yes: we put it back.)
# For every job: the trigger, where it runs, the permissions of its `GITHUB_TOKEN`, what it checks out, and
# what it does.

# %%
WORKFLOWS = ["pr-canary.yml", "rerun.yml", "trust-gate.yml", "nightly.yml"]


def load_workflow(name: str) -> dict:
    doc = yaml.safe_load((EXAMPLES / name).read_text(encoding="utf-8"))
    doc["on"] = doc.pop(True)
    return doc


def steps_of(job: dict) -> list[dict]:
    return job.get("steps") or []


def canary_step(job: dict) -> dict | None:
    """The job's step that uses rlhf-canary (the Docker action or its report action), if any."""
    return next((s for s in steps_of(job) if str(s.get("uses", "")).startswith("rlhf-canary/")), None)


def checks_out(job: dict) -> str:
    found = [s for s in steps_of(job) if str(s.get("uses", "")).startswith("actions/checkout@")]
    if not found:
        return "nothing"
    ref = str(found[0].get("with", {}).get("ref", ""))
    if "needs." in ref:
        return "the commit to measure"
    return "the default branch" + (" (config only)" if found[0]["with"].get("sparse-checkout") else "")


def what_it_does(job: dict) -> str:
    step = canary_step(job)
    if step is not None:
        given = step.get("with", {})
        mode = "report" if "/report@" in step["uses"] else given.get("mode", "auto")
        token = ', github-token: ""' if given.get("github-token") == "" else ""
        return f"`{step['uses'].split('@')[0]}`, mode {mode}{token}"
    scripts = [s for s in steps_of(job) if "run" in s]
    return "a shell step: " + ", ".join(s.get("name", "run") for s in scripts)


def permissions(job: dict) -> str:
    granted = job.get("permissions") or {}
    return ", ".join(f"{scope}: {level}" for scope, level in granted.items()) or "none"


workflows = {name: load_workflow(name) for name in WORKFLOWS}
rows = ["| workflow | on | job | runs on | token's permissions | checks out | does |", "|---|---|---|---|---|---|---|"]
for name, doc in workflows.items():
    for job_name, job in doc["jobs"].items():
        runs_on = job["runs-on"] if isinstance(job["runs-on"], str) else ", ".join(job["runs-on"])
        rows.append(
            f"| {name} | {', '.join(doc['on'])} | {job_name} | {runs_on} | {permissions(job)} | {checks_out(job)} "
            f"| {what_it_does(job)} |"
        )
display(Markdown("\n".join(rows)))

# %% [markdown]
# Read it row by row:
#
# - **`pr-canary.yml`**, the one to start with. Its **gate** runs on a GitHub-hosted runner with no permission at
#   all and checks nothing out: from the event alone it decides whether code may run on the GPU runner, and fixes
#   the commit (next section). **measure** runs on the self-hosted GPU runner, checks out exactly that commit,
#   and trains with the action in `mode: measure`: `contents: read`, and the action is given no token
#   (`github-token: ""`). It uploads its results as an artifact. **publish** holds the write permissions
#   (`checks: write`, `pull-requests: write`) on a GitHub-hosted runner, checks out only the default branch's
#   config, and runs the light report action (no GPU, no torch): it compares the artifact with the baselines and
#   posts the check run and the comment. On a push to the default branch, measure's upload *is* the baseline.
# - **`rerun.yml`**: the same three jobs for one pull request by hand (`workflow_dispatch`), on the commit a
#   maintainer reviewed, against one baseline run of `pr-canary.yml`.
# - **`trust-gate.yml`**: a maintainer's `/canary <sha>` comment starts `rerun.yml` on that commit. It holds
#   `actions: write` to do so, and therefore checks out nothing and runs no code of the pull request.
# - **`nightly.yml`**: a longer canary every night on the default branch, `mode: run` (train, compare, report in
#   one process: trusted code only), read-only, `comment: never`.
#
# The same, drawn: the colour says what a job is trusted with. No box is both orange and blue.

# %%
RUNS_PR_CODE, HOLDS_WRITE, NEITHER = "#f4a261", "#5fa8d3", "#d9d9d9"


def depth(jobs: dict, name: str) -> int:
    needs = jobs[name].get("needs") or []
    needs = [needs] if isinstance(needs, str) else needs
    return 1 + max((depth(jobs, n) for n in needs), default=-1)


def colour_of(job: dict) -> str:
    if checks_out(job) == "the commit to measure":
        return RUNS_PR_CODE
    if any(level == "write" for level in (job.get("permissions") or {}).values()):
        return HOLDS_WRITE
    return NEITHER


WIDTH, STEP, ROW = 3.5, 4.7, 1.9  # a box's width, the distance between columns and between rows
fig, ax = plt.subplots(figsize=(14, 7.5))
boxes = {}
for row, (name, doc) in enumerate(workflows.items()):
    y = -row * ROW
    ax.text(-0.15, y, f"{name}\non: {', '.join(doc['on'])}", ha="right", va="center", fontsize=9, weight="bold")
    for job_name, job in doc["jobs"].items():
        x = depth(doc["jobs"], job_name) * STEP
        runs_on = "GPU runner" if "self-hosted" in job["runs-on"] else "GitHub-hosted"
        given = (canary_step(job) or {}).get("with", {}).get("github-token")
        label = f"{job_name}  ({runs_on})\n{textwrap.fill(permissions(job), 36)}\nchecks out {checks_out(job)}"
        label += "\naction given no token" if given == "" else ""
        ax.add_patch(FancyBboxPatch((x, y - 0.62), WIDTH, 1.24, boxstyle="round,pad=0.05", fc=colour_of(job)))
        ax.text(x + WIDTH / 2, y, label, ha="center", va="center", fontsize=8)
        boxes[name, job_name] = (x, y)
    for job_name, job in doc["jobs"].items():
        needs = job.get("needs") or []
        for need in [needs] if isinstance(needs, str) else needs:
            (x0, y0), (x1, y1) = boxes[name, need], boxes[name, job_name]
            uploads = any("upload-artifact" in str(s.get("uses", "")) for s in steps_of(doc["jobs"][need]))
            what = ["artifact"] if uploads else list(doc["jobs"][need].get("outputs") or {})
            if x1 - x0 < STEP + 1:  # the next column: a straight arrow
                ax.add_patch(FancyArrowPatch((x0 + WIDTH + 0.05, y0), (x1 - 0.05, y1), arrowstyle="-|>",
                                             mutation_scale=12))  # fmt: skip
                ax.text((x0 + WIDTH + x1) / 2, y0 + 0.08, "\n".join(what), ha="center", fontsize=7, style="italic")
            else:  # over the job between them
                ax.add_patch(FancyArrowPatch((x0 + WIDTH + 0.05, y0 + 0.3), (x1 - 0.05, y1 + 0.3), arrowstyle="-|>",
                                             mutation_scale=12, connectionstyle="arc3,rad=-0.25"))  # fmt: skip
                ax.text((x0 + WIDTH + x1) / 2, y0 + 1.06, ", ".join(what), ha="center", fontsize=7, style="italic")
# trust-gate.yml's job starts rerun.yml (`gh workflow run rerun.yml`)
(x0, y0), (x1, y1) = boxes["trust-gate.yml", "dispatch"], boxes["rerun.yml", "resolve"]
ax.add_patch(FancyArrowPatch((x0 + WIDTH / 2, y0 + 0.67), (x1 + WIDTH / 2, y1 - 0.67), arrowstyle="-|>",
                             mutation_scale=12, linestyle="--"))  # fmt: skip
ax.text(x0 + WIDTH / 2 + 0.1, (y0 + y1) / 2, "gh workflow run rerun.yml", fontsize=7, style="italic")
legend = [(RUNS_PR_CODE, "runs the measured commit's code"), (HOLDS_WRITE, "holds a write permission"),
          (NEITHER, "neither")]  # fmt: skip
for i, (fc, text) in enumerate(legend):
    ax.add_patch(FancyBboxPatch((i * STEP, 1.65), 0.3, 0.3, boxstyle="round,pad=0.02", fc=fc))
    ax.text(i * STEP + 0.45, 1.8, text, va="center", fontsize=9)
ax.set_xlim(-3.2, 2 * STEP + WIDTH + 0.2)
ax.set_ylim(-3 * ROW - 0.8, 2.1)
ax.axis("off")
ax.set_title("The example workflows: where pull request code runs, and where the write token is")
fig.tight_layout()
plt.show()

# %%
# Checked when this notebook runs in CI: no job both runs the measured commit and holds a write permission, and
# every job that runs it is given no token.
for name, doc in workflows.items():
    for job_name, job in doc["jobs"].items():
        if checks_out(job) == "the commit to measure":
            assert colour_of(job) == RUNS_PR_CODE, (name, job_name)
            assert set((job.get("permissions") or {}).values()) <= {"read"}, (name, job_name)
            assert (canary_step(job) or {}).get("with", {}).get("github-token") == "", (name, job_name)

# %% [markdown]
# ## 2. The trust gate
#
# A GPU job must only be reached through a trigger whose **workflow file comes from the default branch**:
# `pull_request_target`, `push`, `workflow_dispatch`, `issue_comment`, `schedule`. (On `pull_request`, GitHub
# runs the pull request's own copy of the workflow file: it could delete the gate.) Then the gate decides, from
# the event payload alone:
#
# - the **event**: a push to the default branch or a dispatch is the default branch's own code (a baseline);
# - the **repository** the pull request comes from: a branch of this repository runs on opened, synchronize
#   and reopened — its author can push here anyway; a **fork's** pull request runs only on the event of a
#   maintainer adding the `run-canary` label;
# - the **commit**: the head SHA named by that very event, so a push after the label changes nothing that runs.
#
# This is the gate's condition in `pr-canary.yml`:

# %%
pr_canary = workflows["pr-canary.yml"]
print(pr_canary["jobs"]["gate"]["if"])

# %% [markdown]
# We run it on real webhook payloads with the evaluator `tests/unit/test_examples.py` uses (the subset of
# GitHub's expression language the examples need; `run_jobs` walks the jobs in `needs` order, as GitHub does,
# with each job's `if:`). The payloads are octokit's examples: pull request #2 of `Codertocat/Hello-World`, once
# from a branch of the repository, once from a fork, `octo-fork/Hello-World`.


# %%
def hook(name: str) -> dict:
    return json.loads((HOOKS / name).read_text(encoding="utf-8"))


def pull_request_target(payload: str, action: str, label: str | None = None) -> dict:
    """The `github` context of a pull_request_target run: the payload, and the base branch's commit and ref."""
    event = {**hook(payload), "action": action}
    if label is not None:
        event["label"] = {"name": label}
    base = event["pull_request"]["base"]
    context = {"event_name": "pull_request_target", "event": event, "sha": base["sha"], "run_id": "4242"}
    return {**context, "repository": event["repository"]["full_name"], "ref": f"refs/heads/{base['ref']}"}


push = hook("push.json")
EVENTS = {
    "a branch of this repository, opened": pull_request_target("pull_request.opened.json", "opened"),
    "a branch of this repository, new commits": pull_request_target("pull_request.synchronize.json", "synchronize"),
    "a fork, opened": pull_request_target("pull_request.fork.json", "opened"),
    "a fork, new commits": pull_request_target("pull_request.fork.json", "synchronize"),
    "a fork, labeled documentation": pull_request_target("pull_request.fork.json", "labeled", "documentation"),
    "a fork, labeled run-canary": pull_request_target("pull_request.fork.json", "labeled", "run-canary"),
    "a push to the default branch": {"event_name": "push", "event": push, "sha": push["after"],
                                     "repository": push["repository"]["full_name"], "ref": "refs/heads/master"},
}  # fmt: skip

decisions = {}
rows = ["| event | from | gate | measure (GPU) | checks out | publish |", "|---|---|---|---|---|---|"]
for what, github in EVENTS.items():
    ran = run_jobs(pr_canary, github)
    decisions[what] = ran
    pull = github["event"].get("pull_request")
    source = pull["head"]["repo"]["full_name"] if pull else "the default branch"
    said = {name: "runs" if job.ran else "skipped" for name, job in ran.items()}
    sha = f"`{ran['gate'].outputs['sha'][:12]}`" if ran["measure"].ran else "—"
    rows.append(f"| {what} | {source} | {said['gate']} | {said['measure']} | {sha} | {said['publish']} |")
display(Markdown("\n".join(rows)))

# %%
# Checked when this notebook runs in CI: a fork's pull request reaches the GPU runner only through the label,
# on the head commit that labeling event names; a branch of this repository is measured on its head.
gpu_runs = {what for what, ran in decisions.items() if ran["measure"].ran}
assert not {w for w in gpu_runs if "fork" in w} - {"a fork, labeled run-canary"}, gpu_runs
labeled = EVENTS["a fork, labeled run-canary"]
assert decisions["a fork, labeled run-canary"]["gate"].outputs["sha"] == labeled["event"]["pull_request"]["head"]["sha"]
assert decisions["a branch of this repository, opened"]["measure"].ran
assert not decisions["a push to the default branch"]["publish"].ran  # a baseline: nothing to publish on

# %% [markdown]
# **Why pull request code never sees a write token.** Where the gate lets a pull request through, its code runs
# in *measure*: that job's token may only read the repository (`contents: read`), the action is given no token
# at all, the checkout keeps no credentials (`persist-credentials: false`), and the action trains in a child
# process whose environment holds none of the runner's variables. *publish*, which holds `checks: write` and
# `pull-requests: write`, never checks out the pull request: the default branch's `canary.yaml` names the
# artifact it reads, the check run, and the thresholds. The measurement it downloads is data, read with size
# caps, safe unpacking and a schema, every string rendered inert. What stays open — every job holds
# `ACTIONS_RUNTIME_TOKEN`, the GPU machine is the pull request's while it runs — is in
# [docs/examples/README.md](../examples/README.md#what-each-layer-protects-against-and-what-it-does-not).
#
# ### `/canary <sha>`: a maintainer approves one commit
#
# `trust-gate.yml` is the other door for a fork: a maintainer reads the pull request and comments `/canary` with
# the full SHA of the head commit they read. Its job runs only for such a comment on a pull request by an
# `OWNER`, `MEMBER` or `COLLABORATOR`; its script then asks the API whether the commenter can push and whether
# the head is still that commit. We run the job's real `if:` and its real script, under bash, with the
# environment its `env:` block gives it, and a stand-in for the `gh` command that answers for the API and
# writes down what it was asked.

# %%
dispatch = workflows["trust-gate.yml"]["jobs"]["dispatch"]
(script_step,) = [s for s in steps_of(dispatch) if "run" in s]
HEAD = hook("pull_request.fork.json")["pull_request"]["head"]["sha"]
STUB = WORK / "bin" / "gh"
STUB.parent.mkdir(parents=True)
STUB.write_text(
    '#!/bin/bash\necho "gh $*" >> "$GH_LOG"\n'
    'case "$*" in\n  *collaborators*) echo "$FAKE_PERMISSION" ;;\n  *pulls*) echo "$FAKE_HEAD" ;;\nesac\n'
)
STUB.chmod(0o755)


def slash_command(body: str, association: str = "MEMBER", permission: str = "write", head: str = HEAD) -> tuple:
    """(does the job run, exit code, what it said, the gh calls) for a comment on pull request #2."""
    event = {
        "issue": {"number": 2, "pull_request": {"url": "https://api.github.com/repos/Codertocat/Hello-World/pulls/2"}},
        "comment": {"body": body, "author_association": association, "user": {"login": "maintainer"}},
        "repository": {"default_branch": "master"},
    }
    github = {"event_name": "issue_comment", "event": event, "repository": "Codertocat/Hello-World", "token": "***"}
    if not truthy(Expression(str(dispatch["if"])).evaluate({"github": github})):
        return False, None, "", ""
    env = {key: interpolate(str(value), {"github": github}) for key, value in script_step["env"].items()}
    log, summary = WORK / "gh.log", WORK / "summary.md"
    log.write_text("")
    summary.write_text("")
    env |= {"PATH": f"{STUB.parent}:/usr/bin:/bin", "GH_LOG": str(log), "GITHUB_STEP_SUMMARY": str(summary),
            "FAKE_PERMISSION": permission, "FAKE_HEAD": head}  # fmt: skip
    done = subprocess.run(
        ["bash", "-e", "-c", script_step["run"]], env=env, capture_output=True, text=True, check=False
    )
    return True, done.returncode, (done.stdout + done.stderr).strip(), log.read_text().strip()


COMMENTS = {
    "a maintainer, the head's full SHA": slash_command(f"/canary {HEAD}"),
    "a contributor, the same": slash_command(f"/canary {HEAD}", association="CONTRIBUTOR"),
    "a maintainer, a bare /canary": slash_command("/canary"),
    "a maintainer, a short SHA": slash_command(f"/canary {HEAD[:7]}"),
    "a member with read access": slash_command(f"/canary {HEAD}", permission="read"),
    "a maintainer, after a new push": slash_command(f"/canary {HEAD}", head="0" * 40),
}
for what, (ran, code, said, calls) in COMMENTS.items():
    print(f"{what}: " + (f"exit {code}" if ran else "the job does not run (its if: is false)"))
    for line in [*said.splitlines(), *calls.splitlines()]:
        print("   ", line)

# %%
# Checked when this notebook runs in CI: only a maintainer with write access, naming the head in full, starts
# rerun.yml, on that SHA; every other comment is refused with exit 1 and a reason, or does not run the job.
started = [what for what, (ran, code, _, calls) in COMMENTS.items() if ran and code == 0]
assert started == ["a maintainer, the head's full SHA"], started
assert f"workflow run rerun.yml --ref master -f pr-number=2 -f head-sha={HEAD}" in COMMENTS[started[0]][3]
assert COMMENTS["a contributor, the same"][0] is False
for what in ["a maintainer, a bare /canary", "a maintainer, a short SHA"]:
    assert COMMENTS[what][1] == 1, COMMENTS[what]
    assert "which commit?" in COMMENTS[what][2], COMMENTS[what]
assert "needs write access" in COMMENTS["a member with read access"][2]
assert "the pull request moved on" in COMMENTS["a maintainer, after a new push"][2]
assert all("workflow run" not in calls for what, (_, _, _, calls) in COMMENTS.items() if what not in started)

# %% [markdown]
# ## 3. The fork-safe pair, for real
#
# Now the two jobs themselves. We start the fake GitHub — repository `Codertocat/Hello-World`, default branch
# `master`, as in the payloads — and give it what a real repository would have:
#
# - **pull request #2** at the head commit the payloads name;
# - **five baselines** (the action compares with up to `baseline-runs` of them, 5 by default): runs of
#   `pr-canary.yml` on pushes to `master`, each with the canary's output-dir uploaded as the artifact
#   `rlhf-canary-tiny-sft`. We train them with `api.run` (as `canary run` does: the measure
#   job's training, without the container), and zip each output-dir as `actions/upload-artifact` would.
#
# The canary is the builtin tiny SFT config (`configs/tiny/sft.yaml`, 30 steps, random weights, synthetic data),
# as `canary.yaml` at the repository root, where the examples expect it.

# %%
logging.getLogger("werkzeug").setLevel(logging.WARNING)  # the server's access log: we list requests ourselves
server = HTTPServer(host="127.0.0.1", port=0)  # any free port
server.start()
fake = FakeGitHub(server)
REPOSITORY, TOKEN = fake.repo, fake.token  # the token the fake accepts: ghs_faketoken
PR = hook("pull_request.opened.json")["pull_request"]
PR_HEAD, BASE_SHA = PR["head"]["sha"], PR["base"]["sha"]
fake.add_pull(number=2, head_sha=PR_HEAD)


def zip_dir(folder: Path) -> bytes:
    """What actions/upload-artifact uploads: every file under the folder, paths relative to it."""
    return make_zip({str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()})


baselines = []
for i in range(5):
    upload = WORK / "main" / f"push-{i + 1}" / "canary-output"
    outcome = api.run(CONFIG, output_dir=upload, overrides=["heldout.enabled=false"])  # 04-root-cause shows it
    run_id = fake.add_workflow_run(workflow_file="pr-canary.yml", event="push", head_sha=f"{i + 1:x}" * 40)
    fake.add_artifact(run_id, name="rlhf-canary-tiny-sft", content=zip_dir(upload))
    baselines.append((run_id, outcome))
    print(f"run {run_id} (push to master): median step {outcome.metrics.summary.step_time_s.median * 1000:.0f} ms")
# The pull request branched off the first of them: the report compares with that run first.
fake.add_merge_base(PR_HEAD, f"{1:x}" * 40)

# %% [markdown]
# ### The pull request
#
# Pull request #2 changes the canary config: it makes every training step wait a second
# (`fault_injection.sleep_s_per_step`, a planted wait), several times the tiny model's whole step. A
# blunt regression, on purpose: separate runs on a shared CPU drift by tens of percent, and with a handful of
# baselines the gate widens its limit to match (the [quickstart](01-quickstart.ipynb) shows how). Its checkout
# is what the measure job sees. The publishing job's checkout is the **default branch's** `canary.yaml`,
# unchanged — and that config, not the pull request's, decides how the pull request is judged (below).

# %%
PR_CHECKOUT, MAIN_CHECKOUT = WORK / "measure-workspace", WORK / "publish-workspace"
PR_CHECKOUT.mkdir()
MAIN_CHECKOUT.mkdir()
CANARY = CONFIG.read_text() + "heldout:\n  enabled: false\n"  # as the baselines above ran
(MAIN_CHECKOUT / "canary.yaml").write_text(CANARY)
change = "fault_injection:\n  sleep_s_per_step: 1.0\n"
(PR_CHECKOUT / "canary.yaml").write_text(CANARY + change)
print("the pull request adds to canary.yaml:\n" + change)

# %% [markdown]
# ### The measure job: the action in `mode: measure`, with no token
#
# A Docker action's step gets every input of `action.yml` as a variable `INPUT_<NAME>` — the `with:` value, or
# the input's default — and the runner's `GITHUB_*` variables. We build exactly those from `pr-canary.yml`'s
# measure step and `action.yml`, and start the container's entrypoint (`entrypoint/main.py`) in a clean
# process. `GITHUB_API_URL` points at the fake GitHub, so any request the job made would land there: we count
# them.

# %%
GITHUB = {"token": TOKEN, "run_id": "", "repository": REPOSITORY}
pr_run = fake.add_workflow_run(
    workflow_file="pr-canary.yml", event="pull_request_target", head_sha=BASE_SHA, status="in_progress", conclusion=None
)
GITHUB["run_id"] = str(pr_run)  # measure and publish are jobs of this one run


def inputs_of(action_yml: Path, given: dict) -> dict:
    """An action's inputs as the runner resolves them: the step's `with:` over the action's defaults."""
    declared = yaml.safe_load(action_yml.read_text(encoding="utf-8"))["inputs"]
    values = {name: interpolate(str(spec.get("default", "")), {"github": GITHUB}) for name, spec in declared.items()}
    return values | {name: str(value) for name, value in given.items()}


def runner_env(workspace: Path, event: str, payload: Path, step: str) -> dict:
    """The variables the runner sets for a step (docs: "Store information in variables"), against the fake."""
    return {
        "GITHUB_EVENT_NAME": event,
        "GITHUB_EVENT_PATH": str(payload.resolve()),
        "GITHUB_REPOSITORY": REPOSITORY,
        "GITHUB_API_URL": fake.api_url,
        "GITHUB_SERVER_URL": "https://github.com",
        "GITHUB_RUN_ID": GITHUB["run_id"],
        "GITHUB_WORKFLOW_REF": f"{REPOSITORY}/.github/workflows/pr-canary.yml@refs/heads/master",
        "GITHUB_SHA": BASE_SHA,  # on pull_request_target: the base branch's commit
        "GITHUB_REF": "refs/heads/master",
        "GITHUB_WORKSPACE": str(workspace.resolve()),
        "GITHUB_OUTPUT": str((WORK / f"{step}.output").resolve()),
        "GITHUB_STEP_SUMMARY": str((WORK / f"{step}.summary.md").resolve()),
    }


def start(workspace: Path, env: dict) -> subprocess.CompletedProcess:
    """entrypoint/main.py in the workspace, with only these variables (and PATH, HOME, the thread count)."""
    home = WORK / "home"
    home.mkdir(exist_ok=True)
    base = {"PATH": os.environ["PATH"], "HOME": str(home.resolve()), "HF_HUB_OFFLINE": "1"}
    base |= {k: os.environ[k] for k in ("OMP_NUM_THREADS",) if k in os.environ}
    entrypoint = REPO / "entrypoint" / "main.py"
    return subprocess.run([sys.executable, str(entrypoint)], env=base | env, cwd=workspace, capture_output=True,
                          text=True, timeout=600, check=False)  # fmt: skip


def outputs_of(step: str) -> dict:
    """GITHUB_OUTPUT's `name<<delimiter` blocks, as the runner reads them."""
    lines, found = (WORK / f"{step}.output").read_text().splitlines(), {}
    while lines:
        name, delimiter = lines.pop(0).split("<<", 1)
        end = lines.index(delimiter)
        found[name], lines = "\n".join(lines[:end]), lines[end + 1 :]
    return found


payload = WORK / "event.json"  # pull_request.opened, delivered to pull_request_target
payload.write_text(json.dumps({**hook("pull_request.opened.json"), "action": "opened"}))
measure_step = canary_step(pr_canary["jobs"]["measure"])
measure_inputs = inputs_of(REPO / "action.yml", measure_step["with"])
env = {f"INPUT_{name.upper()}": value for name, value in measure_inputs.items()}  # hyphens kept, as the runner does
print("the measure step's inputs:", {k: v for k, v in env.items() if v})
print("its token input:", repr(env["INPUT_GITHUB-TOKEN"]))

requests_before = len(fake.requests)
measured = start(PR_CHECKOUT, env | runner_env(PR_CHECKOUT, "pull_request_target", payload, "measure"))
measure_requests = len(fake.requests) - requests_before
print(measured.stdout)
print("exit", measured.returncode, "| outputs:", outputs_of("measure"), "| requests to GitHub:", measure_requests)

# %% [markdown]
# It trained (its progress went to stderr), wrote `metrics.json`, told the next step what to upload, and never
# spoke to GitHub. Its job summary says so too:

# %%
display(Markdown((WORK / "measure.summary.md").read_text()))
# The upload step: canary-output/ as the artifact named by the step's output, an artifact of this run.
artifact = outputs_of("measure")["artifact-name"]
fake.add_artifact(pr_run, name=artifact, content=zip_dir(PR_CHECKOUT / "canary-output"))
print(f"uploaded canary-output/ as {artifact}, an artifact of run {pr_run}")

# %%
# Checked when this notebook runs in CI: the job that runs the pull request's code holds no token and makes no
# request; it measured, and names the artifact after the config.
assert measured.returncode == 0, measured.stderr[-3000:]
assert env["INPUT_GITHUB-TOKEN"] == ""
assert measure_requests == 0
assert outputs_of("measure")["artifact-name"] == "rlhf-canary-tiny-sft"
assert (PR_CHECKOUT / outputs_of("measure")["metrics-path"]).is_file()

# %% [markdown]
# ### The publish job: the report action, with the write token
#
# `rlhf-canary/rlhf-canary/report@v1` is a composite action: its last step runs the same entrypoint with
# `INPUT_MODE: report` and an `env:` block that maps each input to a variable. We take `pr-canary.yml`'s publish
# step, fill in `${{ github.run_id }}` and the gate's outputs, resolve the inputs with `report/action.yml`'s
# defaults, and build that `env:` block. The workspace holds only the default branch's `canary.yaml`.

# %%
gate = decisions["a branch of this repository, opened"]["gate"]  # the gate's decision for this very event
context = {"github": GITHUB, "needs": {"gate": {"result": "success", "outputs": gate.outputs}}}
publish_step = canary_step(pr_canary["jobs"]["publish"])
given = {name: interpolate(str(value), context) for name, value in publish_step["with"].items()}
report_action = yaml.safe_load((REPO / "report" / "action.yml").read_text(encoding="utf-8"))
report_inputs = inputs_of(REPO / "report" / "action.yml", given)
(composite_step,) = [s for s in report_action["runs"]["steps"] if s.get("id") == "report"]
report_env = {
    name: interpolate(str(value), {"inputs": report_inputs})
    for name, value in composite_step["env"].items()
    if name.startswith("INPUT_")
}
print("the publish step's `with:`, filled in:", given)
print("its inputs:", {k: ("***" if "TOKEN" in k else v) for k, v in report_env.items() if v})


def publish(step: str, event: str = "pull_request_target", event_payload: Path = payload, **changed: str) -> tuple:
    """The report step once: (the process, its outputs, the requests it made as 'METHOD path')."""
    before = len(fake.requests)
    env = report_env | {f"INPUT_{k.upper()}": v for k, v in changed.items()}
    env |= runner_env(MAIN_CHECKOUT, event, event_payload, step) | {"PYTHONPATH": str(REPO)}  # as the composite
    done = start(MAIN_CHECKOUT, env)
    return done, outputs_of(step), [f"{r.method} {r.path}" for r in fake.requests[before:]]


changed, _, changed_requests = publish("publish")
print(changed.stdout.strip()[-1200:])
print("exit", changed.returncode, "| written:", [r for r in changed_requests if not r.startswith("GET")])
refusal = fake.check_runs[-1]
print(f"check run {refusal['name']!r}: {refusal['conclusion']} - {refusal['output']['title']}")

# %% [markdown]
# **Refused: the pull request changed its canary config.** The measured run's config differs from the default
# branch's `canary.yaml` in a key that decides how a run is judged (everything but `name`, `description`,
# `thresholds`, `timeout_minutes` and the output folders). A pull request that set `max_steps: 6` or
# `batch_size: 16` would make its run incomparable with the baselines, and an incomparable run is *neutral*,
# which passes a required check: so the publish job
# fails the check instead, naming each changed key, and exits 2. The check run is there, on the pull request's
# head commit; no comment is written.
#
# Here the change is the tutorial's planted wait, and a maintainer who has read it accepts it **for this
# commit only**: `accept-config-change: <the head SHA>` (in `docs/examples/rerun.yml` a checkbox of the manual
# rerun, which passes the SHA it resolved). A later push is refused again until someone looks at it.

# %%
published, report_outputs, report_requests = publish("publish", accept_config_change=PR_HEAD)
print(published.stdout[-1500:])
print("exit", published.returncode, "| verdict:", report_outputs.get("verdict"))
print("\n".join(report_requests))

# %% [markdown]
# The publish job read the run (`GET .../actions/runs/{id}`), the pull request (is its head still the measured
# commit?), downloaded this run's artifact and the baselines' (found through the merge base, then the newest
# successful `push` runs of `pr-canary.yml` on `master`: this run's own artifact, a `pull_request_target` run,
# is never a baseline), and then wrote three things. (Its log starts with `::add-mask::`, which tells the runner
# to hide the token in every later line, and prints the text that came from the artifact between
# `::stop-commands::` markers, so that a measurement cannot issue workflow commands.) These are the bodies of
# the three writes, exactly as sent (long texts cut here):


# %%
def shown(value: object, limit: int = 300) -> object:
    if isinstance(value, str):
        return value if len(value) <= limit else f"{value[:limit]}… ({len(value):,} characters)"
    if isinstance(value, dict):
        return {k: shown(v, limit) for k, v in value.items()}
    if isinstance(value, list):
        return [shown(v, limit) for v in value[:2]] + ([f"… {len(value)} in all"] if len(value) > 2 else [])
    return value


writes = [r for r in fake.requests[-len(report_requests) :] if r.method in ("POST", "PATCH")]  # the accepted publish
for request in writes:
    print(f"{request.method} {request.path}\n{json.dumps(shown(request.body), indent=2, ensure_ascii=False)}\n")

# %% [markdown]
# The same job again — a re-run from the Actions tab, say. GitHub keeps every check run and shows the newest of a
# name, so each publish creates a **new** check run; the comment is **sticky**: found by its first line, a hidden
# marker, among the comments this token wrote, and updated in place.

# %%
again, _, again_requests = publish("publish-again", accept_config_change=PR_HEAD)
print("exit", again.returncode)
print("\n".join(r for r in again_requests if not r.startswith("GET")))
print(f"check runs on {PR_HEAD[:12]}: {len(fake.check_runs)}; comments on #2: {len(fake.comments[2])}")

# %%
# Checked when this notebook runs in CI: the planted slowdown is a regression (exit 1); the check run is on the
# pull request's head commit (not the merge or base commit), named after the default branch's config, and
# concluded as the verdict says; one sticky comment, updated in place by the second publish; every request
# within GitHub's OpenAPI description.
assert changed.returncode == 2, changed.stdout[-3000:]
assert (refusal["conclusion"], refusal["head_sha"]) == ("failure", PR_HEAD)
assert refusal["output"]["title"] == "rlhf-canary: the pull request changes its canary config"
assert r"fault\_injection.sleep\_s\_per\_step: 0.0 → 1.0" in refusal["output"]["summary"]  # as Markdown
assert [r for r in changed_requests if not r.startswith("GET")] == [
    "POST /repos/Codertocat/Hello-World/check-runs",
    f"PATCH /repos/Codertocat/Hello-World/check-runs/{refusal['id']}",
]
verdict = report_outputs["verdict"]
comment = fake.comments[2][0]
check = fake.check_runs[1]
assert verdict == "regression", published.stdout[-3000:]
assert published.returncode == 1
assert {"success": "pass", "failure": "regression"}[check["conclusion"]] == verdict
assert (check["name"], check["head_sha"], check["status"]) == ("rlhf-canary (tiny-sft)", PR_HEAD, "completed")
assert comment["body"].splitlines()[0] == "<!-- rlhf-canary:sticky:tiny-sft -->"
assert f"rlhf-canary **{verdict}**" in comment["body"]
assert len(fake.comments[2]) == 1
assert len(fake.check_runs) == 3
assert any(r.startswith("PATCH /repos/Codertocat/Hello-World/issues/comments/") for r in again_requests)
assert not any(r.startswith("POST /repos/Codertocat/Hello-World/issues/") for r in again_requests)
assert [r for r in report_requests if r.startswith("POST")] == [
    "POST /repos/Codertocat/Hello-World/check-runs",
    "POST /graphql",  # who this token writes as: only that identity's sticky comment is updated
    "POST /repos/Codertocat/Hello-World/issues/2/comments",
]
# the runs whose artifacts were read: this run's (the measurement, once) and the pushes' (the baselines)
read_from = [r.split("/")[-2] for r in report_requests if r.endswith("/artifacts")]
assert sorted(read_from) == sorted([str(pr_run)] + [str(run_id) for run_id, _ in baselines]), read_from
assert fake.violations == [], fake.violations
server.check_handler_errors()

# %% [markdown]
# ## 4. Reading the check and the comment
#
# ### The comment
#
# This is the comment as GitHub stores it, rendered (GitHub draws its Mermaid charts; here they show as code):

# %%
display(Markdown(comment["body"]))

# %% [markdown]
# From the top:
#
# - **The marker** `<!-- rlhf-canary:sticky:tiny-sft -->`, the first line, is invisible on GitHub: it is how the
#   next run finds this comment to update (one per config name), and only among comments its own token wrote.
# - **The verdict line**: `pass`, `regression`, `neutral` (nothing to compare with, or not comparable: it says
#   why and how to fix it) or `crashed`, with the one-sentence reason, the commit measured and the baselines.
# - **The checks table**: one row per check — the baseline's value and the pull request's, the change, and the
#   limit the change was held to. For the speed checks the limit is the tier's threshold widened by the noise
#   measured *between the baselines* and a confidence interval on the difference: a change inside the noise is
#   not called a regression. Failed checks come first; `skip` says why a check did not apply (on a CPU there
#   is no CUDA memory).
# - **Likely causes**: the suspects, ranked, each with a confidence, its evidence and what to try next. Here the
#   config itself names the planted work; in a real pull request the evidence is a changed dependency, a
#   profiler op diff, a longer sequence...
# - **Notes and links**: what the comparison took into account (the warm-up it left out, the merge base it
#   compared with first), the workflow run, its artifacts and the baseline run.
#
# The same fields, from `result.json` — the publish job's `result-path` output, what `canary compare --json`
# prints:

# %%
result = api.CompareResult.model_validate_json((MAIN_CHECKOUT / report_outputs["result-path"]).read_text())
print(result.verdict, "-", result.reason)


def amount(value: float | None, unit: str, sign: str = "") -> str:
    return "" if value is None else f"{value:{sign}.4g} {unit}".strip()


rows = ["| check | status | baseline | current | change | limit |", "|---|---|---|---|---|---|"]
for c in result.checks:
    rows.append(f"| {c.name} | {c.status} | {amount(c.baseline, c.unit)} | {amount(c.current, c.unit)} "
                f"| {amount(c.delta_pct, '%', '+')} | {amount(c.threshold, c.threshold_unit, '+')} |")  # fmt: skip
display(Markdown("\n".join(rows)))
for rank, suspect in enumerate(result.suspects, 1):
    print(f"{rank}. [{suspect.category}, confidence {suspect.confidence:.2f}] {suspect.summary}")

# %% [markdown]
# ### The check run
#
# The check run goes on the pull request's **head** commit — the one measured — not on `GITHUB_SHA`, which on
# `pull_request_target` is the base branch's commit (and on `pull_request` a merge commit no one reviews). Its
# name comes from the default branch's config, `rlhf-canary (tiny-sft)`: mark it *required* in the branch
# protection rules to block merging on a regression. Its conclusion follows the verdict: `success` for pass,
# `failure` for a regression or a crash, `neutral` otherwise (or for a regression with `fail-on: never`). Its
# title is what the pull request's checks list shows; the summary is the report, and the text below it the
# checks one by one. (In `mode: run`, failed and warned checks also become annotations on the config file; the
# report mode used here sends none.)

# %%
print(f"{check['name']} on {check['head_sha'][:12]}: {check['status']}, {check['conclusion']}")
print("title:", check["output"]["title"])
print("annotations:", len(fake.annotations.get(check["id"], [])))
display(Markdown(check["output"]["summary"]))

# %% [markdown]
# ## 5. When the publishing side refuses
#
# The publish job holds the write token, so it checks what it is asked to publish against what the trusted side
# decided. Two cases, for real, against the same fake GitHub.
#
# **The pull request moved on.** Between the measurement and the publish, the author pushes a new commit. The
# approval (and the measurement) was for the old one: publishing it on the pull request would put an old
# verdict next to new code. The report step says so and publishes nothing; the newer commit's run reports.

# %%
fake.pulls[2]["head"]["sha"] = "c0ffee" + "0" * 34  # a push after the measurement
moved, moved_outputs, moved_requests = publish("moved-on")
print(moved.stdout.strip()[-800:])
print("exit", moved.returncode, "| written:", [r for r in moved_requests if not r.startswith("GET")])
fake.pulls[2]["head"]["sha"] = PR_HEAD

# %% [markdown]
# **A measurement from a workflow a pull request added.** Publishing can also live in a separate workflow
# started by `workflow_run` when the measuring workflow completes; the report action then takes the run from
# the event. But a pull request can add a workflow file of its own — say `benchmark.yml`, run on `pull_request`,
# uploading an artifact of the right name with flattering numbers — and its completion is a `workflow_run`
# event too. So report mode reports only runs of the file named in `measured-workflow`: anything else is an
# input error, exit 2, before anything is downloaded, with the reason and the fix in an error annotation
# (`::error title=…::`, shown on the run's page).

# %%
forged_run = fake.add_workflow_run(workflow_file="benchmark.yml", event="pull_request", head_sha=PR_HEAD)
fake.add_artifact(forged_run, name="rlhf-canary-tiny-sft", content=zip_dir(PR_CHECKOUT / "canary-output"))
event = hook("workflow_run.completed.json")
event["workflow_run"] |= {"id": forged_run, "event": "pull_request", "head_sha": PR_HEAD}
forged_payload = WORK / "workflow_run.json"
forged_payload.write_text(json.dumps(event))
GITHUB["run_id"] = str(fake.add_workflow_run(workflow_file="canary-publish.yml", event="workflow_run"))
forged, _, forged_requests = publish(
    "forged", "workflow_run", forged_payload, measured_run_id="", head_sha="", measured_workflow="pr-canary.yml"
)
print(forged.stdout.strip()[-1200:])
print("exit", forged.returncode, "| written:", [r for r in forged_requests if not r.startswith("GET")])

# %%
# Checked when this notebook runs in CI: a moved-on pull request gets nothing (exit 0, said so); a run of
# another workflow file is refused with exit 2, before anything is downloaded or written.
assert moved.returncode == 0, moved.stdout[-2000:]
assert "moved on" in moved.stdout
assert not [r for r in moved_requests if not r.startswith("GET")]
assert forged.returncode == 2, forged.stdout[-2000:]
assert "not the measured-workflow" in forged.stdout
assert not [r for r in forged_requests if not r.startswith("GET") or "/artifacts" in r]
assert len(fake.check_runs) == 3
assert len(fake.comments[2]) == 1
assert fake.violations == [], fake.violations
server.stop()

# %% [markdown]
# ## Where next
#
# - The action's modes, inputs, outputs, exit codes, and what it does for each event:
#   [docs/action.md](../action.md); `canary gh-report` publishes from a plain `run:` step, with the same client.
# - The example workflows, what each layer of the trust model protects against (and what it does not), and the
#   settings outside the files — the runner group, fork approvals: [docs/examples/README.md](../examples/README.md).
# - The GPU runner: the NVIDIA Container Toolkit, ephemeral runners, one fresh machine per job:
#   [docs/runner-setup.md](../runner-setup.md).
# - Running, comparing and the report, on your machine: the [quickstart](01-quickstart.ipynb).
