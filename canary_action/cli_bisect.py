"""`canary bisect`: which commit made the canary slower, found with lockstep pairs (docs/bisect.md)."""

from __future__ import annotations

from pathlib import Path

import click

from canary_action.cli_options import threshold_options
from canary_action.cli_pair import cpu_list
from canary_action.cli_report import emit
from canary_action.config.thresholds import Tier
from canary_action.destinations import output_folder
from canary_action.errors import UsageError
from canary_action.extras import require_training_stack

DEFAULT_OUT = Path("canary-bisect")


@click.command("bisect")
@click.argument("config", type=click.Path(path_type=Path))
@click.option("--good", required=True, help="The last commit known good (SHA, branch or tag).")
@click.option("--bad", required=True, help="The first commit known bad: the regression to explain.")
@click.option("-o", "--output-dir", type=click.Path(path_type=Path), default=DEFAULT_OUT, show_default=True,
              help="Write bisect.json, bisect.md and every pair (pairs/) here.")  # fmt: skip
@click.option("--set", "overrides", multiple=True, metavar="KEY.PATH=VALUE", help="Override a config key everywhere.")
@click.option("--setup", help="A shell command run in each commit's tree first, as `canary pair --setup`.")
@click.option("--check", "check", help="The check to follow (default: the first the confirming pair fails).")
@click.option("--max-pairs", type=click.IntRange(min=1),
              help="Pairs for one regression, the confirming one included (default: floor(log2 N) + 2).")  # fmt: skip
@click.option("--chunk-steps", default=2, show_default=True, help="Optimizer steps each side trains per turn.")
@click.option("--cpus", help="CPUs both sides share, e.g. 0 or 0-3 (as `canary pair --cpus`).")
@threshold_options
@click.option("--json", "as_json", is_flag=True, help="Print bisect.json instead of the report.")
@click.option("--format", "kind", type=click.Choice(["terminal", "markdown"]),
              help="The report on stdout: terminal (default) or GitHub markdown (as bisect.md).")  # fmt: skip
def bisect_command(  # click passes options as keywords
    *,
    config: Path,
    good: str,
    bad: str,
    output_dir: Path,
    overrides: tuple[str, ...],
    setup: str | None,
    check: str | None,
    max_pairs: int | None,
    chunk_steps: int,
    cpus: str | None,
    tier: Tier,
    threshold_file: Path | None,
    as_json: bool,
    kind: str | None,
) -> None:
    """Find the commit between --good and --bad that made CONFIG's canary regress, with lockstep pairs.

    Run it in your repository's checkout. One pair of the bad commit against the good one confirms the regression
    and picks the check to follow; then each step trains a commit of the first-parent history in between against
    the good commit, until one commit is left. A commit that cannot build or train is skipped. It stops, and says
    so, when a step's effect is not clear rather than name a wrong commit; changes that add up in steps are
    reported as several. CONFIG is a path inside each commit's tree. Exit 0 when it ran to an end (the report
    says what it found), 2 for bad input (not a repository, unknown commits), 3 when the good or the bad commit
    cannot be trained.
    """
    from canary_action.bisect.render import render_markdown, render_terminal
    from canary_action.bisect.runner import BisectPlan, run_bisect

    if as_json and kind is not None:
        raise UsageError("--json prints bisect.json, not a report", fix="leave out --format")
    if setup is None:
        require_training_stack("`canary bisect`")
    output_folder(output_dir, flag="-o")
    plan = BisectPlan(
        config=config, overrides=overrides, setup=setup, chunk_steps=chunk_steps, cpus=cpu_list(cpus) if cpus else None,
        tier=tier, threshold_file=threshold_file, check=check, max_pairs=max_pairs,
    )  # fmt: skip
    result = run_bisect(Path.cwd(), good, bad, output_dir, plan, say=lambda line: click.echo(line, err=True))
    markdown = render_markdown(result)
    (output_dir / "bisect.md").write_text(markdown, encoding="utf-8")
    if as_json:
        text = result.model_dump_json(indent=2) + "\n"
    else:
        text = markdown if kind == "markdown" else render_terminal(result)
    emit(text, None, result.summary)
