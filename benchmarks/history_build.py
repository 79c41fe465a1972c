"""How long the history site takes to build, and its busiest page to open in a browser (issue 38: 1,000 entries x 5
configs build in <= 5 s; the page opens in <= 2 s).

    python benchmarks/history_build.py [--runs 1000] [--configs 5] [--repeats 3] [-o DIR]

Writes a history of `--runs` entries per config (tests/history_cases.py: a pull request every 7th run, a regression
every 97th), then, `--repeats` times: reads it and builds the site (in this process, as `canary history build` does
after its imports), and opens one config page from disk in Debian's chromium (Playwright), timed from navigation to
the load event and to the first paint of every chart. Prints the median and the range of each, and the sizes.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from canary_action.history.read import read_history  # noqa: E402
from canary_action.history.site import build_site, page_name  # noqa: E402
from tests.history_cases import make_entries, write_entries  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--configs", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("-o", "--output", type=Path, help="Keep the history and the site here.")
    args = parser.parse_args()
    folder = args.output or Path(tempfile.mkdtemp(prefix="history-bench-"))
    history_path = write_entries(folder / "history.jsonl", make_entries(args.runs, configs=args.configs))
    builds, loads = [], []
    for _ in range(args.repeats):
        site = folder / "site"
        shutil.rmtree(site, ignore_errors=True)
        start = time.perf_counter()
        build_site(read_history(history_path), site)
        builds.append(time.perf_counter() - start)
        loads.append(open_page(site / page_name("canary-0")))
    page = site / page_name("canary-0")
    report = {
        "entries": args.runs * args.configs,
        "history_bytes": history_path.stat().st_size,
        "page_bytes": page.stat().st_size,
        "site_bytes": sum(p.stat().st_size for p in site.iterdir()),
        "build_s": builds,
        "load_s": [load for load, _ in loads],
        "charts_drawn_s": [drawn for _, drawn in loads],
    }
    print(json.dumps(report, indent=2))
    for name in ("build_s", "load_s", "charts_drawn_s"):
        values = report[name]
        assert isinstance(values, list)
        print(f"{name}: median {statistics.median(values):.2f} s (range {min(values):.2f}-{max(values):.2f})")


def open_page(path: Path) -> tuple[float, float]:
    """Seconds from navigation to the load event, and to the point where every chart has its points laid out."""
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1100, "height": 900})
        start = time.perf_counter()
        page.goto(path.as_uri(), wait_until="load")
        loaded = time.perf_counter() - start
        page.evaluate("() => Array.from(document.querySelectorAll('svg.chart a.point')).map((a) => a.getBBox().x)")
        drawn = time.perf_counter() - start
        browser.close()
    return loaded, drawn


if __name__ == "__main__":
    main()
