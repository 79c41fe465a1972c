"""`canary history build`: the history as a static site — an index with a card per config, a page per config with
its charts and its cost ledger. No server, nothing fetched: it opens from a file:// URL. Plain HTML and CSS that
follow the reader's light or dark setting and fit a phone; one small script sums the ledger from a chosen date
(without it the page still shows the total since the first pull request).

Every string of the history reaches the page escaped (markupsafe); every link is built here from validated fields:
the repository (OWNER/NAME), a commit's 40 hex digits, a pull request's number, a workflow run's id.
"""

from __future__ import annotations

import itertools
import math
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Final

from markupsafe import Markup

from canary_action.history.charts import Point, chart, format_value, sparkline
from canary_action.history.read import History
from canary_action.history.record import Entry, MonthSummary, PullRequest

GITHUB: Final = "https://github.com"
ASSETS: Final = ("site.css", "ledger.js")
SPARK_POINTS: Final = 40


@dataclass(frozen=True)
class Metric:
    field: str
    title: str
    unit: str
    better: str


METRICS: Final = (
    Metric("step_time_s", "Step time (median of the steady steps)", "s", "lower"),
    Metric("tokens_per_s", "Tokens per second", "tok/s", "higher"),
    Metric("memory_mib", "Peak memory", "MiB", "lower"),
    Metric("gpu_time_s", "GPU time per step", "s", "lower"),
    Metric("heldout", "Held-out evaluation", "", ""),
    Metric("tail_loss", "Tail loss (the run's own; the held-out figure is the canary's)", "", "lower"),
)
#: The ledger's columns: the checks whose paired effects a pull request's report gives in percent.
LEDGER: Final = (("step_time", "Step time"), ("gpu_time", "GPU time"), ("max_memory", "Memory"))


def build_site(history: History, out: Path, *, built_at: datetime | None = None) -> list[Path]:
    """Write the site into `out` (created; the pages and assets it holds are replaced); the files written."""
    out.mkdir(parents=True, exist_ok=True)
    built = (built_at or datetime.now(UTC)).strftime("%Y-%m-%d %H:%M UTC")
    written = [_asset(name, out) for name in ASSETS]
    configs = history.configs()
    for config in configs:
        written.append(_write(out / page_name(config), _config_page(history, config, built)))
    written.append(_write(out / "index.html", _index(history, configs, built)))
    return written


def page_name(config: str) -> str:
    return f"config-{config}.html"


def _links(repository: str | None) -> Links:
    return Links(f"{GITHUB}/{repository}" if repository else None)


@dataclass(frozen=True)
class Links:
    repo: str | None

    def commit(self, sha: str) -> str:
        return f"{self.repo}/commit/{sha}" if self.repo else f"#{sha}"

    def pull(self, pull_request: PullRequest) -> str:
        """The pull request's page; its head commit's without a number; the ledger without either."""
        if self.repo and pull_request.number is not None:
            return f"{self.repo}/pull/{pull_request.number}"
        return self.commit(pull_request.head_commit) if pull_request.head_commit else "#ledger"

    def run(self, run_id: int | None) -> str | None:
        return f"{self.repo}/actions/runs/{run_id}" if self.repo and run_id is not None else None


def _config_page(history: History, config: str, built: str) -> Markup:
    months, entries = history.of(config)
    links = _links(history.repository)
    latest = entries[-1] if entries else None
    charts = [_figure(config, metric, months, entries, links) for metric in METRICS]
    body = Markup(
        '<p><a href="index.html">All configs</a></p><h1>{config}</h1>{latest}{charts}{ledger}{env}{runs}'
    ).format(
        config=config, latest=_latest(latest, links), charts=Markup("").join(c for c in charts if c),
        ledger=_ledger(months, entries, links), env=_environment_changes(entries, links), runs=_runs(entries, links),
    )  # fmt: skip
    return _page(f"{config}: rlhf-canary history", body, built, history)


def _latest(entry: Entry | None, links: Links) -> Markup:
    if entry is None:
        return Markup("<p>Only rolled-up months: no single run is kept.</p>")
    return Markup(
        '<p class="latest">Latest run: <span class="verdict {v}">{v}</span> on <a href="{href}">{short}</a>, '
        "{date}{failed}</p>"
    ).format(
        v=entry.verdict, href=links.commit(entry.commit), short=entry.commit[:12], date=entry.date,
        failed=f" (failed: {', '.join(entry.failed)})" if entry.failed else "",
    )  # fmt: skip


