"""One run of the action, as every mode sees it: its inputs and context, the pull request and commit results
go to, where they are written, and the GitHub calls that several modes make (the config, the baselines,
completing a check run).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Final

from canary_action.compare.result import RESULT_FILE, CompareResult, Verdict
from canary_action.errors import CanaryError, GitHubError, UsageError
from canary_action.github.baseline_fetch import FetchedBaselines, fetch_baselines
from canary_action.github.client import GitHubClient
from canary_action.github.commands import Log, append_summary
from canary_action.github.context import EventContext
from canary_action.github.inputs import ActionInputs, RunnerEnv
from canary_action.github.publish import Annotation, Conclusion, Published, Publisher, check_name, conclusion_of
from canary_action.report.escape import slug
from canary_action.report.view import Links

if TYPE_CHECKING:
    from canary_action.config.load import LoadedConfig
    from canary_action.report.templates import Templates

ARTIFACT_PREFIX: Final = "rlhf-canary-"
CHECK_TEXT_MAX: Final = 65_535  # GitHub's limit on a check run's output text
REPORT_FILE: Final = "report.md"


def default_artifact(config_name: str) -> str:
    return ARTIFACT_PREFIX + slug(config_name)


def _carry_effects(output: dict[str, str], result: CompareResult) -> None:
    """A pair's judged effects, hidden at the end of the check run's text: the history step reads them back when the
    pull request is merged (docs/history.md). Left out where the text would pass GitHub's 65,535 characters."""
    from canary_action.history.collect import effects_marker

    marker = effects_marker(result)
    text = output.get("text", "")
    if marker is not None and len(text) + len(marker) + 2 <= CHECK_TEXT_MAX:
        output["text"] = f"{text}\n\n{marker}" if text else marker


def history_page(step: Step, config_name: str) -> str | None:
    """The config's page of the published history site, when the history-url input says where it is."""
    from canary_action.history.site import page_name

    url = step.inputs.history_url
    return f"{url.rstrip('/')}/{page_name(config_name)}" if url else None


def bisect_artifact(config_name: str) -> str:
    """mode bisect's upload, which the publish job (report mode) looks for in a run with no pull request."""
    return ARTIFACT_PREFIX + "bisect-" + slug(config_name)


@dataclass(frozen=True)
class Target:
    """The pull request results are published on, and its head commit (never the merge commit)."""

    pr_number: int
    head_sha: str


