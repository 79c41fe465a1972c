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
import re
import signal
import sys
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Final, cast

import click

from canary_action import __version__, interrupts
from canary_action.cli_github import gh_report_command
from canary_action.cli_options import threshold_options
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
from canary_action.extras import TRAINING_STACK, missing_training_stack, require_training_stack
from canary_action.metrics.schema import Distributed, Metrics

if TYPE_CHECKING:
    from canary_action.api import ReportFormat
    from canary_action.compare.result import CompareResult
    from canary_action.metrics.pair import PairRecord
    from canary_action.report.templates import Templates
    from canary_action.report.view import Links

EXIT_OK, EXIT_REGRESSION, EXIT_BAD_INPUT, EXIT_INFRA = 0, 1, 2, 3
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report a command ended by Ctrl-C
_EXIT_CODES: dict[type[CanaryError], int] = {
    ConfigError: EXIT_BAD_INPUT,
    UsageError: EXIT_BAD_INPUT,
    MetricsFileError: EXIT_BAD_INPUT,  # BaselineError too
    TrainingError: EXIT_INFRA,
    GitHubError: EXIT_INFRA,
}
_TYPES = ("sft", "dpo", "grpo", "rloo", "ppo", "custom")
_TIERS = ("smoke", "perf", "nightly")
_TEMPLATES_HELP: Final = (
    "A folder of your own report templates (*.j2, named as ours; docs/report.md, 'Your own templates'): each "
    "replaces ours of its name in the GitHub formats."
)


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


cli.add_command(gh_report_command)  # rlhf-canary 0.1's gh-report: cli_github.py


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
    click.echo(_run_report(outcome.metrics, outcome.metrics_path))


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
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON (result_schema_version 3).")
@click.option(
    "--format",
    "kind",
    type=click.Choice(["terminal", "markdown"]),
    help="terminal: for people (aligned columns, colour on a terminal); markdown: GitHub markdown. Default: terminal "
    "on stdout, markdown with -o or --templates.",
)
@click.option("-o", "--output", type=click.Path(path_type=Path), help="Write the report here instead of stdout.")
@click.option("--templates", type=click.Path(path_type=Path), help=_TEMPLATES_HELP)
def compare_command(  # click passes options as keywords
    *,
    current: Path,
    baselines: tuple[Path, ...],
    tier: Tier,
    threshold_file: Path | None,
    allowed: tuple[str, ...],
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
    kind = _report_kind(kind, output, templates, default="terminal")
    _load_templates(templates)  # before comparing: a template error is known at once
    result = api.compare(current, list(baselines), tier=tier, threshold_file=threshold_file, allow_change=allowed)
    if as_json:
        _emit(_result_json(result), output, f"{result.verdict}: {result.reason}")
    else:
        _emit_report(result, kind, output, f"{result.verdict}: {result.reason}", templates=templates)
    code = {"regression": EXIT_REGRESSION, "crashed": EXIT_INFRA}.get(result.verdict, EXIT_OK)
    if code:
        raise click.exceptions.Exit(code)


@cli.command("pair")
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
@click.option("--baseline", "baselines", multiple=True, type=click.Path(path_type=Path),
              help="Artifact baselines too (repeatable): history for the learning checks.")  # fmt: skip
@threshold_options
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
    baselines: tuple[Path, ...],
    tier: Tier,
    threshold_file: Path | None,
    as_json: bool,
    kind: str | None,
) -> None:
    """Train CONFIG from two code trees in lockstep and judge the head against the base, round by round.

    CONFIG is a path inside each tree (a PR may change it). Each side runs with its own tree on the import path
    (after the installed packages) and as its working directory. Writes DIR/<pair_id>/{base,head}/metrics.json,
    pair.json, result.json and report.md (GitHub markdown); prints the report as `canary compare` does. Exit codes
    as `canary compare`; 2 when the head side refused its config, 3 when it crashed or the pair hung (after both
    sides' measurements are written and judged). A base side that cannot run is no fault of the pull request: the
    verdict is neutral and the notes say how it failed.
    """
    from canary_action.compare.command import run_compare
    from canary_action.train.launch.pair import run_pair

    if as_json and kind is not None:  # before training: known at once
        raise UsageError("--json prints the result, not a report", fix="leave out --format")
    if setup is None:  # both sides train with this interpreter (with --setup, each in the environment it installs)
        require_training_stack("`canary pair`")
    if output_dir is not None:
        output_folder(output_dir, flag="-o")
    outcome = run_pair(
        base_tree, head_tree, config, output_dir=output_dir, overrides=overrides, chunk_steps=chunk_steps,
        seed=seed, cpus=_cpu_list(cpus) if cpus else None, setup=setup,
    )  # fmt: skip
    if not outcome.head.exists() or isinstance(outcome.error, ConfigError):
        raise outcome.error or TrainingError("the head side wrote no metrics.json", fix="read the log above")
    result = run_compare(
        outcome.pair_dir, list(baselines), tier=tier, threshold_file=threshold_file, missing_ok=True,
        notes=outcome.notes,
    )  # fmt: skip
    # First among the notes; it needs the comparison's count of judged rounds.
    result = result.model_copy(update={"notes": [_pair_note(outcome.record, result), *result.notes]})
    (outcome.pair_dir / "result.json").write_text(result.model_dump_json(indent=2) + "\n", encoding="utf-8")
    from canary_action.report.render import render

    (outcome.pair_dir / "report.md").write_text(render(result, "markdown"), encoding="utf-8")
    if as_json:
        _emit(_result_json(result), None, f"{result.verdict}: {result.reason}")
    else:
        _emit_report(result, kind or "terminal", None, f"{result.verdict}: {result.reason}")
    if outcome.error is not None:
        raise outcome.error
    code = {"regression": EXIT_REGRESSION, "crashed": EXIT_INFRA}.get(result.verdict, EXIT_OK)
    if code:
        raise click.exceptions.Exit(code)