def _figure(
    config: str, metric: Metric, months: list[MonthSummary], entries: list[Entry], links: Links
) -> Markup | None:
    points = _points(metric, months, entries, links)
    if not any(p.value is not None for p in points):
        return None
    unit = metric.unit
    title = metric.title
    if metric.field == "heldout":
        title = next((e.heldout_label for e in reversed(entries) if e.heldout_label), "held-out evaluation")
        title = title[0].upper() + title[1:]
    if metric.field == "memory_mib":
        device = next((e.memory_device for e in reversed(entries) if e.memory_device), None)
        title += {"gpu": " (GPU, reserved)", "host": " (host RSS)"}.get(device or "", "")
    chart_id = f"chart-{metric.field}"
    better = Markup(" <small>({} is better)</small>").format(metric.better) if metric.better else Markup("")
    return Markup(
        '<figure class="metric" id="{id}-figure"><figcaption><h2>{title}{better}</h2></figcaption>'
        '<div class="scroll">{svg}</div>'
        "<details><summary>The {n} values as a table</summary>{table}</details></figure>"
    ).format(
        id=chart_id, title=title, better=better, n=sum(p.value is not None for p in points),
        svg=chart(points, chart_id=chart_id, title=f"{title}, {config}, over commits", unit=unit),
        table=_table(points, unit),
    )  # fmt: skip


def _points(metric: Metric, months: list[MonthSummary], entries: list[Entry], links: Links) -> list[Point]:
    unit = metric.unit
    points = []
    for month in months:
        value = getattr(month.figures, metric.field)
        said = format_value(value, unit) if value is not None else "not measured"
        points.append(Point(
            label=month.month, value=value, href=links.commit(month.last_commit), month=True,
            title=f"{month.month}: median {said} over {month.num_runs} runs ({month.num_regressions} regressions)",
        ))  # fmt: skip
    previous: Entry | None = None
    for entry in entries:
        value = getattr(entry.figures, metric.field)
        low = high = None
        if metric.field == "step_time_s" and value is not None and entry.figures.step_time_noise_s is not None:
            low, high = value - entry.figures.step_time_noise_s, value + entry.figures.step_time_noise_s
        marker_href, marker_title = _marker(entry, links)
        marker_kind = "bisect" if entry.bisect is not None else "pull-request"
        changes = entry.env.changes(previous.env) if previous is not None else []
        said = format_value(value, unit) if value is not None else "not measured"
        points.append(Point(
            label=entry.date[:10], value=value, href=links.commit(entry.commit), low=low, high=high,
            title=f"{entry.date[:10]} {entry.commit[:12]}: {said}, {entry.verdict}",
            regression=entry.verdict == "regression", marker_href=marker_href, marker_title=marker_title,
            marker_kind=marker_kind, more_links=_more_links(entry, links),
            env_change="; ".join(changes) or None,
        ))  # fmt: skip
        previous = entry
    return points


def _more_links(entry: Entry, links: Links) -> tuple[tuple[str, str], ...]:
    found = []
    if (run := links.run(entry.run_id)) is not None:
        found.append((f"run {entry.run_id}", run))
    if entry.pull_request is not None:
        found.append((_pr_name(entry.pull_request), links.pull(entry.pull_request)))
    return tuple(found)


def _marker(entry: Entry, links: Links) -> tuple[str | None, str | None]:
    if entry.bisect is not None:
        return links.commit(entry.bisect.bad_commit), f"bisect: {entry.bisect.bad_commit[:12]}: {entry.bisect.summary}"
    if entry.pull_request is not None:
        pr = entry.pull_request
        said = ", ".join(_effect_text(pr, check, label) for check, label in LEDGER if pr.effect(check)) or "no effect"
        return links.pull(pr), f"{_pr_name(pr)} merged: {said}"
    return None, None


def _pr_name(pr: PullRequest) -> str:
    if pr.number is not None:
        return f"pull request #{pr.number}"
    return f"the pair of {pr.head_commit[:12]}" if pr.head_commit else "a pair (no commit recorded)"


def _effect_text(pr: PullRequest, check: str, label: str) -> str:
    effect = pr.effect(check)
    assert effect is not None
    interval = f" [{effect.low:+.1f}, {effect.high:+.1f}]" if effect.low is not None and effect.high is not None else ""
    return f"{label.lower()} {effect.delta_pct:+.1f} %{interval}"


