"""History lines from what a run wrote: its result.json and metrics.json (`canary history append`, the action's
history step), or every result.json of a folder of downloaded artifacts (`canary history build FOLDER`).

Figures come from the run's own summaries, the ones its checks judged; a merged pull request's effects come from
its lockstep pair's result.json, as its report judged them.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Final, Literal

from pydantic import Field, TypeAdapter, ValidationError

from canary_action.compare.result import RESULT_FILE, CompareResult
from canary_action.errors import CanaryError, HistoryError
from canary_action.history.record import Bisect, Effect, Entry, Environment, Event, Figures, PullRequest
from canary_action.metrics.heldout import METRICS
from canary_action.metrics.schema import Metrics, Summary

_REMAKE: Final = "pass a result.json and metrics.json that `canary` wrote"
EFFECTS_MARKER: Final = "rlhf-canary:effects"
_EFFECTS: Final = re.compile(r"<!-- rlhf-canary:effects (\[[^\n]{0,8000}?\]) -->")
_EFFECTS_TAIL: Final = 16_384  # the marker ends the text
_EFFECT_LIST: Final = TypeAdapter(Annotated[list[Effect], Field(max_length=16)])
#: A folder of artifacts: a canary's output is 3 deep; downloads add one or two levels.
MAX_DEPTH: Final = 6
MAX_RESULTS: Final = 20_000
#: The checks whose paired effects the cost ledger keeps: the ones measured in percent with an interval.
EFFECT_CHECKS: Final = ("step_time", "tokens_per_s", "gpu_time", "max_memory", "heldout_eval")


def entry_from_output(
    folder: Path,
    *,
    repository: str,
    event: Event,
    commit: str | None = None,
    run_id: int | None = None,
    pull_request: PullRequest | None = None,
    bisect: Bisect | None = None,
) -> Entry:
    """The entry of the run whose output is `folder` (its result.json, and its metrics.json where found). Raises
    HistoryError for a lockstep pair's result (a pull request's: never history) or a run without a commit."""
    from canary_action.report.load import read_result

    result = read_result(folder / RESULT_FILE)
    if result.pairing is not None:
        raise HistoryError(
            f"{folder / RESULT_FILE} is a lockstep pair's result (a pull request's): history holds default-branch "
            "runs", fix="pass it as --pull-request-result of the push that merged it",
        )  # fmt: skip
    return entry_from_result(result, _metrics_of(folder, result), repository=repository, event=event, commit=commit,
                  run_id=run_id, pull_request=pull_request, bisect=bisect)  # fmt: skip


def pull_request_from_result(path: Path, *, number: int | None) -> PullRequest:
    """A merged pull request's record from its lockstep pair's result.json: the effects its report judged."""
    from canary_action.report.load import read_result

    result = read_result(path)
    if result.pairing is None:
        raise HistoryError(
            f"{path} is not a lockstep pair's result: it holds no paired effects",
            fix="pass the result.json of the pull request's pair (its artifact)",
        )
    return pull_request_of(result, number)


def pull_request_of(result: CompareResult, number: int | None) -> PullRequest:
    assert result.pairing is not None
    head = result.pairing.head_commit or result.current.git_sha
    effects = [
        Effect(check=c.name, status=c.status, delta_pct=c.delta_pct,
               low=c.interval.low if c.interval else None, high=c.interval.high if c.interval else None)
        for c in result.checks
        if c.name in EFFECT_CHECKS and c.delta_pct is not None and c.status in ("pass", "warn", "fail")
    ]  # fmt: skip
    return PullRequest(number=number, head_commit=head, effects=effects)


def effects_marker(result: CompareResult) -> str | None:
    """A lockstep pair's judged effects as a hidden line for its check run's text (`<!-- rlhf-canary:effects [...]
    -->`), which the history step reads back when the pull request is merged; None for a result that is no pair's."""
    if result.pairing is None:
        return None
    effects = pull_request_of(result, None).effects
    data = json.dumps([e.model_dump(exclude_none=True) for e in effects], separators=(",", ":"))
    return f"<!-- {EFFECTS_MARKER} {data} -->"


def effects_from_text(text: str) -> list[Effect] | None:
    """The effects a check run's text carries (effects_marker); None without a readable marker. The text is data from
    the API: read strictly (at most 16 effects, each validated), never trusted to be ours."""
    found = _EFFECTS.search(text[-_EFFECTS_TAIL:])
    if found is None:
        return None
    try:
        return _EFFECT_LIST.validate_json(found.group(1))
    except ValidationError:
        return None


def entry_from_result(
    result: CompareResult, metrics: Metrics | None, *, repository: str, event: Event, commit: str | None,
    run_id: int | None, pull_request: PullRequest | None, bisect: Bisect | None,
) -> Entry:  # fmt: skip
    commit = commit or result.current.git_sha
    if commit is None:
        raise HistoryError(
            f"run {result.current.run_id} names no commit (not run from a git checkout)",
            fix="pass --commit SHA, the commit it measured",
        )
    started = (metrics.run.started_at if metrics is not None else None) or result.current.started_at
    summary = metrics.summary if metrics is not None else None
    memory, device = _memory(summary)
    try:
        return Entry(
            repository=repository, config=result.current.config_name, commit=commit, date=_utc(started),
            event=event, run_id=run_id, verdict=result.verdict,
            failed=[c.name for c in result.checks if c.status == "fail"], figures=_figures(metrics, memory),
            env=_environment(metrics), memory_device=device, heldout_label=_heldout_label(metrics),
            pull_request=pull_request, bisect=bisect,
        )  # fmt: skip
    except ValidationError as error:
        first = error.errors(include_input=False, include_url=False)[0]
        where = ".".join(str(p) for p in first["loc"])
        raise HistoryError(
            f"run {result.current.run_id[:100]!r} cannot be a history entry: {where}: {first['msg']}",
            fix="record runs of a config whose name is 1-100 letters, digits, '.', '_' or '-' (what `canary run` "
            "requires), from a git checkout, with the repository as OWNER/NAME",
        ) from None


