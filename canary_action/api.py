"""The public Python API: what the `canary` command does, as functions over files and plain objects.

    from canary_action import api

    outcome = api.run("configs/tiny/sft.yaml", output_dir="runs", overrides=["max_steps=8"])
    result = api.compare(outcome.metrics_path, "baselines/")
    print(result.verdict, [s.summary for s in result.suspects])     # suspects: ranked, most likely cause first
    print(api.render(result, "comment"))

`canary run`, `canary compare` and `canary report` are built on these functions; docs/api.md is the reference.
Every failure is a CanaryError subclass (canary_action.errors) carrying a message, a fix and a docs link.
Importing this module stays light (no torch, transformers, trl or numpy): only `run` imports the training stack.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal, TypeAlias, get_args

from canary_action.compare.result import CompareResult, OpChange
from canary_action.compare.runs import RunData, from_metrics
from canary_action.config.load import LoadedConfig
from canary_action.config.thresholds import Tier
from canary_action.errors import MetricsFileError, UsageError
from canary_action.metrics.schema import Metrics
from canary_action.report.view import Links

__all__ = [
    "CompareResult",
    "Links",
    "LoadedConfig",
    "Metrics",
    "OpChange",
    "ReportFormat",
    "Run",
    "RunOutcome",
    "Tier",
    "compare",
    "diff_profiles",
    "load_config",
    "load_metrics",
    "load_run",
    "render",
    "run",
]

#: One run as the comparison reads it, whichever format it came in (compare/runs.py).
Run: TypeAlias = RunData
#: The report formats of `canary report --format`.
ReportFormat: TypeAlias = Literal["comment", "check", "summary", "markdown", "terminal"]
_PROFILER_KEYS: Final = "profiler.enabled: true, with profiler.start_step and profiler.num_steps inside max_steps"
_WHAT_TRAINS: Final = "`api.run()`"


@dataclass(frozen=True)
class RunOutcome:
    """What `run` wrote: the run's directory, its metrics.json, and that file's content."""

    run_dir: Path
    metrics_path: Path
    metrics: Metrics


def load_metrics(path: str | os.PathLike[str]) -> Metrics:
    """Read and validate a metrics.json written by this release's `canary run` (schema 1 or 2).

    Raises MetricsFileError: a missing, corrupt or foreign file, or one of rlhf-canary 0.1 (read those with
    `load_run`).

    Example::

        metrics = api.load_metrics("runs/tiny-sft-20260105T120000Z/metrics.json")
        print(metrics.run.run_id, metrics.status.state)
    """
    from canary_action.metrics.io import read_metrics

    file = Path(path)
    try:
        return read_metrics(file)
    except MetricsFileError as error:
        if not _is_legacy(file):
            raise
        raise MetricsFileError(
            f"{file} is an rlhf-canary 0.1 metrics.json: load_metrics reads this release's format only",
            fix="read it with api.load_run(path), which reads both formats as the comparison does",
        ) from error


def load_run(path: str | os.PathLike[str]) -> Run:
    """Read a run in any supported format (this release's metrics.json, or rlhf-canary 0.1's) and return it as
    `canary compare` reads it: steady-state step times, summaries, losses, the profiler summary.

    A 0.1 file has summaries only: its per-step fields are empty and its `format` is "rlhf-canary-0.1".
    Raises MetricsFileError (BaselineError for a 0.1 file that does not match 0.1's format).

    Example::

        run = api.load_run("baselines/legacy_0_1.json")
        print(run.format, run.step_time_median)  # rlhf-canary-0.1, seconds
    """
    from canary_action.compare.baselines import read_run

    run_data, _caveats = read_run(Path(path))  # the caveats are the comparison's notes: compare() reports them
    return run_data


def load_config(source: str | os.PathLike[str] | Mapping[str, Any], *, overrides: Sequence[str] = ()) -> LoadedConfig:
    """Validate a canary config: a YAML file, or a mapping of the same keys. `overrides` are `canary run --set`'s
    KEY.PATH=VALUE strings, applied first. What the loader changed on your behalf is in `.notices`.

    Raises ConfigError listing every problem, each with its dotted path (and line, for a file).

    Example::

        loaded = api.load_config("configs/tiny/sft.yaml", overrides=["max_steps=8"])
        assert loaded.config.max_steps == 8
    """
    from canary_action.config import load

    overrides = _strings(overrides, "overrides")
    if isinstance(source, Mapping):
        return load.parse_config(dict(source), source="the config mapping", overrides=overrides)
    return load.load_config(Path(source), overrides)


def run(
    config: str | os.PathLike[str] | Mapping[str, Any] | LoadedConfig,
    *,
    output_dir: str | os.PathLike[str] | None = None,
    overrides: Sequence[str] = (),
) -> RunOutcome:
    """Train the canary, as `canary run` does, and return where it wrote its metrics.json and what it holds.

    `config`: a file, a mapping or a LoadedConfig (`overrides` apply to the first two). `output_dir`: the folder
    the run directory is made in (None: the config's `output_dir`). Progress and the loader's notices go to
    stderr, as with `canary run`. Needs the `[train]` extra (MissingExtraError otherwise).

    A run that stops early (a NaN, the time limit) returns normally: see `metrics.status`. A run that crashes
    raises TrainingError after writing what it measured; `error.metrics_path` is that metrics.json, which
    `compare` still judges (verdict "crashed").

    Example::

        outcome = api.run("configs/tiny/sft.yaml", output_dir="runs", overrides=["max_steps=4"])
        print(outcome.run_dir, outcome.metrics.status.state)
    """
    from canary_action.destinations import output_folder
    from canary_action.extras import require_training_stack

    if isinstance(config, LoadedConfig):
        if overrides:
            raise UsageError(
                "overrides apply when a config is loaded, and this one is loaded already",
                fix="pass them to api.load_config(..., overrides=...), or pass run() the file or mapping",
            )
        loaded = config
    else:
        loaded = load_config(config, overrides=overrides)
        for notice in loaded.notices:
            print(f"note: {notice}", file=sys.stderr, flush=True)
    require_training_stack(_WHAT_TRAINS)  # before anything is written
    folder = output_folder(Path(output_dir if output_dir is not None else loaded.config.output_dir), flag="output_dir")
    from canary_action.train.launch import run_canary  # the heavy import, only here

    outcome = run_canary(loaded, folder)
    return RunOutcome(run_dir=outcome.metrics_path.parent, metrics_path=outcome.metrics_path, metrics=outcome.metrics)


def compare(
    current: str | os.PathLike[str],
    baselines: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    *,
    tier: Tier = "default",
    threshold_file: str | os.PathLike[str] | None = None,
    allow_change: Sequence[str] = (),
    accept_numerics_change: bool = False,
) -> CompareResult:
    """Judge a run against its baselines, exactly as `canary compare` does, and return the result.

    `current`: a metrics.json of this release, or a lockstep pair's directory (`canary pair`; then `baselines`
    may be empty). `baselines`: files or folders (every *.json below), newest first, in either format.
    `tier`, `threshold_file`, `allow_change` and `accept_numerics_change` are `--threshold-tier`,
    `--threshold-file`, `--allow-change` and `--accept-numerics-change`.
    The result's `suspects` are the likely causes, ranked, most likely first; `checks`, `op_changes`,
    `env_changes` and `config_changes` the evidence.

    Raises MetricsFileError for an unreadable current run, BaselineError (NoBaselineError when none is usable),
    ConfigError for a bad threshold file, UsageError for a bad tier or field.

    Example::

        result = api.compare("runs/head/metrics.json", ["baselines/"], tier="smoke")
        print(result.verdict, [s.summary for s in result.suspects])
    """
    from canary_action.compare.command import run_compare

    if tier not in get_args(Tier):
        raise UsageError(f"tier {tier!r} is not a threshold tier", fix=f"use one of: {', '.join(get_args(Tier))}")
    paths = [baselines] if isinstance(baselines, str | os.PathLike) else list(baselines)
    return run_compare(
        Path(current),
        [Path(p) for p in paths],
        tier=tier,
        threshold_file=Path(threshold_file) if threshold_file is not None else None,
        allowed=_strings(allow_change, "allow_change"),
        numerics_accepted=accept_numerics_change,
    )


def render(
    result: CompareResult,
    format: ReportFormat = "markdown",
    *,
    templates: str | os.PathLike[str] | None = None,
    colour: bool = False,
    links: Links | None = None,
) -> str:
    """A compare result as one of `canary report`'s formats: comment (the sticky PR comment), check (the check
    run's output as JSON: title, summary, text), summary (the job summary), markdown (what `canary compare -o`
    writes) or terminal (aligned columns; ANSI colour when `colour`).

    `templates`: a folder of your own *.j2 templates replacing ours of the same name (GitHub formats only).
    `links`: where the report points (repository, pull request, workflow run). Raises TemplateError for an
    unusable template folder, UsageError for options the format does not use.

    Example::

        print(api.render(result, "comment"))
    """
    if format not in get_args(ReportFormat):
        raise UsageError(
            f"format {format!r} is not a report format", fix=f"use one of: {', '.join(get_args(ReportFormat))}"
        )
    if format == "terminal":
        if templates is not None:
            raise UsageError(
                "templates shape the GitHub formats; the terminal format uses no template",
                fix="render markdown, comment, summary or check with templates, or leave templates out",
            )
        from canary_action.report.terminal import render_terminal

        return render_terminal(result, links, colour=colour)
    if colour:
        raise UsageError(f"colour is for the terminal format, not {format}", fix="leave colour out")
    from canary_action.report.render import check_output
    from canary_action.report.render import render as render_kind
    from canary_action.report.templates import load_templates

    loaded = load_templates(Path(templates)) if templates is not None else None
    if format == "check":
        return json.dumps(check_output(result, links, loaded), indent=2, ensure_ascii=False) + "\n"
    return render_kind(result, format, links, loaded)


def diff_profiles(
    before: str | os.PathLike[str] | Metrics | Run,
    after: str | os.PathLike[str] | Metrics | Run,
    *,
    top: int = 10,
) -> list[OpChange]:
    """The profiled ops whose self time per profiled step moved most between two runs, growth first: the op
    diff `compare` puts in `result.op_changes` (device time where either run recorded any, else CPU time).

    Each run is a file (either format), a Metrics or a Run. Raises UsageError for a run without a profiler
    summary (enable the profiler in its config) or, for an rlhf-canary 0.1 file, without a known window.

    Example::

        for op in api.diff_profiles("runs/base/metrics.json", "runs/head/metrics.json"):
            print(op.name, op.baseline_ms, op.current_ms, op.delta_ms)
    """
    from canary_action.compare.diff import op_changes

    first, second = _profiled(before, "before"), _profiled(after, "after")
    return op_changes(first.profiler, first.profiler_steps, second.profiler, second.profiler_steps, top=top)


def _profiled(value: str | os.PathLike[str] | Metrics | Run, name: str) -> Run:
    if isinstance(value, Metrics):
        found = from_metrics(value, f"run {value.run.run_id}")
    elif isinstance(value, RunData):
        found = value
    else:
        found = load_run(value)
    if found.profiler is None:
        raise UsageError(
            f"{name}: {found.source} has no profiler summary: its run did not profile",
            fix=f"enable the profiler in its config ({_PROFILER_KEYS}) and run it again",
        )
    if not found.profiler_steps:
        raise UsageError(
            f"{name}: {found.source} keeps no profiler window (rlhf-canary 0.1 records none), so its op times cannot "
            "be put per step",
            fix=f"profile the run with this release ({_PROFILER_KEYS})",
        )
    return found


def _is_legacy(path: Path) -> bool:
    from canary_action.compare.legacy import is_legacy
    from canary_action.metrics.io import load_json

    try:
        return is_legacy(load_json(path))
    except MetricsFileError:
        return False


def _strings(values: Sequence[str], name: str) -> list[str]:
    """A sequence of strings; one string alone is taken as one item, not as its characters."""
    if isinstance(values, str):
        return [values]
    items = list(values)
    if not all(isinstance(item, str) for item in items):
        raise UsageError(f"{name} must be strings", fix=f"pass {name} as a list of strings")
    return items