def _table(points: Sequence[Point], unit: str) -> Markup:
    """The chart's values for a screen reader or a keyboard: each with its commit, workflow run and pull request."""
    rows = Markup("").join(
        Markup('<tr><td>{label}</td><td><a href="{href}">{value}</a></td><td>{title}</td><td>{more}</td></tr>').format(
            label=p.label, href=p.href, value=format_value(p.value, unit), title=p.title,
            more=Markup(", ").join(Markup('<a href="{}">{}</a>').format(h, t) for t, h in p.more_links),
        )
        for p in points
        if p.value is not None
    )  # fmt: skip
    return Markup(
        '<div class="scroll"><table><thead><tr><th scope="col">Date</th><th scope="col">Value (its commit)</th>'
        '<th scope="col">Run</th><th scope="col">Links</th></tr></thead><tbody>{}</tbody></table></div>'
    ).format(rows)


@dataclass(frozen=True)
class _Merged:
    date: str
    pull_request: PullRequest


def _ledger(months: list[MonthSummary], entries: list[Entry], links: Links) -> Markup:
    """The cost ledger: each merged pull request's paired effects, newest first, and their sums since a date."""
    merged = [_Merged(m.month + "-01", pr) for m in months for pr in m.pull_requests]
    merged += [_Merged(e.date[:10], e.pull_request) for e in entries if e.pull_request is not None]
    if not merged:
        return Markup(
            '<section id="ledger"><h2>Cost ledger</h2><p>No merged pull request is recorded yet: the history step '
            "records each one's lockstep pair (docs/history.md).</p></section>"
        )
    columns = [(check, label) for check, label in LEDGER if any(m.pull_request.effect(check) for m in merged)]
    head = Markup("").join(Markup('<th scope="col">{} effect</th>').format(label) for _, label in columns)
    rows = Markup("").join(_ledger_row(m, columns, links) for m in reversed(merged))
    sums = Markup("").join(_sum_cell(check, [m.pull_request for m in merged]) for check, _ in columns)
    first = merged[0].date
    return Markup(
        '<section id="ledger"><h2>Cost ledger</h2><p>Each merged pull request\'s paired effect, measured against its '
        "own base commit in a lockstep pair, with its 95 % interval. The sum adds the effects in percent points; "
        "its interval assumes the pairs independent.</p>"
        '<p><label for="ledger-since">Sum since</label> <input type="date" id="ledger-since" value="{first}" '
        'min="{first}"></p><div class="scroll"><table class="ledger"><thead><tr><th scope="col">Merged</th>'
        '<th scope="col">Pull request</th>{head}</tr></thead><tbody>{rows}</tbody><tfoot><tr>'
        '<th scope="row" colspan="2">Sum (<span id="ledger-count">{count}</span> pull requests)</th>{sums}</tr>'
        "</tfoot></table></div></section>"
    ).format(first=first, head=head, rows=rows, count=len(merged), sums=sums)


def _ledger_row(merged: _Merged, columns: list[tuple[str, str]], links: Links) -> Markup:
    cells = []
    for check, _ in columns:
        effect = merged.pull_request.effect(check)
        if effect is None:
            cells.append(Markup('<td data-check="{}">not judged</td>').format(check))
            continue
        half = (effect.high - effect.low) / 2 if effect.low is not None and effect.high is not None else ""
        cells.append(Markup(
            '<td class="{status}" data-check="{check}" data-effect="{effect}" data-half="{half}">{text}</td>'
        ).format(status=effect.status, check=check, effect=effect.delta_pct, half=half,
                 text=_effect_text(merged.pull_request, check, "")[1:] + f" ({effect.status})"))  # fmt: skip
    return Markup('<tr data-date="{date}"><td>{date}</td><td><a href="{href}">{name}</a></td>{cells}</tr>').format(
        date=merged.date, href=links.pull(merged.pull_request), name=_pr_name(merged.pull_request),
        cells=Markup("").join(cells),
    )  # fmt: skip


def _sum_cell(check: str, pull_requests: Sequence[PullRequest]) -> Markup:
    effects = [e for pr in pull_requests if (e := pr.effect(check)) is not None]
    total = sum(e.delta_pct for e in effects)
    halves = [(e.high - e.low) / 2 for e in effects if e.low is not None and e.high is not None]
    spread = f" ± {math.sqrt(sum(h * h for h in halves)):.1f}" if halves else ""
    return Markup('<td class="sum" data-sum="{check}">{total:+.1f} %{spread}</td>').format(
        check=check, total=total, spread=spread
    )


