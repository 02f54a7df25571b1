"""The inbox page in a real browser, for the tests of it in every folder (``tests/e2e/test_inbox_browser.py``
and the destination, transform and alert tests of the page): the ``browser`` fixture (``tests/browser.py``)
with its screenshots in ``test-artifacts/inbox``, which each folder's conftest makes its own; a page that may
reach nothing but the stack's control plane (``offline_page``: the page must work offline); a new account's
/v1 client on a started control process, or on all three processes (``account_api``); a signed link to an
endpoint's page (``inbox_link``) and the offline page opened at one (``open_inbox``)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from tests.browser import launched
from tests.conftest import make_account
from tests.stack import Stack

__all__ = ("ARTIFACTS", "account_api", "browser", "inbox_link", "offline_page", "open_inbox", "running")

ARTIFACTS = Path(__file__).resolve().parents[1] / "test-artifacts" / "inbox"


@pytest.fixture
async def browser() -> AsyncIterator[Any]:
    async with launched(ARTIFACTS) as browser:
        yield browser


async def offline_page(browser: Any, stack: Stack) -> tuple[Any, list[str]]:
    """A page whose requests to anything but the stack's control plane are aborted and recorded; its errors
    (uncaught, and console errors) in ``page.errors``."""
    context = await browser.new_context(viewport={"width": 1400, "height": 1000})
    foreign: list[str] = []
    own = urlsplit(stack.control_url).netloc

    async def only_local(route: Any) -> None:
        if urlsplit(route.request.url).netloc == own:
            await route.continue_()
        else:
            foreign.append(route.request.url)
            await route.abort()

    await context.route("**/*", only_local)
    page = await context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    page.errors = errors  # type: ignore[attr-defined]  # Page has no slot for it; the tests read it back
    return page, foreign


def running(stack: Stack) -> Stack:
    stack.start_edge()
    stack.start_control()
    stack.start_worker()
    return stack


@contextlib.asynccontextmanager
async def account_api(stack: Stack, database_url: str, *, everything: bool = False) -> AsyncIterator[httpx.AsyncClient]:
    """/v1 of the stack's control process, started here (with an edge and a worker too if ``everything``), as
    a new account."""
    if everything:
        running(stack)
    else:
        stack.start_control()
    account = await make_account(database_url)
    async with httpx.AsyncClient(base_url=stack.control_url, headers=account.headers, timeout=10) as api:
        yield api


async def inbox_link(api: httpx.AsyncClient, endpoint_id: str) -> str:
    """A signed link to the endpoint's inbox page (``POST /v1/endpoints/{id}/inbox-link``, as ``hookyard open``
    asks for one)."""
    made = await api.post(f"/v1/endpoints/{endpoint_id}/inbox-link")
    assert made.status_code == 200, made.text
    url: str = made.json()["url"]
    return url


async def open_inbox(browser: Any, stack: Stack, link: str) -> tuple[Any, list[str]]:
    """``offline_page`` opened at ``link``, once the page answered; what ``offline_page`` answers."""
    page, foreign = await offline_page(browser, stack)
    opened = await page.goto(link)
    assert opened is not None
    assert opened.status == 200, await opened.text()
    return page, foreign
