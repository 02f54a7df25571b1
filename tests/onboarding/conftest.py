"""Onboarding: the flows a new person or agent meets first, as they meet them (the README and the tour as
written, /llms.txt, ``hookyard up`` and the client commands finding it, the first inbox link, the first samples).

The fixtures of ``tests/conftest.py`` (a fresh database and Redis prefix per test, accounts, the real-process
``stack``) serve these modules too. Here: headless Chromium (Debian's ``/usr/bin/chromium`` driven by
Playwright, as in tests/e2e/test_inbox_browser.py), with one fresh context per simulated person, which is a
browser that never called /api/start and holds no cookie. Without the browser the tests skip saying how to
install it; under ``CI=true`` they fail instead.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.browser import launched
from tests.onboarding.clirun import procs, shared_stack, stack_cli_and_api  # noqa: F401 - fixtures
from tests.stack import Stack

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "onboarding"


@pytest.fixture
async def browser() -> AsyncIterator[Any]:
    async with launched(ARTIFACTS) as browser:
        yield browser


class Person:
    """A fresh browser context (no cookie, no history) with one page; requests leaving the stack's control
    plane are aborted and recorded in ``foreign``, page errors in ``errors``."""

    def __init__(self, context: Any, page: Any) -> None:
        self.context, self.page = context, page
        self.foreign: list[str] = []
        self.errors: list[str] = []


async def person(browser: Any, stack: Stack, *, width: int = 1400, clipboard: bool = False) -> Person:
    context = await browser.new_context(
        viewport={"width": width, "height": 1000},
        permissions=["clipboard-read", "clipboard-write"] if clipboard else [],
    )
    page = await context.new_page()
    who = Person(context, page)
    own = urlsplit(stack.control_url).netloc

    async def only_local(route: Any) -> None:
        if urlsplit(route.request.url).netloc == own:
            await route.continue_()
        else:
            who.foreign.append(route.request.url)
            await route.abort()

    await context.route("**/*", only_local)
    page.on("pageerror", lambda exc: who.errors.append(str(exc)))
    page.on("console", lambda msg: who.errors.append(msg.text) if msg.type == "error" else None)
    return who