def _memory(summary: Summary | None) -> tuple[float | None, Literal["gpu", "host"] | None]:
    """The run's peak memory and where: the GPU's reserved memory when measured, else the host's peak RSS."""
    if summary is not None and summary.peak_reserved_mib is not None:
        return summary.peak_reserved_mib, "gpu"
    if summary is not None and summary.host_peak_rss_mib is not None:
        return summary.host_peak_rss_mib, "host"
    return None, None


def _figures(metrics: Metrics | None, memory: float | None) -> Figures:
    summary = metrics.summary if metrics is not None else None
    if summary is None:
        return Figures()
    step = summary.step_time_s
    end = metrics.heldout.end if metrics is not None and metrics.heldout is not None else None
    return Figures(
        step_time_s=step.median if step else None, step_time_noise_s=step.mad if step else None,
        tokens_per_s=summary.tokens_per_s, memory_mib=memory, gpu_time_s=summary.gpu_busy_median_s,
        heldout=end.value if end is not None else None, tail_loss=summary.tail_mean_loss,
    )  # fmt: skip


def _heldout_label(metrics: Metrics | None) -> str | None:
    heldout = metrics.heldout if metrics is not None else None
    if heldout is None or heldout.metric is None or heldout.end is None:
        return None
    return METRICS[heldout.metric][0]


def _environment(metrics: Metrics | None) -> Environment:
    if metrics is None:
        return Environment()
    env = metrics.env
    return Environment(
        gpu=env.gpus[0].name if env.gpus else None, gpu_driver=env.gpu_driver, cuda=env.cuda, torch=env.torch,
        trl=env.trl, runner=env.container_image or env.cpu_model,
    )  # fmt: skip


def _utc(stamp: str | None) -> str:
    """An ISO 8601 time as the record keeps it (seconds, Z); HistoryError without one."""
    if stamp is None:
        raise HistoryError("the run records no start time", fix=_REMAKE)
    try:
        moment = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        raise HistoryError(f"the run's start time {stamp[:40]!r} is not an ISO 8601 time", fix=_REMAKE) from None
    moment = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _metrics_of(folder: Path, result: CompareResult) -> Metrics | None:
    """The current run's metrics.json in `folder` (the run's own folder in it, or itself); None when absent."""
    from canary_action.metrics.io import read_metrics

    wanted = result.current.run_id
    for path in [folder / "metrics.json", folder / wanted / "metrics.json", *sorted(folder.glob("*/metrics.json"))]:
        if path.is_symlink() or not path.is_file():
            continue
        metrics = read_metrics(path)
        if metrics.run.run_id == wanted:
            return metrics
    return None


@dataclass
class Collected:
    entries: list[Entry] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def from_artifacts(folder: Path, *, repository: str) -> Collected:
    """Every default-branch run's entry found under `folder` (downloaded artifacts, unzipped), each pair's pull
    request attached to the first entry of its config at or after it. A file that is not a canary's is a note."""
    found = Collected()
    runs: list[Entry] = []
    pairs: list[tuple[str, str, PullRequest]] = []
    from canary_action.report.load import read_result

    for path in _result_files(folder, found.notes):
        where = path.relative_to(folder)
        try:
            result = read_result(path)
            if result.pairing is not None:
                pairs.append((result.current.config_name, _utc(result.current.started_at),
                              pull_request_of(result, None)))  # fmt: skip
                continue
            metrics = _metrics_of(path.parent, result)
            runs.append(entry_from_result(result, metrics, repository=repository, event="artifact", commit=None,
                                          run_id=None, pull_request=None, bisect=None))  # fmt: skip
        except (CanaryError, ValidationError, ValueError) as error:
            message = error.message if isinstance(error, CanaryError) else f"{type(error).__name__}"
            found.notes.append(f"{where}: left out ({message[:300]})")
    runs.sort(key=lambda e: (e.date, e.commit))
    for config, date, pull_request in sorted(pairs, key=lambda p: p[1]):
        target = next((i for i, e in enumerate(runs) if e.config == config and e.date >= date
                       and e.pull_request is None), None)  # fmt: skip
        if target is None:
            found.notes.append(f"a pair of {config} on {date[:10]} has no later run of it to be marked on")
            continue
        runs[target] = runs[target].model_copy(update={"pull_request": pull_request})
    found.entries = runs
    return found


def _result_files(folder: Path, notes: list[str]) -> Iterator[Path]:
    """result.json files under `folder`, links never followed, at most MAX_DEPTH deep and MAX_RESULTS many."""
    if not folder.is_dir() or folder.is_symlink():
        raise HistoryError(f"{folder}: not a folder", fix="pass the folder the artifacts were unzipped into")
    count = 0
    for parent, dirs, files in os.walk(folder):  # os.walk lists a link to a folder among the folders: left out
        here = Path(parent)
        depth = len(here.relative_to(folder).parts)
        dirs[:] = sorted(d for d in dirs if depth < MAX_DEPTH and not (here / d).is_symlink())
        if RESULT_FILE in files and not (here / RESULT_FILE).is_symlink():
            count += 1
            if count > MAX_RESULTS:
                notes.append(f"more than {MAX_RESULTS:,} result.json files: the rest left out")
                return
            yield here / RESULT_FILE
