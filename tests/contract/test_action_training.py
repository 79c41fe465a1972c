"""The entrypoint exactly as the runner calls it — a process with INPUT_* and GITHUB_* set, in the workspace —
with a real tiny training, against the fake GitHub: a default-branch push makes the baseline, whose uploaded
output-dir the next pull request downloads, compares with, and publishes a check and a comment about."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.contract.fake_github import FakeGitHub, make_zip
from tests.contract.test_action_e2e import HOOKS, PR_HEAD, ROOT, Runner
from tests.factories import NO_HELDOUT_BLOCK
from tests.unit.test_action_parts import parse_outputs

pytestmark = pytest.mark.training


def run_entrypoint(
    runner: Runner, event: str, payload: str, ref: str, extra: dict[str, str] | None = None, *, merged: bool = False
) -> tuple[int, str, dict[str, str]]:
    """The entrypoint as the runner starts it; `extra`: more variables (the runner's own tokens, say). `merged`: its
    stdout and stderr in one stream, in the order written (as the runner reads both)."""
    env = {**runner.env(event, ROOT / "tests" / "fixtures" / "webhooks" / payload, {}, ref), **(extra or {})}
    done = subprocess.run(
        [sys.executable, str(ROOT / "entrypoint" / "main.py")],
        env={"PATH": "/usr/bin:/bin", "HOME": str(runner.tmp), "HF_HUB_OFFLINE": "1", **env},
        cwd=runner.workspace,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT if merged else subprocess.PIPE,
        text=True,
        timeout=600,
        check=False,  # the exit code is what the test is about
    )
    return done.returncode, done.stdout + (done.stderr or ""), parse_outputs(Path(env["GITHUB_OUTPUT"]).read_text())


def test_push_baseline_then_pull_request_with_real_training(fake_github: FakeGitHub, tmp_path: Path) -> None:
    runner = Runner(fake_github, tmp_path)
    config = yaml.safe_load((ROOT / "configs" / "tiny" / "sft.yaml").read_text())
    (runner.workspace / "canary.yaml").write_text(yaml.safe_dump({**config, "max_steps": 20}))
    fake_github.add_pull(number=2, head_sha=PR_HEAD)

    code, log, outputs = run_entrypoint(runner, "push", "push.json", "refs/heads/master")
    assert code == 0, log
    assert outputs["artifact-name"] == "rlhf-canary-tiny-sft"
    assert outputs["verdict"] == "neutral"  # the first run on the default branch has nothing to compare with
    assert [r for r in fake_github.requests if r.method != "GET"] == []
    # what actions/upload-artifact would upload: the whole output-dir
    output_dir = runner.workspace / "canary-output"
    files = {str(p.relative_to(output_dir)): p.read_bytes() for p in output_dir.rglob("*") if p.is_file()}
    assert outputs["metrics-path"].removeprefix("canary-output/") in files
    push_run = fake_github.add_workflow_run(event="push")
    fake_github.add_artifact(push_run, name="rlhf-canary-tiny-sft", content=make_zip(files))

    code, log, outputs = run_entrypoint(runner, "pull_request", "pull_request.opened.json", "refs/pull/2/merge")

    assert code in (0, 1), log  # pass or regression: a verdict on a comparison, never neutral or a crash
    assert outputs["verdict"] in ("pass", "regression")
    [check] = fake_github.check_runs
    assert check["head_sha"] == PR_HEAD
    assert check["conclusion"] == {"pass": "success", "regression": "failure"}[outputs["verdict"]]
    [comment] = fake_github.comments[2]
    assert comment["body"].startswith("<!-- rlhf-canary:sticky:tiny-sft -->")
    assert f"runs/{push_run}" in comment["body"]  # the baseline run is linked
    assert "ghs_faketoken" not in log.replace("::add-mask::ghs_faketoken", "")


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args], cwd=cwd,
                          capture_output=True, text=True, check=True)  # fmt: skip
    return done.stdout.strip()


def pull_request_payload(tmp: Path, base_sha: str, head_sha: str) -> Path:
    """The real pull_request.opened payload, its base and head pointing at the test repository's commits."""
    payload = json.loads((HOOKS / "pull_request.opened.json").read_text(encoding="utf-8"))
    payload["pull_request"]["base"]["sha"] = base_sha
    payload["pull_request"]["head"]["sha"] = head_sha
    path = tmp / "event.json"
    path.write_text(json.dumps(payload), encoding="utf-8")
    return path


def run_entrypoint_with(runner: Runner, payload: Path, **inputs: str) -> tuple[int, str, dict[str, str]]:
    env = runner.env("pull_request", payload, {k.replace("_", "-"): v for k, v in inputs.items()}, "refs/pull/2/merge")
    done = subprocess.run(
        [sys.executable, str(ROOT / "entrypoint" / "main.py")],
        env={"PATH": os.environ["PATH"], "HOME": str(runner.tmp), "HF_HUB_OFFLINE": "1", **env},
        cwd=runner.workspace, capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    return done.returncode, done.stdout + done.stderr, parse_outputs(Path(env["GITHUB_OUTPUT"]).read_text())


def slowed_pull_request(runner: Runner, tmp_path: Path, *, base_has_config: bool = True) -> tuple[Path, str]:
    """A git workspace with the base commit and a pull request that slows every step (400 planted products);
    (its pull_request.opened payload, the head commit)."""
    workspace = runner.workspace
    config = yaml.safe_load((ROOT / "configs" / "tiny" / "sft.yaml").read_text())
    git(workspace, "init", "-q", "-b", "main")
    (workspace / ".gitattributes").write_text("* filter=planted\n")
    if base_has_config:
        (workspace / "canary.yaml").write_text(yaml.safe_dump({**config, "max_steps": 34}))
    else:
        (workspace / "canary.yaml").unlink()
        (workspace / "README.md").write_text("a team's repository\n")
    git(workspace, "add", ".")
    git(workspace, "commit", "-q", "-m", "base")
    base_sha = git(workspace, "rev-parse", "HEAD")
    slowed = {**config, "max_steps": 34, "fault_injection": {"extra_matmuls_per_step": 400}}
    (workspace / "canary.yaml").write_text(yaml.safe_dump(slowed))  # the pull request slows every step
    git(workspace, "add", ".")
    git(workspace, "commit", "-q", "-m", "head")
    head_sha = git(workspace, "rev-parse", "HEAD")
    # A filter the checkout's own .git/config names for every path (code that ran earlier in the job, as the runner's
    # user, can write it): root's git (the pair's code diff, the fingerprint) must never run it.
    git(workspace, "config", "filter.planted.clean", f"sh -c 'touch {runner.tmp / 'filter-ran'}; cat'")
    runner.fake.add_pull(number=2, head_sha=head_sha)
    return pull_request_payload(tmp_path, base_sha, head_sha), head_sha


def test_by_default_a_pull_request_is_trained_beside_its_base_commit(fake_github: FakeGitHub, tmp_path: Path) -> None:
    """No `baseline` input (auto) on a pull_request event: the base commit is checked out from the repository's
    history, both trees train in turns, one check and one comment say the verdict was paired, and the artifact
    baselines are still searched, as history for the learning checks."""
    runner = Runner(fake_github, tmp_path)
    payload, head_sha = slowed_pull_request(runner, tmp_path)

    code, log, outputs = run_entrypoint_with(runner, payload)

    assert code == 1, log[-4000:]
    assert outputs["verdict"] == "regression"
    [check] = fake_github.check_runs
    assert check["head_sha"] == head_sha
    assert check["conclusion"] == "failure"
    assert "**Paired A/B** on this runner" in check["output"]["summary"]
    assert "minimum effect" in check["output"]["summary"]
    [comment] = fake_github.comments[2]
    assert "**Paired A/B** on this runner" in comment["body"]
    assert [r for r in fake_github.requests if "/actions/workflows/" in r.path], "artifact history searched"
    [pair] = (runner.workspace / "canary-output").glob("*-pair-*")
    assert {p.name for p in pair.iterdir()} >= {"base", "head", "pair.json"}
    record = json.loads((pair / "pair.json").read_text(encoding="utf-8"))
    assert [f["path"] for f in record["code"]["files"]] == ["canary.yaml"]
    # The failure was confirmed by a second pair before the check failed (issue 33), and says so.
    assert (pair / "confirmation" / record["confirmation"] / "pair.json").is_file()
    assert "confirmed by a second pair: +" in check["output"]["summary"]
    assert not (runner.tmp / "filter-ran").exists()


def test_a_pull_request_that_adds_the_canary_is_judged_against_artifacts_and_says_why(
    fake_github: FakeGitHub, tmp_path: Path
) -> None:
    """auto cannot pair when the base commit has no canary config: a notice, the artifact baselines (none yet:
    neutral), never a failed step; `baseline: lockstep` asked for explicitly is exit 2 naming the cause."""
    runner = Runner(fake_github, tmp_path)
    payload, _ = slowed_pull_request(runner, tmp_path, base_has_config=False)
    config = yaml.safe_load((runner.workspace / "canary.yaml").read_text())
    (runner.workspace / "canary.yaml").write_text(yaml.safe_dump({**config, "max_steps": 4, **NO_HELDOUT_BLOCK}))

    code, log, outputs = run_entrypoint_with(runner, payload)

    assert code == 0, log[-4000:]
    assert outputs["verdict"] == "neutral"
    assert "baseline auto: not paired with the base commit: the base commit" in log
    assert "has no canary.yaml (a pull request that adds the canary?)" in log
    assert not list((runner.workspace / "canary-output").glob("*-pair-*"))

    code, log, _ = run_entrypoint_with(runner, payload, baseline="lockstep")
    assert code == 2, log[-4000:]
    assert "has no canary.yaml" in log


FACTORY = """
import os
import subprocess
from pathlib import Path

from canary_action.train.builtin.example_factory import build_trainer as plain


def build_trainer(context):
    leaked = sorted(k for k in os.environ if k.startswith(("INPUT_", "ACTIONS_")) or "TOKEN" in k)
    Path("factory-ran.txt").write_text(f"{Path.cwd()}\\n{leaked}\\n")
    trainer = plain(context)
    # What a hostile pull request would add: workflow commands of its own, and links in its run folder for the
    # upload step to follow on the host.
    print("::add-mask::planted\\n::error::forged by the training", flush=True)
    run = Path(trainer.args.output_dir).parent
    (run / "host-etc").symlink_to("/etc")
    (run / "metrics-copy.json").symlink_to(run / "metrics.json")
    quiet = subprocess.DEVNULL  # and a daemon of its own, double-forked out of its process group
    subprocess.Popen(["sh", "-c", "sleep 300 & echo $! > daemon.pid"], start_new_session=True, stdin=quiet,
                     stdout=quiet, stderr=quiet).wait()
    return trainer
"""


def test_a_trainer_factory_in_the_checked_out_repository_runs_through_the_entrypoint(
    fake_github: FakeGitHub, tmp_path: Path
) -> None:
    """The team's own factory, in their repository only, imports in the canary process — which holds no token; its
    workflow commands stay text, and the links it leaves in the output folder are removed before the upload."""
    runner = Runner(fake_github, tmp_path)
    custom = yaml.safe_load((ROOT / "configs" / "tiny" / "custom.yaml").read_text())
    (runner.workspace / "canary.yaml").write_text(
        yaml.safe_dump(
            {**custom, "trainer_factory": "team_pipeline.factory:build_trainer", "max_steps": 6, **NO_HELDOUT_BLOCK}
        )
    )
    (runner.workspace / "team_pipeline").mkdir()
    (runner.workspace / "team_pipeline" / "__init__.py").write_text("")
    (runner.workspace / "team_pipeline" / "factory.py").write_text(FACTORY)

    code, log, outputs = run_entrypoint(runner, "push", "push.json", "refs/heads/master", merged=True)

    assert code == 0, log[-4000:]
    # Its output was printed with workflow commands off: its forged lines are text.
    lines = log.splitlines()
    forged = lines.index("::error::forged by the training")
    [(stop, token)] = [(i, line.split("::")[2]) for i, line in enumerate(lines[:forged]) if "::stop-commands::" in line]
    assert lines.index(f"::{token}::") > forged > stop
    # Its links were removed before the upload, and the log says so.
    out_dir = (runner.workspace / outputs["metrics-path"]).parents[1]
    assert [p for p in out_dir.rglob("*") if p.is_symlink()] == []
    assert "host-etc (a link)" in log
    assert "metrics-copy.json (a link)" in log
    # Its daemon ended with the training, before anything it wrote was read.
    daemon = int((runner.workspace / "daemon.pid").read_text())
    assert not Path(f"/proc/{daemon}").exists() or Path(f"/proc/{daemon}/stat").read_text().split(") ")[1][0] == "Z"
    ran = (runner.workspace / "factory-ran.txt").read_text().splitlines()
    assert ran == [str(runner.workspace), "[]"], "ran in the repository, and saw no token or action input"
    metrics = json.loads((runner.workspace / outputs["metrics-path"]).read_text())
    assert metrics["config"]["trainer_factory"] == "team_pipeline.factory:build_trainer"
    assert metrics["status"]["state"] == "completed"


HUNT = """
import os
from pathlib import Path

# Each secret as its two halves, reversed: neither this file nor the memory of a process that imports it ever holds
# a whole secret, so a hunter reading another hunter's memory (the evaluator its training process's) finds only what
# leaked.
HALVES = [(a[::-1].encode(), b[::-1].encode()) for a, b in {reversed_halves!r}]
ROOTS = {roots!r}


def _holds(data):
    \"\"\"Whether these bytes hold a whole secret: a first half followed by its second half.\"\"\"
    for first, second in HALVES:
        at = data.find(first)
        while at >= 0:
            if data[at + len(first):at + len(first) + len(second)] == second:
                return True
            at = data.find(first, at + 1)
    return False


def _memory(pid):
    \"\"\"Every readable region of a process's memory, as a debugger would read it.\"\"\"
    with open(f"/proc/{{pid}}/maps") as maps, open(f"/proc/{{pid}}/mem", "rb") as mem:
        for line in maps:
            low, high = (int(x, 16) for x in line.split()[0].split("-"))
            if "r" in line.split()[1] and high - low < 2**28:
                try:
                    mem.seek(low)
                    yield mem.read(high - low)
                except OSError:
                    continue


def hunt(who):
    \"\"\"What pull request code could find: its environment, any process's /proc environ and cmdline, its parent's
    memory, and the files under the job's folders.\"\"\"
    found = [f"env:{{k}}" for k, v in os.environb.items() if _holds(v)]
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        for part in ("environ", "cmdline"):
            try:
                data = (proc / part).read_bytes()
            except OSError:
                continue
            found += [f"/proc/{{proc.name}}/{{part}}"] if _holds(data) else []
    try:
        found += ["parent memory" for region in _memory(os.getppid()) if _holds(region)]
    except OSError:
        pass
    for root in ROOTS:
        for path in Path(root).rglob("*"):
            try:
                small = path.is_file() and path.stat().st_size < 2**24
                found += [str(path)] if small and _holds(path.read_bytes()) else []
            except OSError:
                continue
    Path("hunt-" + who + ".txt").write_text(repr(sorted(set(found))))
"""

#: A reward that hunts where it runs: in training, and in the held-out evaluator (whose working folder is its own).
HOSTILE_REWARD = """
import os
import sys
from pathlib import Path

import hunt

HERE = Path(__file__).resolve().parent


def reward(completions, **_):
    where = os.getcwd()
    os.chdir(HERE)
    try:
        hunt.hunt("reward-" + ("evaluator" if "canary_action/evaluate" in sys.argv[0] else "training"))
    finally:
        os.chdir(where)
    return [0.0 for _ in completions]
"""

SHADOW = "import pathlib; pathlib.Path('shadow-ran.txt').write_text(__name__); raise ImportError('shadowed')\n"


def _hunting_workspace(runner: Runner, config: dict[str, object]) -> dict[str, str]:
    """The workspace of a hostile pull request: a config whose code hunts for tokens, and top-level folders named
    like the libraries training imports. Returns the secrets the runner holds."""
    secrets = {"INPUT_GITHUB-TOKEN": "ghs_hunted_input_token", "ACTIONS_RUNTIME_TOKEN": "hunted_runtime_token",
               "ACTIONS_ID_TOKEN_REQUEST_TOKEN": "hunted_oidc_token"}  # fmt: skip
    fake = runner.fake
    fake.token = secrets["INPUT_GITHUB-TOKEN"]
    halves = [(v[: len(v) // 2][::-1], v[len(v) // 2 :][::-1]) for v in secrets.values()]
    (runner.workspace / "hunt.py").write_text(HUNT.format(reversed_halves=halves, roots=[str(runner.tmp)]))
    for library in ("accelerate", "trl", "datasets"):
        (runner.workspace / library).mkdir()
        (runner.workspace / library / "__init__.py").write_text(SHADOW)
    (runner.workspace / "canary.yaml").write_text(yaml.safe_dump(config))
    return secrets


def test_pull_request_code_finds_no_token_anywhere(fake_github: FakeGitHub, tmp_path: Path) -> None:
    """The worst case: mode run on a pull request, the write token in the action's own environment. A factory
    and a module named like a library look for it in the environment, every /proc/*/environ and cmdline, the
    parent's memory and the job's files; none of the tokens is there, and no library is shadowed."""
    runner = Runner(fake_github, tmp_path)
    custom = yaml.safe_load((ROOT / "configs" / "tiny" / "custom.yaml").read_text())
    config = {**custom, "trainer_factory": "hostile:build_trainer", "max_steps": 4}
    secrets = _hunting_workspace(runner, config)
    (runner.workspace / "hostile.py").write_text(
        "from canary_action.train.builtin.example_factory import build_trainer as plain\n"
        "import hunt\n\n\ndef build_trainer(context):\n    hunt.hunt('factory')\n    return plain(context)\n"
    )
    fake_github.add_pull(number=2, head_sha=PR_HEAD)

    code, log, _ = run_entrypoint(runner, "pull_request", "pull_request.opened.json", "refs/pull/2/merge", secrets)

    assert code == 0, log[-4000:]
    assert (runner.workspace / "hunt-factory.txt").read_text() == "[]"
    assert not (runner.workspace / "shadow-ran.txt").exists()
    assert len(fake_github.check_runs) == 1  # the parent did hold the token, and published with it


def test_a_setup_command_and_a_shadowing_venv_module_find_no_token_either(
    fake_github: FakeGitHub, tmp_path: Path
) -> None:
    """The setup input on: its environment is made before any of the pull request's code runs (a top-level venv.py
    in the checkout ran with the token when `python -m venv` started there), and the command itself, the pull
    request's code, hunts in a scrubbed environment."""
    runner = Runner(fake_github, tmp_path)
    sft = yaml.safe_load((ROOT / "configs" / "tiny" / "sft.yaml").read_text())
    secrets = _hunting_workspace(runner, {**sft, "max_steps": 4, **NO_HELDOUT_BLOCK})
    (runner.workspace / "venv.py").write_text(SHADOW)
    (runner.workspace / "sysconfig.py").write_text(SHADOW)
    setup = {"INPUT_SETUP": 'python -c \'exec(open("hunt.py").read()); hunt("setup")\''}

    code, log, _ = run_entrypoint(runner, "push", "push.json", "refs/heads/master", {**secrets, **setup})

    assert code == 0, log[-4000:]
    assert (runner.workspace / "hunt-setup.txt").read_text() == "[]"
    assert not (runner.workspace / "shadow-ran.txt").exists()


def test_a_reward_function_finds_no_token_either(fake_github: FakeGitHub, tmp_path: Path) -> None:
    runner = Runner(fake_github, tmp_path)
    grpo = yaml.safe_load((ROOT / "configs" / "tiny" / "grpo.yaml").read_text())
    config = {**grpo, "reward_funcs": ["hostile_reward:reward", "builtin:length"], "max_steps": 2}
    secrets = _hunting_workspace(runner, config)
    (runner.workspace / "hostile_reward.py").write_text(HOSTILE_REWARD)

    code, log, _ = run_entrypoint(runner, "push", "push.json", "refs/heads/master", secrets)

    assert code == 0, log[-4000:]
    assert (runner.workspace / "hunt-reward-training.txt").read_text() == "[]"
    # The held-out evaluator scored completions with the same reward, in a process of its own: it holds none either.
    assert (runner.workspace / "hunt-reward-evaluator.txt").read_text() == "[]"
    assert not (runner.workspace / "shadow-ran.txt").exists()


KILLER = """
import os
import signal

from transformers import TrainerCallback

from canary_action.train.builtin.example_factory import build_trainer as plain


class KillAt(TrainerCallback):
    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == 3:
            os.kill(os.getpid(), signal.SIGKILL)  # as the out-of-memory killer would, or a native crash


def build_trainer(context):
    trainer = plain(context)
    trainer.add_callback(KillAt())
    return trainer
"""


def test_a_training_process_killed_mid_run_leaves_its_steps_and_a_completed_check(
    fake_github: FakeGitHub, tmp_path: Path
) -> None:
    """SIGKILL cannot be caught: the child streamed each step, and the action (its parent) finishes metrics.json
    from the stream and completes the check run it started as a failure."""
    runner = Runner(fake_github, tmp_path)
    custom = yaml.safe_load((ROOT / "configs" / "tiny" / "custom.yaml").read_text())
    (runner.workspace / "canary.yaml").write_text(
        yaml.safe_dump({**custom, "trainer_factory": "killer:build_trainer", "max_steps": 8, **NO_HELDOUT_BLOCK})
    )
    (runner.workspace / "killer.py").write_text(KILLER)
    fake_github.add_pull(number=2, head_sha=PR_HEAD)

    code, log, outputs = run_entrypoint(runner, "pull_request", "pull_request.opened.json", "refs/pull/2/merge")

    assert code == 3, log[-4000:]
    assert "killed by signal 9 (SIGKILL)" in log
    metrics = json.loads((runner.workspace / outputs["metrics-path"]).read_text())
    assert (metrics["status"]["state"], metrics["status"]["reason"], metrics["status"]["step"]) == (
        "failed",
        "killed",
        3,
    )
    assert metrics["series"]["step"] == [1.0, 2.0]  # the steps measured before the kill
    [check] = fake_github.check_runs
    assert (check["status"], check["conclusion"]) == ("completed", "failure")
    assert outputs["verdict"] == "crashed"
