"""The `canary` command. The one place where exceptions become exit codes.

Exit codes (DESIGN.md): 0 pass or neutral, 1 regression, 2 bad input (config, baseline, usage),
3 infrastructure failure (training crashed, GitHub unreachable), 130 interrupted (Ctrl-C or SIGTERM; a run
says what it kept).

Light commands (env, schema, init-config, save-baseline) do not import torch: `run` imports the training
side inside the command.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import traceback
from pathlib import Path
from typing import TYPE_CHECKING

import click

from canary_action import __version__, interrupts
from canary_action.cli_bisect import bisect_command
from canary_action.cli_github import gh_report_command
from canary_action.cli_history import history_command
from canary_action.cli_options import ACCEPT_NUMERICS_HELP, threshold_options
from canary_action.cli_pair import pair_command
from canary_action.cli_replay import replay_command
from canary_action.cli_report import (
    TEMPLATES_HELP,
    check_templates,
    emit,
    emit_report,
    report_command,
    report_kind,
    result_json,
)
from canary_action.cli_summary import run_summary
from canary_action.config.thresholds import Tier
from canary_action.destinations import output_folder, write_output
from canary_action.errors import (
    CanaryError,
    ConfigError,
    GitHubError,
    MetricsFileError,
    RunInterrupted,
    TrainingError,
    UsageError,
)
from canary_action.exit_codes import EXIT_BAD_INPUT, EXIT_INFRA, EXIT_INTERRUPTED, verdict_exit_code
from canary_action.extras import TRAINING_STACK, missing_training_stack, require_training_stack
from canary_action.scratch import own_temporary_folder

if TYPE_CHECKING:
    pass

_EXIT_CODES: dict[type[CanaryError], int] = {
    ConfigError: EXIT_BAD_INPUT,
    UsageError: EXIT_BAD_INPUT,
    MetricsFileError: EXIT_BAD_INPUT,  # BaselineError too
    TrainingError: EXIT_INFRA,
    GitHubError: EXIT_INFRA,
}
_TYPES = ("sft", "dpo", "grpo", "rloo", "ppo", "custom")
_TIERS = ("smoke", "perf", "nightly")


def exit_code(error: CanaryError) -> int:
    for kind in type(error).__mro__:
        if kind in _EXIT_CODES:
            return _EXIT_CODES[kind]
    return EXIT_INFRA


def main() -> None:
    # Ctrl-C and a cancelled CI job's SIGTERM as interrupts that cannot be lost: `run` and `pair` write what they
    # measured before exiting.
    interrupts.install()
    try:
        # Not standalone, so that errors reach the handlers below; click then *returns* a command's exit code.
        with own_temporary_folder():
            code = cli.main(prog_name="canary", standalone_mode=False)
        if isinstance(code, int) and code:
            sys.exit(code)
    except CanaryError as error:
        click.echo(error.render(), err=True)
        _record_error(error)
        sys.exit(exit_code(error))
    except click.exceptions.Exit as done:
        sys.exit(done.exit_code)
    except click.ClickException as error:
        error.show()
        sys.exit(EXIT_BAD_INPUT)
    except click.Abort as abort:  # click's word for a KeyboardInterrupt (Ctrl-C, or SIGTERM below)
        click.echo(_interrupted_message(abort.__cause__), err=True)
        sys.exit(EXIT_INTERRUPTED)
    except Exception:  # the unexpected: a traceback is the most useful thing to show
        traceback.print_exc()
        click.echo(
            f"rlhf-canary {__version__}: unexpected error (a bug: please report it with the traceback)",
            err=True,
        )
        sys.exit(EXIT_INFRA)


def _interrupted_message(cause: BaseException | None) -> str:
    """What an interrupt ended, and, for a run, what it kept and where (the files and what each holds)."""
    how = "Ctrl-C"
    if cause is not None and str(cause).startswith("signal "):
        try:
            how = signal.Signals(int(str(cause).removeprefix("signal "))).name
        except ValueError:
            how = str(cause)
    if not isinstance(cause, RunInterrupted):
        return f"interrupted ({how})"
    kept = cause.kept()
    if not kept:
        return f"interrupted ({how}): nothing was written to {cause.run_dir} yet"
    width = max(len(str(path.relative_to(cause.run_dir))) for path, _ in kept)
    lines = [f"interrupted ({how}): what the run measured so far is kept in {cause.run_dir}"]
    lines += [f"  {path.relative_to(cause.run_dir)!s:<{width}}  {what}" for path, what in kept]
    return "\n".join(lines)


def _record_error(error: CanaryError) -> None:
    """For a parent that started this as a child process (ERROR_FILE_ENV): the error as data."""
    from canary_action.errors import ERROR_FILE_ENV, error_record

    target = os.environ.get(ERROR_FILE_ENV)
    if target:  # whole or absent: a kill while writing must not leave the parent half a record
        partial = Path(target + ".partial")
        partial.write_text(json.dumps(error_record(error)), encoding="utf-8")
        partial.replace(target)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="rlhf-canary")
@click.option("-v", "--verbose", is_flag=True, help="Log at debug level.")
def cli(verbose: bool) -> None:
    """rlhf-canary: a regression gate for RLHF and fine-tuning pipelines."""
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )


cli.add_command(bisect_command)  # cli_bisect.py
cli.add_command(gh_report_command)  # rlhf-canary 0.1's gh-report: cli_github.py
cli.add_command(history_command)  # cli_history.py
cli.add_command(pair_command)  # cli_pair.py
cli.add_command(replay_command)  # cli_replay.py
cli.add_command(report_command)  # cli_report.py


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print the fingerprint as JSON.")
def env(as_json: bool) -> None:
    """Print the environment fingerprint (GPU, CUDA, library versions)."""
    from canary_action.config.schema import CommonConfig
    from canary_action.fingerprint import collect_environment

    fingerprint = collect_environment()
    said = {}
    if not fingerprint.gpus and fingerprint.torch_threads is not None:  # what a run here records, not torch's default
        default = CommonConfig.model_fields["cpu_threads"].default
        said["torch_threads"] = f"{default} (a CPU run's cpu_threads, unless its config says; torch's default here: "
        said["torch_threads"] += f"{fingerprint.torch_threads})"
        fingerprint = fingerprint.model_copy(update={"torch_threads": default})
    if as_json:
        click.echo(fingerprint.model_dump_json(indent=2))
        return
    for key, value in fingerprint.model_dump(exclude={"gpus"}).items():
        click.echo(f"{key:>24}: {said.get(key, value if value is not None else '-')}")
    for gpu in fingerprint.gpus:
        click.echo(f"{'gpu ' + str(gpu.index):>24}: {gpu.name} ({gpu.memory_total_mib:.0f} MiB)")


@cli.command()
@click.argument("config", type=click.Path(path_type=Path))
@click.option("-o", "--output-dir", type=click.Path(path_type=Path), help="Write runs here instead of output_dir.")
@click.option("--set", "overrides", multiple=True, metavar="KEY.PATH=VALUE", help="Override a config key (repeatable).")
def run(config: Path, output_dir: Path | None, overrides: tuple[str, ...]) -> None:
    """Run the canary training job; writes DIR/<run_id>/metrics.json."""
    from canary_action import api

    loaded = api.load_config(config, overrides=overrides)
    for notice in loaded.notices:
        click.echo(f"note: {notice}", err=True)
    require_training_stack("`canary run`")  # before anything is written, naming this command
    if output_dir is not None:
        output_folder(output_dir, flag="-o")  # checked here to name the flag; api.run checks it as output_dir
    try:
        outcome = api.run(loaded, output_dir=output_dir)
    except ModuleNotFoundError as missing:  # one that find_spec saw but that does not import (a broken install)
        if (missing.name or "").partition(".")[0] not in TRAINING_STACK:
            raise
        raise missing_training_stack("`canary run`", [missing.name or ""]) from missing
    click.echo(run_summary(outcome.metrics, outcome.metrics_path))


@cli.command("compare")
@click.argument("current", type=click.Path(path_type=Path))
@click.argument("baselines", nargs=-1, type=click.Path(path_type=Path))
@threshold_options
@click.option(
    "--allow-change",
    "allowed",
    multiple=True,
    metavar="FIELD",
    help="A workload field that may differ without making checks not-comparable (repeatable), e.g. max_length.",
)
@click.option("--accept-numerics-change", "accept_numerics", is_flag=True, help=ACCEPT_NUMERICS_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON (result_schema_version 4).")
@click.option(
    "--format",
    "kind",
    type=click.Choice(["terminal", "markdown"]),
    help="terminal: for people (aligned columns, colour on a terminal); markdown: GitHub markdown. Default: terminal "
    "on stdout, markdown with -o or --templates.",
)
@click.option("-o", "--output", type=click.Path(path_type=Path), help="Write the report here instead of stdout.")
@click.option("--templates", type=click.Path(path_type=Path), help=TEMPLATES_HELP)
def compare_command(  # click passes options as keywords
    *,
    current: Path,
    baselines: tuple[Path, ...],
    tier: Tier,
    threshold_file: Path | None,
    allowed: tuple[str, ...],
    accept_numerics: bool,
    as_json: bool,
    kind: str | None,
    output: Path | None,
    templates: Path | None,
) -> None:
    """Compare a run with its baselines (files or directories, newest first).

    CURRENT may be a lockstep pair's directory (from `canary pair`): its head side is judged against its base
    side round by round, and BASELINES, if any, add history for the learning checks.

    Exit 0 pass or neutral, 1 regression, 2 bad input, 3 the current run crashed.
    """
    from canary_action import api

    if as_json and (kind is not None or templates is not None):
        raise UsageError("--json prints the result, not a report", fix="leave out --format and --templates")
    kind = report_kind(kind, output, templates, default="terminal")
    check_templates(templates)  # before comparing: a template error is known at once
    result = api.compare(
        current, list(baselines), tier=tier, threshold_file=threshold_file, allow_change=allowed,
        accept_numerics_change=accept_numerics,
    )  # fmt: skip
    if as_json:
        emit(result_json(result), output, f"{result.verdict}: {result.reason}")
    else:
        emit_report(result, kind, output, f"{result.verdict}: {result.reason}", templates=templates)
    code = verdict_exit_code(result.verdict)
    if code:
        raise click.exceptions.Exit(code)


@cli.command("init-config")
@click.argument("out", type=click.Path())  # a str: a trailing / (a folder, not a file) must survive
@click.option("--type", "training_type", type=click.Choice(_TYPES), default="dpo", show_default=True)
@click.option("--tier", type=click.Choice(_TIERS), default="smoke", show_default=True)
@click.option(
    "--builtin",
    is_flag=True,
    help="Use a builtin model and dataset (builtin:<name>: random weights, synthetic data) instead of Hub ones: "
    "the config runs offline, with nothing to download.",
)
@click.option(
    "--device",
    type=click.Choice(["cuda", "auto", "cpu"]),
    default=None,
    help="The config's device: cuda (the default with a Hub model: on a GPU runner it refuses to train on the CPU), "
    "auto (the default with --builtin: a GPU when one is visible, else the CPU) or cpu.",
)
@click.option("--force", is_flag=True, help="Overwrite OUT if it exists.")
def init_config(  # click passes options as keywords
    *, out: str, training_type: str, tier: str, builtin: bool, device: str | None, force: bool
) -> None:
    """Write a sample config to OUT (its folders created): every key of the type's schema, each commented with
    its description, with its default or the sample's value."""
    from canary_action.config.load import write_sample_config
    from canary_action.train.precheck import has_value_model_ppo, no_value_model_ppo

    path = Path(out)
    if out.endswith(("/", os.sep)):
        raise UsageError(
            f"OUT {out} ends in {out[-1]}: a folder, and init-config writes a file",
            fix=f"name the file, e.g. canary init-config {path / 'canary.yaml'}",
        )
    if path.exists() and not force:
        raise UsageError(f"{path} exists", fix="choose another path, or pass --force to overwrite it")
    text = write_sample_config(training_type, tier, builtin=builtin, device=device)
    write_output(path, text, flag="OUT", example="canary.yaml")
    assets = "builtin model and data: runs offline" if builtin else "model and data from the Hub"
    if training_type == "ppo" and not has_value_model_ppo():
        assets = "but the installed TRL has no value-model PPO: `canary run` refuses it"
        refusal = no_value_model_ppo()
        click.echo(f"note: {refusal.message}\n  fix: {refusal.fix}", err=True)
    chosen = device or ("auto" if builtin else "cuda")
    click.echo(f"wrote {path} ({training_type}, {tier} tier, device {chosen}, {assets})")