def _cpu_list(text: str) -> list[int]:
    """`0`, `0,2` or `0-3` as a list of CPU numbers."""
    cpus: list[int] = []
    try:
        for part in text.split(","):
            low, _, high = part.partition("-")
            cpus += range(int(low), int(high or low) + 1)
    except ValueError:
        raise UsageError(f"--cpus {text!r} is not a CPU list", fix="write it as 0, 0,2 or 0-3") from None
    return cpus


def _pair_note(record: PairRecord, result: CompareResult) -> str:
    """The pair in a line: every round it trained (the warm-up's too), and how many of them the speed checks
    judged — the count the report's "Paired A/B" line gives."""
    note = f"lockstep pair {record.pair_id}: {len(record.rounds)} rounds of {record.chunk_steps} steps in all"
    note += f" (warm-up included), {record.wall_s:.0f} s"
    if result.pairing is None:  # not judged as a pair (a side wrote no metrics.json)
        return note
    if result.pairing.rounds is None:
        return note + "; too few rounds after the warm-up to judge speed"
    return note + f"; {result.pairing.rounds} of them judged for speed, after the warm-up"


def _result_json(result: CompareResult) -> str:
    return result.model_dump_json(indent=2) + "\n"


@cli.command("report")
@click.argument("result_file", metavar="RESULT", type=click.Path(path_type=Path))
@click.option(
    "--format",
    "kind",
    type=click.Choice(["comment", "check", "summary", "markdown", "terminal"]),
    help="comment: the sticky PR comment; check: the check run's output as JSON (title, summary, text); "
    "summary: the job summary; markdown: GitHub markdown of what `canary compare` prints; terminal: that report "
    "for people (aligned columns, colour on a terminal). Default: terminal when printing to a terminal, else "
    "markdown.",
)
@click.option("-o", "--output", type=click.Path(path_type=Path), help="Write here instead of stdout.")
@click.option("--repo", metavar="OWNER/NAME", help="The repository the result is for: linked in the report.")
@click.option("--pr", metavar="N", help="Its pull request: the report links to it (needs --repo). Nothing is posted.")
@click.option("--templates", type=click.Path(path_type=Path), help=_TEMPLATES_HELP)
def report_command(  # click passes options as keywords
    *,
    result_file: Path,
    kind: str | None,
    output: Path | None,
    repo: str | None,
    pr: str | None,
    templates: Path | None,
) -> None:
    """Render a compare result (`canary compare --json`) for GitHub or a terminal.

    --repo and --pr (rlhf-canary 0.1's flags) name the pull request the report is for and link it in the report;
    this command posts nothing (the action publishes).
    """
    from canary_action.report.load import read_result
    from canary_action.report.view import Links

    default = "terminal" if output is None and sys.stdout.isatty() else "markdown"
    kind = _report_kind(kind, output, templates, default=default)
    links = Links(repository=_repository(repo), pull_request=_pull_request(pr, repo))
    _load_templates(templates)  # before reading the result: a template error is known at once
    result = read_result(result_file)
    target = ""
    if links.repository is not None:
        target = f" for {links.repository}" + (f"#{links.pull_request}" if links.pull_request is not None else "")
    what = f"{kind} report{target}, verdict {result.verdict}"
    _emit_report(result, kind, output, what, links=links, templates=templates)