def _environment_changes(entries: list[Entry], links: Links) -> Markup:
    items = [
        Markup('<li><a href="{href}">{date}, {short}</a>: {what}</li>').format(
            href=links.commit(after.commit), date=after.date[:10], short=after.commit[:12], what="; ".join(changes)
        )
        for before, after in itertools.pairwise(entries)
        if (changes := after.env.changes(before.env))
    ]
    if not items:
        return Markup("")
    return Markup(
        '<section id="environment"><h2>Environment changes</h2><p>Drawn as dashed lines on the charts: a step there '
        "may be the environment's, not the code's.</p><ul>{}</ul></section>"
    ).format(Markup("").join(items))


def _runs(entries: list[Entry], links: Links) -> Markup:
    """The last runs, newest first, each with its commit, workflow run and verdict."""
    rows = []
    for entry in reversed(entries[-50:]):
        run = links.run(entry.run_id)
        run_cell = (
            Markup('<a href="{}">run {}</a>').format(run, entry.run_id) if run else Markup("{}").format(entry.event)
        )
        rows.append(Markup(
            '<tr><td>{date}</td><td><a href="{href}">{short}</a></td><td>{run}</td>'
            '<td><span class="verdict {v}">{v}</span></td></tr>'
        ).format(date=entry.date, href=links.commit(entry.commit), short=entry.commit[:12], run=run_cell,
                 v=entry.verdict))  # fmt: skip
    if not rows:
        return Markup("")
    return Markup(
        '<section id="runs"><h2>Recent runs</h2><div class="scroll"><table><thead><tr><th scope="col">Started</th>'
        '<th scope="col">Commit</th><th scope="col">Workflow run</th><th scope="col">Verdict</th></tr></thead>'
        "<tbody>{}</tbody></table></div></section>"
    ).format(Markup("").join(rows))


def _index(history: History, configs: list[str], built: str) -> Markup:
    cards = Markup("").join(_card(history, config) for config in configs)
    empty = Markup("<p>The history holds no valid line yet.</p>") if not configs else Markup("")
    body = Markup('<h1>Canary history{repo}</h1>{empty}<ul class="cards">{cards}</ul>').format(
        repo=f": {history.repository}" if history.repository else "", empty=empty, cards=cards
    )
    return _page("rlhf-canary history", body, built, history)


def _card(history: History, config: str) -> Markup:
    months, entries = history.of(config)
    times = [v for m in months if (v := m.figures.step_time_s) is not None]
    times += [v for e in entries if (v := e.figures.step_time_s) is not None]
    latest = entries[-1] if entries else None
    verdict = latest.verdict if latest else "rolled up"
    step = format_value(times[-1], "s") if times else "not measured"
    runs = len(entries) + sum(m.num_runs for m in months)
    return Markup(
        '<li class="card"><h2><a href="{href}">{config}</a></h2><p><span class="verdict {v}">{v}</span> '
        "{date}</p><p>Step time {step}</p>{spark}<p>{runs} runs</p></li>"
    ).format(
        href=page_name(config), config=config, v=verdict, date=latest.date[:10] if latest else "", step=step,
        spark=sparkline(times[-SPARK_POINTS:], label=f"step time of {config}, last {min(len(times), SPARK_POINTS)}"
                        " runs"),
        runs=runs,
    )  # fmt: skip


def _page(title: str, body: Markup, built: str, history: History) -> Markup:
    notes = history.summary_notes()
    said = (
        Markup("<details class=\"notes\"><summary>{n} lines of the history were left out</summary><ul>{items}</ul>"
               "</details>").format(n=history.left_out,
                                    items=Markup("").join(Markup("<li>{}</li>").format(n) for n in notes))
        if notes else Markup("")
    )  # fmt: skip
    return Markup(
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta name="color-scheme" content="light dark"><title>{title}</title>'
        '<link rel="stylesheet" href="site.css"></head><body><a class="skip" href="#main">Skip to the content</a>'
        '<main id="main">{body}{said}</main><footer><p>Built {built} by rlhf-canary from its history '
        "(docs/history.md).</p></footer>"
        '<script src="ledger.js"></script></body></html>\n'
    ).format(title=title, body=body, said=said, built=built)


def _asset(name: str, out: Path) -> Path:
    source = resources.files("canary_action.history").joinpath("assets", name)
    with resources.as_file(source) as path:
        shutil.copyfile(path, out / name)
    return out / name


def _write(path: Path, page: Markup) -> Path:
    path.write_text(str(page), encoding="utf-8")
    return path
