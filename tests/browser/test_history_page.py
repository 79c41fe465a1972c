"""The history site in a real browser (Debian's chromium through Playwright), opened from disk: every chart drawn
with its points, a point's link, the ledger's sum as the reader picks a date, a hostile history inert, axe-core's
rules in light and dark, a phone's width; the docs' screenshots (UPDATE_SCREENSHOTS=1 writes docs/images/history-*.png
from this run)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from canary_action.history.read import read_history
from canary_action.history.site import build_site, page_name
from tests.browser.conftest import REPO
from tests.history_cases import REPOSITORY, hostile_entry, make_entries, write_entries

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

RUNS = 120
SCREENSHOTS = REPO / "docs" / "images"
#: This project's own recorded runs as a history (benchmarks/history_from_data.py).
RECORDED = REPO / "benchmarks" / "data" / "history-2026-11-28" / "history.jsonl"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("history")
    entries = make_entries(RUNS, configs=2)
    write_entries(folder / "history.jsonl", [*entries, hostile_entry(config="canary-1")])
    build_site(read_history(folder / "history.jsonl"), folder / "site")
    return folder / "site"


class Opened:
    """A page, with what its console said and any dialog a script opened."""

    def __init__(self, page: Page) -> None:
        self.page = page
        self.console: list[str] = []
        self.dialogs: list[str] = []
        page.on("console", lambda m: self.console.append(f"{m.type}: {m.text}"))
        page.on("pageerror", lambda e: self.console.append(f"pageerror: {e}"))
        page.on("dialog", lambda d: (self.dialogs.append(d.message), d.dismiss()))

    def open(self, path: Path) -> Page:
        self.page.goto(path.as_uri())
        self.page.wait_for_load_state("load")
        return self.page


@pytest.fixture
def opened(browser: Browser) -> Iterator[Opened]:
    context = browser.new_context(viewport={"width": 1100, "height": 900}, color_scheme="light")
    yield Opened(context.new_page())
    context.close()


def test_every_chart_renders_its_points_and_a_point_opens_its_commit(site: Path, opened: Opened) -> None:
    page = opened.open(site / "index.html")
    assert page.locator(".card").count() == 2
    page.click("text=canary-0")
    page.wait_for_load_state("load")  # the click commits the navigation; the page is whole only at its load event
    assert page.url.endswith(page_name("canary-0"))
    entries = [e for e in make_entries(RUNS, configs=2) if e.config == "canary-0"]
    charts = page.locator("svg.chart")
    assert charts.count() == 6
    for index in range(charts.count()):
        chart = charts.nth(index)
        box = chart.bounding_box()
        assert box is not None
        assert box["width"] > 300
        assert box["height"] > 100
        drawn = chart.locator("a.point")
        assert drawn.count() == RUNS == int(chart.get_attribute("data-points") or 0)
        sizes = drawn.evaluate_all("(points) => points.map((p) => p.getBBox().width)")
        assert all(size > 0 for size in sizes)  # each point is painted, not an empty link
    last = charts.first.locator("a.point").last
    assert last.get_attribute("href") == f"https://github.com/{REPOSITORY}/commit/{entries[-1].commit}"
    assert entries[-1].commit[:12] in (last.locator("title").text_content() or "")
    assert opened.console == []
    assert opened.dialogs == []


def test_the_ledger_sums_the_recorded_effects_from_the_chosen_date(site: Path, opened: Opened) -> None:
    page = opened.open(site / page_name("canary-0"))
    merged = [(e.date[:10], e.pull_request) for e in make_entries(RUNS, configs=2)
              if e.config == "canary-0" and e.pull_request is not None]  # fmt: skip
    total = page.locator('td[data-sum="step_time"]')

    def shown_as(since: str) -> None:
        """The sum and its interval's half-width, as shown to 0.1: each within rounding of the recorded effects'."""
        effects = [pr.effects[0] for date, pr in merged if date >= since]
        half = sum(((e.high or 0) - (e.low or 0)) ** 2 / 4 for e in effects) ** 0.5
        said, plus_minus = (total.text_content() or "").split(" % ± ")
        assert abs(float(said) - sum(e.delta_pct for e in effects)) <= 0.05 + 1e-9
        assert abs(float(plus_minus) - half) <= 0.05 + 1e-9

    shown_as("0000")
    since = merged[len(merged) // 2][0]
    page.fill("#ledger-since", since)
    shown_as(since)
    assert page.locator("#ledger-count").text_content() == str(sum(date >= since for date, _ in merged))
    assert page.locator("table.ledger tbody tr:visible").count() == sum(date >= since for date, _ in merged)
    assert opened.console == []


def test_a_hostile_entry_stays_text(site: Path, opened: Opened) -> None:
    page = opened.open(site / page_name("canary-1"))
    assert page.locator("img").count() == 0
    assert page.locator("script").count() == 1
    change = page.locator("#environment li").last.text_content() or ""
    assert '<script>alert("x")</script>' in change  # shown as the text it is
    for link in page.locator("a").all()[:400]:
        assert not (link.get_attribute("href") or "").startswith("javascript:")
    assert opened.dialogs == []
    assert opened.console == []


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_axe_core_finds_no_violation(site: Path, browser: Browser, axe_source: str, scheme: str) -> None:
    context = browser.new_context(viewport={"width": 1100, "height": 900}, color_scheme=scheme)
    page = context.new_page()
    try:
        for name in ("index.html", page_name("canary-0")):
            page.goto((site / name).as_uri())
            page.add_script_tag(content=axe_source)
            found: dict[str, Any] = page.evaluate("() => axe.run(document, {resultTypes: ['violations']})")
            violations = [(v["id"], v["help"], [n["target"] for n in v["nodes"][:3]]) for v in found["violations"]]
            assert violations == [], f"{name} ({scheme})"
    finally:
        context.close()


def test_a_phone_reads_it_without_the_page_scrolling_sideways(site: Path, browser: Browser) -> None:
    context = browser.new_context(viewport={"width": 390, "height": 844}, color_scheme="light", is_mobile=True)
    page = context.new_page()
    try:
        for name in ("index.html", page_name("canary-0")):
            page.goto((site / name).as_uri())
            overflow = page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")
            assert overflow <= 0, name
            size = page.evaluate("() => getComputedStyle(document.body).fontSize")
            assert size == "16px"
        tick = page.locator("svg.chart text.tick").first.bounding_box()
        assert tick is not None
        assert tick["height"] >= 9
    finally:
        context.close()


def test_screenshots_for_the_docs(browser: Browser, tmp_path: Path) -> None:
    """docs/images/history-*.png: the site of this project's own recorded runs (benchmarks/history_from_data.py),
    its index and a config page, light and dark, a phone's view and the ledger, taken on every run of this test
    (each a real picture: more than a blank page's bytes); UPDATE_SCREENSHOTS=1 copies them to docs/images."""
    build_site(read_history(RECORDED), tmp_path / "site")
    shots = [("history-index.png", "index.html", "light", 1100, False),
             ("history-team-dpo.png", page_name("team-dpo"), "light", 1100, False),
             ("history-tiny-dpo-dark.png", page_name("tiny-dpo"), "dark", 1100, False),
             ("history-phone.png", page_name("team-dpo"), "light", 390, False),
             ("history-ledger.png", page_name("team-dpo"), "light", 1100, True)]  # fmt: skip
    for file, name, scheme, width, ledger in shots:
        context = browser.new_context(viewport={"width": width, "height": 900}, color_scheme=scheme)
        page = context.new_page()
        page.goto((tmp_path / "site" / name).as_uri())
        target = page.locator("#ledger") if ledger else page
        picture = target.screenshot(path=str(tmp_path / file))
        context.close()
        assert len(picture) > 20_000, file  # a blank 1100x900 page is ~4 KB
        if os.environ.get("UPDATE_SCREENSHOTS"):
            shutil.copyfile(tmp_path / file, SCREENSHOTS / file)