def _report_kind(kind: str | None, output: Path | None, templates: Path | None, *, default: str) -> str:
    """The format asked for, else markdown for a file or with --templates (they shape the GitHub formats), else
    `default`. --templates with the terminal format, which uses none, is refused rather than ignored."""
    if kind == "terminal" and templates is not None:
        raise UsageError(
            "--templates shapes the GitHub formats; the terminal format uses no template",
            fix="pass --format markdown (or comment, summary, check) with --templates, or leave --templates out",
        )
    if kind is not None:
        return kind
    return "markdown" if output is not None or templates is not None else default


def _load_templates(folder: Path | None) -> Templates | None:
    if folder is None:
        return None
    from canary_action.report.templates import load_templates

    return load_templates(folder)


def _emit_report(
    result: CompareResult,
    kind: str,
    output: Path | None,
    what: str,
    *,
    links: Links | None = None,
    templates: Path | None = None,
) -> None:
    """A report of `kind`: the terminal form coloured as use_colour says (never in a file), or GitHub's."""
    from canary_action import api
    from canary_action.report.terminal import use_colour

    colour = kind == "terminal" and output is None and use_colour(sys.stdout)
    text = api.render(result, cast("ReportFormat", kind), templates=templates, colour=colour, links=links)
    _emit(text, output, what, colour=colour)


# GitHub's rules: an owner is 1-39 letters, digits and hyphens (underscores in managed users' names), not starting
# with a hyphen; a repository name 1-100 letters, digits, '.', '_' and '-', never '.' or '..'.
_OWNER_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,38}/(?!\.\.?\Z)[A-Za-z0-9._-]{1,100}")


def _repository(value: str | None) -> str | None:
    if value is None or _OWNER_NAME.fullmatch(value):
        return value
    from canary_action.metrics.io import clip_text

    shown = clip_text(repr(value), 120)
    if "://" in value or value.lower().startswith("github.com/"):
        why = f"--repo {shown} is a URL, not OWNER/NAME"
    else:
        why = f"--repo {shown} is not a repository as OWNER/NAME"
    raise UsageError(
        why, fix='pass it as GitHub names it, e.g. --repo octo-org/my-repo (in a workflow: --repo "$GITHUB_REPOSITORY")'
    )


def _pull_request(value: str | None, repo: str | None) -> int | None:
    if value is None:
        return None
    problem = None
    if not re.fullmatch(r"[1-9][0-9]*", value):
        problem = "is not a pull request number (a whole number from 1, written plainly)"
    elif len(value) > 10 or int(value) > _MAX_NUMBER:
        problem = f"is larger than any pull request number (at most {_MAX_NUMBER:,})"
    if problem is not None:
        from canary_action.metrics.io import clip_text

        raise UsageError(f"--pr {clip_text(repr(value), 60)} {problem}", fix="pass the number alone, e.g. --pr 12")
    if repo is None:
        raise UsageError(
            f"--pr {value} needs --repo: a pull request number is one of a repository's",
            fix="add --repo OWNER/NAME, e.g. --repo octo-org/my-repo",
        )
    return int(value)


_MAX_NUMBER: Final = 2**31 - 1  # GitHub's issue and pull request numbers are 32-bit integers


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
@click.option("--force", is_flag=True, help="Overwrite OUT if it exists.")
def init_config(out: str, training_type: str, tier: str, builtin: bool, force: bool) -> None:
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
    write_output(path, write_sample_config(training_type, tier, builtin=builtin), flag="OUT", example="canary.yaml")
    assets = "builtin model and data: runs offline" if builtin else "model and data from the Hub"
    if training_type == "ppo" and not has_value_model_ppo():
        assets = "but the installed TRL has no value-model PPO: `canary run` refuses it"
        refusal = no_value_model_ppo()
        click.echo(f"note: {refusal.message}\n  fix: {refusal.fix}", err=True)
    click.echo(f"wrote {path} ({training_type}, {tier} tier, {assets})")


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


