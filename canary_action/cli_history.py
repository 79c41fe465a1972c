"""`canary history append` and `canary history build` (docs/history.md): the record of a config's trusted runs, and
the static site that draws it. Light commands: no torch."""

from __future__ import annotations

import re
from pathlib import Path
from typing import cast, get_args

import click

from canary_action.errors import HistoryError, UsageError
from canary_action.history.record import KEEP_ENTRIES, Bisect, Event, PullRequest

_SHA = re.compile(r"[0-9a-f]{40}")
_REPOSITORY = re.compile(r"[A-Za-z0-9_.-]{1,100}/[A-Za-z0-9_.-]{1,100}")


@click.group("history")
def history_command() -> None:
    """The history of a config's default-branch runs (append a run) and its static site (build)."""


@history_command.command("append")
@click.argument("history", type=click.Path(path_type=Path, dir_okay=False))
@click.argument("output", type=click.Path(path_type=Path, file_okay=False, exists=True))
@click.option("--repository", required=True, metavar="OWNER/NAME", help="The repository the run measured.")
@click.option("--event", type=click.Choice(get_args(Event)), default="push", show_default=True,
              help="What started the run.")  # fmt: skip
@click.option("--commit", metavar="SHA", help="The commit it measured (default: the one its result names).")
@click.option("--run-id", type=click.IntRange(1), help="The workflow run's id (the entry links to it).")
@click.option("--pull-request", type=click.IntRange(1), help="The merged pull request this commit came from.")
@click.option("--pull-request-result", type=click.Path(path_type=Path, dir_okay=False, exists=True),
              help="That pull request's lockstep pair's result.json: its effects enter the cost ledger.")  # fmt: skip
@click.option("--bisect-bad", metavar="SHA", help="A bisect named this commit as the bad one...")
@click.option("--bisect-summary", default="", help="...and said this of it (one line).")
@click.option("--keep", type=click.IntRange(1), default=KEEP_ENTRIES, show_default=True,
              help="Entries kept per config; older months are rolled into one line each.")  # fmt: skip
def append_command(  # click passes options as keywords
    *,
    history: Path,
    output: Path,
    repository: str,
    event: str,
    commit: str | None,
    run_id: int | None,
    pull_request: int | None,
    pull_request_result: Path | None,
    bisect_bad: str | None,
    bisect_summary: str,
    keep: int,
) -> None:
    """Add the run whose output folder is OUTPUT (its result.json and metrics.json) to HISTORY (a history.jsonl,
    created when missing). For the trusted job only: never a pull request's (docs/history.md)."""
    from canary_action.history.collect import entry_from_output, pull_request_from_result
    from canary_action.history.store import append_entry

    for name, value in (("--commit", commit), ("--bisect-bad", bisect_bad)):
        if value is not None and not _SHA.fullmatch(value):
            raise UsageError(f"{name} {value[:60]!r} is not a full commit SHA", fix="pass its 40 lowercase hex digits")
    merged = pull_request_from_result(pull_request_result, number=pull_request) if pull_request_result else None
    found = Bisect(bad_commit=bisect_bad, summary=bisect_summary[:200]) if bisect_bad else None
    entry = entry_from_output(output, repository=repository, event=cast("Event", event), commit=commit,
                              run_id=run_id, pull_request=merged, bisect=found)  # fmt: skip
    if merged is None and pull_request is not None:  # merged without a pair: a marker with no effect
        entry = entry.model_copy(update={"pull_request": PullRequest(number=pull_request, head_commit=entry.commit)})
    for note in append_entry(history, entry, keep=keep):
        click.echo(f"note: {_printable(note)}", err=True)
    click.echo(f"{history}: {entry.config} {entry.commit[:12]} {entry.verdict} appended")


@history_command.command("build")
@click.argument("source", type=click.Path(path_type=Path, exists=True))
@click.option("-o", "--output", type=click.Path(path_type=Path, file_okay=False), default=Path("site"),
              show_default=True, help="The folder to write the site into.")  # fmt: skip
@click.option("--repository", metavar="OWNER/NAME",
              help="Only this repository's lines (default: the one the history names; artifacts need it).")  # fmt: skip
def build_command(*, source: Path, output: Path, repository: str | None) -> None:
    """Build the static site of SOURCE: a history.jsonl, or a folder of downloaded artifacts (each run's
    result.json and metrics.json; pull requests' pairs enter the cost ledger). Open OUTPUT/index.html."""
    from canary_action.history.read import History, read_history
    from canary_action.history.site import build_site

    if source.is_dir():
        from canary_action.history.collect import from_artifacts

        if repository is None or not _REPOSITORY.fullmatch(repository):
            raise UsageError(
                "a folder of artifacts names no repository" if repository is None
                else f"--repository {repository[:100]!r} is not OWNER/NAME",
                fix="pass --repository OWNER/NAME: the repository the runs measured (its commits are linked)",
            )  # fmt: skip
        collected = from_artifacts(source, repository=repository)
        history = History(repository, entries=collected.entries)
        for note in collected.notes:
            history.refuse(note)
        if not history.entries:
            shown = "; ".join(history.summary_notes()[:3])
            raise HistoryError(
                f"{source}: no default-branch run's result.json (with its metrics.json) found"
                + (f" ({shown})" if shown else ""),
                fix="unzip the artifacts of default-branch runs of the canary (mode run's, or judged by report mode) "
                "into the folder",
            )
    else:
        history = read_history(source, repository=repository)
    build_site(history, output)
    for note in history.summary_notes():
        click.echo(f"note: {_printable(note)}", err=True)
    runs = len(history.entries) + sum(m.num_runs for m in history.months)
    click.echo(f"{output / 'index.html'}: {len(history.configs())} configs, {runs} runs")


def _printable(note: str) -> str:
    """A note for the terminal: a control character (an escape sequence from a file) shown as '?'."""
    return "".join(c if c.isprintable() else "?" for c in note)
