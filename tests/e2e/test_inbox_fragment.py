"""The inbox page follows its address's fragment while open (headless Chromium, as ``test_inbox_browser.py``):
an event's address pasted into an open page shows that event, and its transform editor runs on it. Only a
load read the fragment, so the page kept showing the event before while the address (and the editor, which
reads the address) named another: a dry run ran on an event the page did not show."""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest

from tests.conftest import make_account
from tests.events_support import Ev, store
from tests.helpers import db
from tests.inbox_browser import (
    browser,  # noqa: F401 - a fixture
    offline_page,
)
from tests.stack import Stack

pytestmark = pytest.mark.slow


async def test_an_events_address_in_an_open_page_shows_that_event(
    browser: Any,  # noqa: F811 - the fixture imported above
    stack: Stack,
    database_url: str,
) -> None:
    from playwright.async_api import expect

    stack.start_control()
    account = await make_account(database_url)
    async with httpx.AsyncClient(base_url=stack.control_url, headers=account.headers, timeout=10) as api:
        ep = (await api.post("/v1/endpoints", json={"name": "fragments"})).json()["id"]
        link = (await api.post(f"/v1/endpoints/{ep}/inbox-link")).json()["url"]
    older = Ev(endpoint_id=ep, body=b'{"type":"older.one"}', path="/older")
    newer = Ev(endpoint_id=ep, body=b'{"type":"newer.one"}', path="/newer")
    async with db(database_url) as conn:
        await store(conn, None, None, [older])
        await store(conn, None, None, [newer])

    page, foreign = await offline_page(browser, stack)
    await page.goto(link)
    detail = page.locator("#detail h2 .path")
    await expect(detail).to_have_text("/newer", timeout=10_000)  # opened on the newest
    await page.evaluate("id => { location.hash = id; }", older.id)
    await expect(detail).to_have_text("/older", timeout=10_000)
    source = page.get_by_label("transform source")
    await source.fill("function handler(r) { return { ...r, body: { seen: r.body.type } }; }")
    await page.get_by_role("button", name="Run on this event").click()
    await expect(page.locator("#transform-output")).to_have_text(re.compile('"seen": "older.one"'), timeout=10_000)
    assert foreign == []
    assert page.errors == []
