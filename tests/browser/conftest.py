"""The browser tests open the history site from disk in Debian's chromium, driven by Playwright
(scripts/install-browser.sh installs both it and axe-core). Without them they skip, saying what is missing, except
under CI=true, where a missing browser is a failure: the browser tests run in CI."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from playwright.sync_api import Browser

REPO = Path(__file__).resolve().parents[2]
AXE = REPO / ".cache" / "axe-core-4.14.1" / "axe.min.js"  # scripts/install-browser.sh


def missing(what: str) -> Any:
    why = f"{what}: run scripts/install-browser.sh"
    if os.environ.get("CI"):
        pytest.fail(f"{why} (CI=true: the browser tests must run)")
    pytest.skip(why)


def chromium_path() -> str:
    found = os.environ.get("CANARY_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    return found if found else missing("no chromium on PATH")


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        missing("Playwright is not installed (the dev extra)")
    path = chromium_path()
    with sync_playwright() as playwright:
        # --no-sandbox: the suite runs as root on CI machines, where Chromium refuses its sandbox.
        launched = playwright.chromium.launch(executable_path=path, args=["--no-sandbox"])
        yield launched
        launched.close()


@pytest.fixture(scope="session")
def axe_source() -> str:
    return AXE.read_text(encoding="utf-8") if AXE.is_file() else missing(f"no axe-core at {AXE}")