@dataclass
class Step:
    """One run of the action: its inputs, context, and what it has produced so far."""

    inputs: ActionInputs
    runner: RunnerEnv
    ctx: EventContext
    client: GitHubClient
    log: Log
    outputs: dict[str, str] = field(default_factory=dict)
    problems: list[CanaryError] = field(default_factory=list)
    """Failures met after the measurement (GitHub down): reported, and exit 3, but nothing is lost."""
    templates: Templates | None = None
    """The team's report templates (the `templates` input, team_templates.py); None: ours."""

    @property
    def out_dir(self) -> Path:
        return self.runner.workspace / self.inputs.output_dir

    def relative(self, path: Path) -> str:
        """Paths in outputs are relative to the workspace: the action's /github/workspace is not the host's."""
        try:
            return str(path.relative_to(self.runner.workspace))
        except ValueError:
            return str(path)

    def run_url(self) -> str | None:
        if self.runner.run_id is None:
            return None
        return f"{self.runner.server_url}/{self.runner.repository}/actions/runs/{self.runner.run_id}"

    def publisher(self) -> Publisher:
        return Publisher(self.client, self.runner.repository)

    def degrade(self, error: GitHubError, doing: str) -> None:
        """A refused write (read-only token) is a warning naming the permission; anything else is a problem."""
        if error.forbidden:
            self.log.annotate("warning", f"{error.message}. {error.fix}", title=f"rlhf-canary could not {doing}")
        else:
            self.problems.append(error)

    def write_result(self, result: CompareResult, links: Links, prefix: str = "") -> tuple[Path, Path]:
        from canary_action.github.team_templates import settle_team_templates
        from canary_action.report.render import render

        # a team template that fails falls back to ours, said
        self.templates = settle_team_templates(self.templates, self.log, self.runner.summary_path, result, links)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.check_output_dir()  # again: the pull request's code ran meanwhile, as a user who can replace it
        result_path = self.out_dir / f"{prefix}{RESULT_FILE}"
        report_path = self.out_dir / f"{prefix}{REPORT_FILE}"
        replace_file(result_path, result.model_dump_json(indent=2) + "\n")
        replace_file(report_path, render(result, "markdown", links, self.templates))
        append_summary(self.runner.summary_path, render(result, "summary", links, self.templates))
        self.outputs.update(
            {
                "verdict": result.verdict,
                "result-path": self.relative(result_path),
                "report-path": self.relative(report_path),
            }
        )
        return result_path, report_path

    def publish(
        self,
        result: CompareResult,
        links: Links,
        target: Target,
        check: Published | None,
        annotations: list[Annotation],
        *,
        config_name: str | None = None,
    ) -> None:
        """Complete the check run (a new one unless `check` is this run's) on the target commit, then the comment.
        `config_name` names the check and the sticky comment: the trusted side's config's name (default: the
        measured config's, for a run that measured trusted code)."""
        config_name = config_name or result.current.config_name
        self.publish_check(result, links, target.head_sha, check, annotations, config_name=config_name)
        self.publish_comment(result, links, target.pr_number, config_name=config_name)

    def publish_check(
        self,
        result: CompareResult,
        links: Links,
        head_sha: str,
        check: Published | None,
        annotations: list[Annotation],
        *,
        config_name: str,
    ) -> None:
        """Complete `check`, or a new check run on `head_sha`; a refusal degrades (see `degrade`)."""
        from canary_action.report.render import check_output

        publisher = self.publisher()
        try:
            check = check or publisher.start_check(check_name(config_name), head_sha, self.run_url())
            conclusion = conclusion_of(result.verdict, self.inputs.fail_on)
            output = check_output(result, links, self.templates)
            _carry_effects(output, result)
            done = publisher.finish_check(check, conclusion, output, annotations)
            self.outputs["check-run-url"] = done.url or ""
        except GitHubError as e:
            self.degrade(e, "complete the check run")

    def publish_refusal(
        self, config_name: str, sha: str, details_url: str | None, title: str, error: CanaryError
    ) -> None:
        """A failed check run on `sha` saying why the run was not judged (error's message and fix, inert); a refusal
        degrades."""
        from canary_action.github.publish import check_name
        from canary_action.report.escape import text

        output = {
            "title": f"rlhf-canary: {title}",
            "summary": f"{text(error.message, 2000)}\n\nfix: {text(error.fix, 1000)}",
        }
        publisher = self.publisher()
        try:
            check = publisher.start_check(check_name(config_name), sha, details_url)
            done = publisher.finish_check(check, "failure", output)
            self.outputs["check-run-url"] = done.url or ""
        except GitHubError as e:
            self.degrade(e, "write the check run")

    def publish_comment(self, result: CompareResult, links: Links, pr_number: int, *, config_name: str) -> None:
        """Create or update the sticky comment as the `comment` input says; a refusal degrades."""
        from canary_action.report.render import render
        from canary_action.report.view import sticky_marker

        try:
            marker = sticky_marker(config_name)
            body = render(result, "comment", links, self.templates)
            comment = self.publisher().upsert_comment(pr_number, marker, body, result.verdict, self.inputs.comment)
            if comment is not None and comment.note:
                self.log.annotate("warning", comment.note, title="rlhf-canary: no comment")
            elif comment is not None:
                self.outputs["comment-url"] = comment.url or ""
        except GitHubError as e:
            self.degrade(e, "write the PR comment")

    def clear_output_dir(self) -> None:
        """Start from an empty output-dir inside the workspace: a self-hosted runner keeps its workspace, and an
        earlier run's files would otherwise travel in this run's artifact (and become a second baseline). One
        that leads out of the workspace (`..`, a symbolic link a checked-out repository can hold) is refused:
        the action writes as root, and the upload step would not find it either."""
        self.check_output_dir()
        out_dir = self.out_dir
        if not out_dir.is_dir() or not any(out_dir.iterdir()):
            return
        self.log.line(f"clearing {out_dir} (files of an earlier run)")
        shutil.rmtree(out_dir)

    def check_output_dir(self) -> None:
        """UsageError unless output-dir is a folder (or nothing yet) inside the workspace, reached without a link."""
        out_dir, workspace = self.out_dir, self.runner.workspace.resolve()
        resolved = out_dir.resolve()
        if resolved == workspace or workspace not in resolved.parents:
            raise UsageError(
                f"output-dir {self.inputs.output_dir} leads to {resolved}, not to a folder inside the workspace",
                fix="set output-dir to a folder of its own under the workspace (the default: canary-output), "
                "not a symbolic link",
            )
        if out_dir.is_symlink() or (out_dir.exists() and not out_dir.is_dir()):
            raise UsageError(
                f"output-dir {self.inputs.output_dir} is {'a symbolic link' if out_dir.is_symlink() else 'a file'}",
                fix="set output-dir to a folder of its own under the workspace (the default: canary-output)",
            )

    def still_head(self, target: Target) -> bool:
        """Whether the pull request's head is still the measured commit; a notice when it moved on."""
        pull = self.client.request("GET", f"/repos/{self.runner.repository}/pulls/{target.pr_number}").body
        current = str((pull.get("head") or {}).get("sha"))
        if current == target.head_sha:
            return True
        self.log.annotate(
            "notice",
            f"measured {target.head_sha[:12]}, but pull request #{target.pr_number} is now at {current[:12]}: "
            "the results are not published on it (the newer commit's run reports)",
            title="rlhf-canary: the pull request moved on",
        )
        return False

    def exit_code(self, verdict: Verdict | None) -> int:
        for problem in self.problems:
            self.log.annotate("error", f"{problem.message}. fix: {problem.fix}", title=problem.title)
        if verdict == "crashed":
            return 3
        if verdict == "regression" and self.inputs.fail_on == "regression":
            return 1
        return 3 if self.problems else 0


