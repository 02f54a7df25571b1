"""Headless Chromium for the browser tests (Debian's ``chromium`` package, driven by Playwright): one launch,
the same for every folder that has a ``browser`` fixture, which differ only in where their screenshots go.

Without the browser a test says how to install it and skips; under ``CI=true`` it fails instead, so CI cannot
pass without running them (``.ci/run`` installs ``chromium``).
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

__all__ = ("CHROMIUM", "launched", "missing", "require_browser")

CHROMIUM = "/usr/bin/chromium"


def missing(chromium: str = CHROMIUM) -> str | None:
    """What is missing for the browser tests to run, with how to install it; None when nothing is."""
    try:
        import playwright.async_api  # noqa: F401
    except ImportError:
        return "the playwright package is missing: pip install -e '.[dev]'"
    if not (Path(chromium).exists() or shutil.which(Path(chromium).name)):
        return f"{chromium} is missing: apt-get install -y chromium (Playwright drives Debian's browser)"
    return None


def require_browser(chromium: str = CHROMIUM) -> None:
    """Skips with the way to install the browser, or fails under CI=true, where skipping would pass CI."""
    absent = missing(chromium)
    if absent:
        if os.environ.get("CI") == "true":
            pytest.fail(f"browser tests cannot run: {absent}")
        pytest.skip(f"browser tests need Chromium: {absent}")


@contextlib.asynccontextmanager
async def launched(artifacts: Path) -> AsyncIterator[Any]:
    """The browser, launched headless for one test (``artifacts``, where its screenshots go, made first)."""
    require_browser()
    artifacts.mkdir(parents=True, exist_ok=True)
    from playwright.async_api import async_playwright

    async with async_playwright() as driver:
        browser = await driver.chromium.launch(
            executable_path=CHROMIUM if Path(CHROMIUM).exists() else shutil.which("chromium"),
            headless=True,
            args=["--no-sandbox"],  # CI containers run as root
        )
        try:
            yield browser
        finally:
            await browser.close()