def _emit(text: str, output: Path | None, what: str, *, colour: bool = False) -> None:
    """Print a report, or write it to `output` and say so on stderr (stdout stays the report's alone). `colour`:
    keep the text's colour codes even where click would strip them (FORCE_COLOR into a pipe)."""
    if output is None:
        click.echo(text, nl=False, color=True if colour else None)
        return
    write_output(output, text, flag="-o")
    click.echo(f"{what}\nwrote {output}", err=True)


def _run_report(metrics: Metrics, path: Path) -> str:
    s, status = metrics.summary, metrics.status
    lines = [
        f"run {metrics.run.run_id}: {status.state}"
        + (f" ({status.reason} at step {status.step})" if status.reason else "")
    ]
    lines.append(f"  duration        {metrics.run.duration_s or 0:.1f} s, {s.num_steps if s else 0} steps")
    if startup := metrics.run.startup_s:
        parts = ", ".join(f"{k.replace('_', ' ')} {v:.1f}" for k, v in startup.items() if k != "to_step_1")
        lines.append(f"  start           {startup.get('to_step_1', 0):.1f} s to step 1 ({parts})")
    if s is not None and s.step_time_s is not None:
        lines.append(
            f"  step time       median {s.step_time_s.median:.4f} s, mean {s.step_time_s.mean:.4f} s "
            f"({s.num_steady_steps} steady steps after {s.warmup_steps} warm-up, {s.warmup_method})"
        )
        lines.append(f"  tokens/s        {s.tokens_per_s or 0:,.0f} (measured)")
    if s is not None and s.peak_allocated_mib is not None:
        lines.append(
            f"  peak memory     {s.peak_allocated_mib:,.0f} MiB allocated, {s.peak_reserved_mib or 0:,.0f} MiB reserved"
        )
    if s is not None and s.gpu_busy_median_s is not None:
        share = f" ({100 * s.gpu_busy_share:.0f} % of the step)" if s.gpu_busy_share is not None else ""
        lines.append(f"  GPU time        {1000 * s.gpu_busy_median_s:.1f} ms busy per step{share}")
    if s is not None and s.host_peak_rss_mib is not None:  # the high-water mark, the figure host_memory judges
        sampled = f"; {s.host_rss_peak_mib:,.0f} MiB at step ends" if s.host_rss_peak_mib is not None else ""
        lines.append(f"  host RSS peak   {s.host_peak_rss_mib:,.0f} MiB (high-water mark{sampled})")
    elif s is not None and s.host_rss_peak_mib is not None:
        lines.append(f"  host RSS peak   {s.host_rss_peak_mib:,.0f} MiB (sampled at step ends)")
    lines += _ranks_report(metrics.distributed)
    lines.append(
        f"  non-finite      {metrics.stability.num_nan_steps} NaN steps, {metrics.stability.num_inf_steps} Inf steps"
    )
    if s is not None and s.final_loss is not None:
        lines.append(f"  loss            final {s.final_loss:.4f}, tail mean {s.tail_mean_loss or 0:.4f}")
    if metrics.profiler is not None:
        p = metrics.profiler
        lines.append(f"  profiler        steps {p.start_step}-{p.end_step}, trace {p.trace_path}")
    # A window the run stopped before (or inside): the notice train/profiler.py wrote says what is missing.
    shortfall = [notice.removeprefix("profiler: ") for notice in metrics.notices if notice.startswith("profiler: ")]
    lines += [f"  profiler        {notice}" for notice in shortfall]
    lines.append(f"  metrics         {path}")
    return "\n".join(lines)


def _ranks_report(dist: Distributed | None) -> list[str]:
    """World size, then per rank: compute and communication medians (the straggler has the largest compute)."""
    if dist is None:
        return []
    head = f"  processes       {dist.world_size} ({dist.strategy}, {dist.backend or '-'})"
    if dist.slowest_rank is not None and dist.rank_imbalance_pct is not None:
        head += f", slowest rank {dist.slowest_rank} (+{dist.rank_imbalance_pct:.1f} % compute)"
    lines = [head]
    for rank in dist.ranks:
        compute = f"{rank.compute_median_s:.4f} s" if rank.compute_median_s is not None else "-"
        comm = f"{rank.comm_median_s:.4f} s" if rank.comm_median_s is not None else "not measured"
        lines.append(f"  rank {rank.rank:<10} compute {compute}, communication {comm} (medians per step)")
    return lines
