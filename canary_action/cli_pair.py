"""`canary pair`: a lockstep A/B of two code trees, judged round by round (docs/lockstep.md)."""

from __future__ import annotations

from pathlib import Path

import click

from canary_action.cli_options import ACCEPT_NUMERICS_HELP, threshold_options
from canary_action.cli_report import emit, emit_report, result_json
from canary_action.compare.confirm import CONFIRM_CAP_S
from canary_action.config.thresholds import Tier
from canary_action.destinations import output_folder
from canary_action.errors import ConfigError, TrainingError, UsageError
from canary_action.exit_codes import verdict_exit_code
from canary_action.extras import require_training_stack


@click.command("pair")
@click.argument("config", type=click.Path(path_type=Path))
@click.option("--base", "base_tree", required=True, type=click.Path(path_type=Path), help="The base commit's tree.")
@click.option("--head", "head_tree", required=True, type=click.Path(path_type=Path), help="The PR's tree.")
@click.option("-o", "--output-dir", type=click.Path(path_type=Path), help="Write the pair here instead of output_dir.")
@click.option(
    "--set", "overrides", multiple=True, metavar="KEY.PATH=VALUE", help="Override a config key on both sides."
)
@click.option("--chunk-steps", default=2, show_default=True, help="Optimizer steps each side trains per turn.")
@click.option(
    "--seed", type=int, help="Seed of the random orders (start, and inside each round); default: drawn, recorded."
)
@click.option("--cpus", help="CPUs both sides share, e.g. 0 or 0-3 (default: the first cpu_threads this may use).")
@click.option("--setup", help="A shell command run in each tree first, installing into a per-side environment.")
@click.option(
    "--confirm-minutes", type=click.FloatRange(min=0), default=CONFIRM_CAP_S / 60, show_default=True,
    help="A speed check that fails is confirmed by a second pair of fresh processes, capped at this many minutes "
    "(a first pair longer than that is not repeated); 0: never.",
)  # fmt: skip
@click.option("--baseline", "baselines", multiple=True, type=click.Path(path_type=Path),
              help="Artifact baselines too (repeatable): history for the learning checks.")  # fmt: skip
@threshold_options
@click.option("--accept-numerics-change", "accept_numerics", is_flag=True, help=ACCEPT_NUMERICS_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON instead of the report.")
@click.option(
    "--format", "kind", type=click.Choice(["terminal", "markdown"]),
    help="The report on stdout, as `canary compare` prints it. terminal (default): for people (aligned columns, "
    "colour on a terminal); markdown: GitHub markdown. report.md in the pair's directory is always markdown.",
)  # fmt: skip
def pair_command(  # click passes options as keywords
    *,
    config: Path,
    base_tree: Path,
    head_tree: Path,
    output_dir: Path | None,
    overrides: tuple[str, ...],
    chunk_steps: int,
    seed: int | None,
    cpus: str | None,
    setup: str | None,
    confirm_minutes: float,
    baselines: tuple[Path, ...],
    tier: Tier,
    threshold_file: Path | None,
    accept_numerics: bool,
    as_json: bool,
    kind: str | None,
) -> None:
    """Train CONFIG from two code trees in lockstep and judge the head against the base, round by round.

    CONFIG is a path inside each tree (a PR may change it). Each side runs with its own tree on the import path
    (after the installed packages) and as its working directory. Writes DIR/<pair_id>/{base,head}/metrics.json,
    pair.json, result.json and report.md (GitHub markdown); prints the report as `canary compare` does. Exit codes
    as `canary compare`; 2 when the head side refused its config, 3 when it crashed or the pair hung (after both
    sides' measurements are written and judged). A base side that cannot run is no fault of the pull request: the
    verdict is neutral and the notes say how it failed. A speed check that fails is confirmed by a second pair
    (DIR/<pair_id>/confirmation/) before it fails the pair: docs/lockstep.md.
    """
    from canary_action.compare.pair_judge import judge_pair
    from canary_action.train.launch.confirm_pair import run_confirmed

    if as_json and kind is not None:  # before training: known at once
        raise UsageError("--json prints the result, not a report", fix="leave out --format")
    if setup is None:  # both sides train with this interpreter (with --setup, each in the environment it installs)
        require_training_stack("`canary pair`")
    if output_dir is not None:
        output_folder(output_dir, flag="-o")
    outcome = run_confirmed(
        base_tree, head_tree, config, output_dir=output_dir, overrides=overrides, chunk_steps=chunk_steps,
        seed=seed, cpus=cpu_list(cpus) if cpus else None, setup=setup, cap_s=confirm_minutes * 60, tier=tier,
        threshold_file=threshold_file, say=lambda text: click.echo(f"canary pair: {text}", err=True),
    )  # fmt: skip
    if not outcome.head.exists() or isinstance(outcome.error, ConfigError):
        raise outcome.error or TrainingError("the head side wrote no metrics.json", fix="read the log above")
    result = judge_pair(outcome, baselines, tier=tier, threshold_file=threshold_file, numerics_accepted=accept_numerics)
    if as_json:
        emit(result_json(result), None, f"{result.verdict}: {result.reason}")
    else:
        emit_report(result, kind or "terminal", None, f"{result.verdict}: {result.reason}")
    if outcome.error is not None:
        raise outcome.error
    code = verdict_exit_code(result.verdict)
    if code:
        raise click.exceptions.Exit(code)


def cpu_list(text: str) -> list[int]:
    """`0`, `0,2` or `0-3` as a list of CPU numbers."""
    cpus: list[int] = []
    try:
        for part in text.split(","):
            low, _, high = part.partition("-")
            cpus += range(int(low), int(high or low) + 1)
    except ValueError:
        raise UsageError(f"--cpus {text!r} is not a CPU list", fix="write it as 0, 0,2 or 0-3") from None
    return cpus