@cli.command("save-baseline")
@click.argument("metrics", type=click.Path(path_type=Path))
@click.argument("dest", type=click.Path())  # a str: a trailing / (a folder to create) must survive
def save_baseline(metrics: Path, dest: str) -> None:
    """Validate a metrics.json and store it as a baseline: DEST is the file, or a folder (one that exists, or
    any path ending in / or without a suffix) to put <run_id>.json in. An existing file is never replaced. An
    rlhf-canary 0.1 metrics.json is validated as `canary compare` reads it and kept in 0.1's format."""
    from canary_action.compare.save import save_baseline as save

    saved = save(metrics, dest)
    for note in saved.notes:
        click.echo(f"note: {note}", err=True)
    said = []
    if saved.legacy:
        said.append(
            "rlhf-canary 0.1 format, kept unchanged, not converted: `canary compare` reads it as a 0.1 baseline, "
            "with summary-level checks only"
        )
    if saved.stopped_early:
        said.append(f"stopped early: {saved.stopped_early}; `canary compare` leaves stopped-early runs out")
    click.echo(f"saved baseline {saved.target}" + "".join(f" ({what})" for what in said))


@cli.command()
@click.option("--config", "of_config", is_flag=True, help="Print the canary config's schema instead.")
@click.option("--result", "of_result", is_flag=True, help="Print the schema of `canary compare --json` instead.")
def schema(of_config: bool, of_result: bool) -> None:
    """Print the JSON Schema of metrics.json (or of the canary config, or of the compare result)."""
    if of_config and of_result:
        raise UsageError("--config and --result each choose a schema", fix="pass one of them")
    if of_config:
        from pydantic import TypeAdapter

        from canary_action.config.schema import CanaryConfig

        click.echo(json.dumps(TypeAdapter(CanaryConfig).json_schema(), indent=2))
        return
    if of_result:
        from canary_action.compare.result import RESULT_SCHEMA_VERSION, CompareResult

        document = {
            "$id": f"urn:rlhf-canary:compare-result:v{RESULT_SCHEMA_VERSION}",
            **CompareResult.model_json_schema(),
        }
        click.echo(json.dumps(document, indent=2))
        return
    from canary_action.metrics.io import metrics_json_schema

    click.echo(json.dumps(metrics_json_schema(), indent=2))
