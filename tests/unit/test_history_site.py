"""The history's static site, read back as HTML: what each chart draws, where every link goes, what the ledger sums,
and that nothing of a hostile history becomes markup, a script or a link of its choosing."""

from __future__ import annotations

import re
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path

import pytest

from canary_action.history.read import read_history
from canary_action.history.site import build_site, page_name
from tests.history_cases import HOSTILE, REPOSITORY, hostile_entry, make_entries, write_entries

COMMIT_URL = re.compile(rf"https://github\.com/{REPOSITORY}/commit/[0-9a-f]{{40}}")
#: Every link the site may hold: GitHub pages of this repository, its own pages and assets, anchors.
ALLOWED_LINK = re.compile(
    rf"https://github\.com/{REPOSITORY}/(commit/[0-9a-f]{{40}}|pull/[0-9]+|actions/runs/[0-9]+)"
    r"|index\.html|config-[A-Za-z0-9._-]+\.html|site\.css|ledger\.js|#[a-z-]+"
)


class Page(HTMLParser):
    """Every start tag with its attributes, in order, and the text of each element that has an id."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str]]] = []
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, {k: v or "" for k, v in attrs}))

    def all(self, tag: str, **wanted: str) -> list[dict[str, str]]:
        return [a for t, a in self.tags if t == tag and all(wanted[k] in a.get(k, "").split() for k in wanted)]


def chart_points(text: str, chart_id: str) -> list[str]:
    """The links of one chart's points, in order."""
    svg = text[text.index(f'<svg class="chart" id="{chart_id}"') :]
    svg = svg[: svg.index("</svg>")]
    return re.findall(r'<a class="point" href="([^"]+)">', svg)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("history")
    write_entries(folder / "history.jsonl", make_entries(120, configs=2))
    build_site(read_history(folder / "history.jsonl"), folder / "site")
    return folder / "site"


def test_every_chart_draws_every_run_and_every_point_links_to_its_commit(site: Path) -> None:
    entries = [e for e in make_entries(120, configs=2) if e.config == "canary-1"]
    text = (site / page_name("canary-1")).read_text(encoding="utf-8")
    page = Page(text)
    charts = page.all("svg", **{"class": "chart"})
    assert [c["id"] for c in charts] == [
        "chart-step_time_s", "chart-tokens_per_s", "chart-memory_mib", "chart-gpu_time_s", "chart-heldout",
        "chart-tail_loss",
    ]  # fmt: skip
    for chart in charts:
        assert chart["data-points"] == "120"
        links = chart_points(text, chart["id"])
        assert links == [f"https://github.com/{REPOSITORY}/commit/{e.commit}" for e in entries]
    step = text[text.index('id="chart-step_time_s"') : text.index("</svg>", text.index('id="chart-step_time_s"'))]
    assert step.count('<path class="regression"') == sum(e.verdict == "regression" for e in entries) > 0
    assert step.count('<a class="marker pull-request"') == sum(
        e.pull_request is not None and e.bisect is None for e in entries
    )
    assert step.count('<a class="marker bisect"') == sum(e.bisect is not None for e in entries) > 0
    assert step.count('<g class="env">') == 1  # torch 2.13.0 -> 2.14.0, halfway
    assert "environment changed: torch 2.13.0 -&gt; 2.14.0" in step
    assert '<polygon class="band"' in step  # the noise band
    table = text[text.index('id="chart-step_time_s-figure"') :]
    table = table[: table.index("</table>")]
    for entry in entries:  # each value's row links its commit, workflow run and merged pull request
        assert f'<a href="https://github.com/{REPOSITORY}/actions/runs/{entry.run_id}">run {entry.run_id}</a>' in table
        if entry.pull_request is not None:
            pull = f"https://github.com/{REPOSITORY}/pull/{entry.pull_request.number}"
            assert f'<a href="{pull}">pull request #{entry.pull_request.number}</a>' in table


def test_the_ledger_lists_every_merged_pull_request_and_sums_their_effects(site: Path) -> None:
    entries = [e for e in make_entries(120, configs=2) if e.config == "canary-0"]
    merged = [e.pull_request for e in entries if e.pull_request is not None]
    page = Page((site / page_name("canary-0")).read_text(encoding="utf-8"))
    rows = page.all("tr")
    cells = page.all("td", **{"data-check": "step_time"})
    assert len(cells) == len(merged) == sum(1 for r in rows if "data-date" in r)
    effects = [float(c["data-effect"]) for c in cells]
    assert sorted(effects) == sorted(pr.effects[0].delta_pct for pr in merged)
    text = (site / page_name("canary-0")).read_text(encoding="utf-8")
    total = sum(pr.effects[0].delta_pct for pr in merged)
    half = sum(1.5**2 for _ in merged) ** 0.5
    assert f'<td class="sum" data-sum="step_time">{total:+.1f} % ± {half:.1f}</td>' in text
    assert '<td class="sum" data-sum="max_memory">+0.0 %</td>' in text  # no interval recorded: none summed


def test_the_index_has_a_card_per_config_with_its_latest_verdict(site: Path) -> None:
    page = Page((site / "index.html").read_text(encoding="utf-8"))
    assert [a["href"] for a in page.all("a") if a["href"].startswith("config-")] == [
        "config-canary-0.html", "config-canary-1.html"
    ]  # fmt: skip
    assert len(page.all("svg", **{"class": "spark"})) == 2


def test_every_link_is_one_the_site_built(site: Path) -> None:
    for path in site.glob("*.html"):
        page = Page(path.read_text(encoding="utf-8"))
        hrefs = [a["href"] for t, a in page.tags if "href" in a]
        assert hrefs
        assert [h for h in hrefs if not ALLOWED_LINK.fullmatch(h)] == []


def test_a_hostile_history_renders_inert(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    lines = [e.model_dump_json() for e in make_entries(5)] + [hostile_entry().model_dump_json()]
    lines.append(make_entries(1)[0].model_dump_json().replace('"canary-0"', '"<script>alert(3)</script>"'))
    lines.append('{"kind": "entry", "config": "' + HOSTILE.replace('"', '\\"') + '"}')
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    history = read_history(path)
    assert history.left_out == 2
    build_site(history, tmp_path / "site")
    for page_path in (tmp_path / "site").glob("*.html"):
        text = page_path.read_text(encoding="utf-8")
        page = Page(text)
        tags = Counter(tag for tag, _ in page.tags)
        assert tags["script"] == 1
        assert page.all("script")[0] == {"src": "ledger.js"}
        assert tags["img"] == 0
        assert tags["iframe"] == 0
        assert tags["object"] == 0
        assert not [name for _, attrs in page.tags for name in attrs if name.startswith("on")]
        assert all(ALLOWED_LINK.fullmatch(a["href"]) for _, a in page.tags if "href" in a)
        assert "javascript:" not in "".join(a.get("href", "") for _, a in page.tags)
    text = (tmp_path / "site" / page_name("canary-0")).read_text(encoding="utf-8")
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in text  # said, as text