def read_config(step: Step) -> LoadedConfig:
    from canary_action.config.load import load_config
    from canary_action.errors import ConfigError

    try:
        loaded = load_config(step.runner.workspace / step.inputs.config)
    except ConfigError as e:
        step.log.annotate("error", e.render(), title=e.title, file=step.inputs.config)
        e.annotated = True
        raise
    for notice in loaded.notices:
        step.log.annotate("notice", notice, title="rlhf-canary config")
    return loaded


def fetch_for(
    step: Step, artifact: str, dest: Path, *, workflow_file: str | None = None, pull_head: str | None = None
) -> FetchedBaselines:
    """The baselines of `artifact`: default-branch runs of `baseline-workflow`, else of `workflow_file` (default:
    the running workflow's); for a pull request's measured commit `pull_head`, its merge base's run first."""
    ctx, inputs = step.ctx, step.inputs
    workflow_file = inputs.baseline_workflow or workflow_file
    branch = inputs.baseline_branch or ctx.default_branch
    try:
        if branch is None:
            repo = step.client.request("GET", f"/repos/{step.runner.repository}").body
            branch = str(repo["default_branch"])
        return fetch_baselines(
            step.client,
            repository=step.runner.repository,
            workflow_file=workflow_file or ctx.workflow_file,
            branch=branch,
            artifact=artifact,
            wanted=inputs.baseline_runs,
            dest=dest,
            run_id=inputs.baseline_run_id,
            pull_head=pull_head,
        )
    except GitHubError as e:
        step.degrade(e, "fetch the baselines")
        return FetchedBaselines(notes=[f"baselines could not be fetched: {e.message}"])


def complete_check(
    step: Step, check: Published, conclusion: Conclusion, summary: str, title: str | None = None
) -> None:
    output = {"title": f"rlhf-canary: {title or conclusion}", "summary": summary}
    try:
        step.publisher().finish_check(check, conclusion, output)
    except GitHubError as e:
        step.degrade(e, "complete the check run")


def replace_file(path: Path, text: str) -> None:
    """Write `text` to a new file that then takes `path`'s name: a link planted there is replaced, not followed."""
    partial = path.with_name(f".{path.name}.partial")
    partial.unlink(missing_ok=True)
    partial.write_text(text, encoding="utf-8")
    partial.replace(path)
