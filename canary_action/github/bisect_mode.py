"""mode bisect: which commit between `good` and `bad` made the canary regress (`canary bisect`, docs/bisect.md), in
the job that holds no token — the publish job (report mode, bisect_report.py) opens the issue.

1. read the workspace's config (its name names the artifact) and write `artifact-name` for the upload step;
2. check that the checkout holds the history from `good` to `bad` (actions/checkout fetches one commit unless
   told `fetch-depth: 0`), and say so, naming that fix, when it does not;
3. run the bisect over the workspace's git history: one lockstep pair of bad against good confirms the
   regression, then pairs of the first-parent commits in between, each in a git worktree
   (canary_action/bisect/), into <output-dir>/bisect/: bisect.json, bisect.md and pairs/;
4. write bisect.md to the job summary and the outputs. No token is read, no request is made.

Exit 0 when the bisect ran to an end, whatever it found (bisect.md says what); 2 for bad input (no good commit, a
shallow checkout, a commit the history lacks); 3 when the good or the bad commit cannot train (what the pairs
measured until then is still written and summarised).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Final

from canary_action.bisect.history import git
from canary_action.errors import CanaryError, UsageError
from canary_action.github import gpu
from canary_action.github.commands import append_summary, write_outputs
from canary_action.github.step import Step, bisect_artifact, read_config, replace_file

if TYPE_CHECKING:
    from canary_action.bisect.result import BisectResult

BISECT_DIR: Final = "bisect"
_FETCH_FIX: Final = (
    "check out with `fetch-depth: 0` (actions/checkout): a bisect walks the history from the good commit to the bad "
    "one (docs/examples/nightly.yml)"
)


def bisect_mode(step: Step) -> int:
    from canary_action.bisect.result import BisectResult
    from canary_action.bisect.runner import BisectPlan, run_bisect
    from canary_action.extras import require_training_stack

    inputs, runner, log = step.inputs, step.runner, step.log
    loaded = read_config(step)
    gpu.require_gpu(step.inputs.gpu, loaded.config)
    artifact = bisect_artifact(loaded.config.name)
    step.outputs["artifact-name"] = artifact
    write_outputs(runner.output_path, {"artifact-name": artifact})  # for the upload step, even on a failure
    step.clear_output_dir()
    good, bad = _commits(step)
    if inputs.setup is None:
        require_training_stack("mode bisect")
    out = step.out_dir / BISECT_DIR
    plan = BisectPlan(
        config=Path(inputs.config),
        setup=inputs.setup,
        tier=inputs.tier,
        threshold_file=runner.workspace / inputs.thresholds if inputs.thresholds else None,
    )
    # Commit subjects and the pairs' output are text of the commits: no line of theirs may be a workflow command.
    result: BisectResult | None = None
    stopped: CanaryError | None = None
    with log.commands_off():
        try:
            check_history(runner.workspace, good, bad)
            result = run_bisect(runner.workspace, good, bad, out, plan, say=log.line)
        except CanaryError as error:
            stopped = error
    if stopped is not None:
        if (out / "bisect.json").is_file():  # a pair of the good commit stopped: what was measured is reported
            _report(step, out, BisectResult.model_validate_json((out / "bisect.json").read_bytes()))
        raise stopped
    assert result is not None
    _report(step, out, result)
    log.line(f"results in {step.relative(step.out_dir)}/ (upload them as {artifact}; the publish job opens the issue)")
    return 0


def _report(step: Step, out: Path, result: BisectResult) -> None:
    """bisect.md beside bisect.json, the job summary, and the outputs."""
    from canary_action.bisect.render import render_markdown
    from canary_action.github.bisect_report import inert

    markdown = render_markdown(inert(result))  # commit subjects are their authors' text: inert in the summary too
    replace_file(out / "bisect.md", markdown)
    append_summary(step.runner.summary_path, markdown)
    step.outputs["result-path"] = step.relative(out / "bisect.json")
    step.outputs["report-path"] = step.relative(out / "bisect.md")
    step.log.untrusted(f"rlhf-canary bisect {result.status}: {result.summary}")


def _commits(step: Step) -> tuple[str, str]:
    good, bad = step.inputs.good, step.inputs.bad or step.runner.sha
    if good is None:
        raise UsageError(
            "mode bisect needs `good`: the last commit known good",
            fix="pass `good: ${{ needs.nightly.outputs.baseline-sha }}` (the nightly's newest baseline), or a SHA "
            "(docs/examples/nightly.yml)",
        )
    if bad is None:
        raise UsageError("mode bisect needs `bad`, and GITHUB_SHA is unset", fix="pass `bad:` the first bad commit")
    return good, bad


def check_history(workspace: Path, good: str, bad: str) -> None:
    """UsageError, naming the fix, unless the workspace is a git checkout holding both commits, good before bad."""
    if not (workspace / ".git").exists():
        raise UsageError(
            f"mode bisect needs the repository checked out with git; {workspace} is no git repository",
            fix=_FETCH_FIX,
        )
    shallow = git(workspace, "rev-parse", "--is-shallow-repository").strip() == "true"
    where = "this shallow checkout (actions/checkout's default fetches one commit)" if shallow else "the checkout"
    for name, rev in (("good", good), ("bad", bad)):
        if not _says_yes(workspace, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}"):
            raise UsageError(
                f"the {name} commit {rev} is not in {where}",
                fix=_FETCH_FIX if shallow else f"pass a SHA, branch or tag of this repository's history as `{name}`",
            )
    if shallow and not _says_yes(workspace, "merge-base", "--is-ancestor", good, bad):
        raise UsageError(f"the history from the good commit {good} to the bad {bad} is not in {where}", fix=_FETCH_FIX)


def _says_yes(workspace: Path, *args: str) -> bool:
    """Whether a git question (is it a commit? an ancestor?) is answered yes: its exit status, 1 being no."""
    try:
        git(workspace, *args)
    except UsageError:
        return False
    return True
