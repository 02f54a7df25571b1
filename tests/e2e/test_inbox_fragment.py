"""The inbox page follows its address's fragment while open (headless Chromium, as ``test_inbox_browser.py``):
an event's address pasted into an open page shows that event, and its transform editor runs on it. Only a
load read the fragment, so the page kept showing the event before while the address (and the editor, which
reads the address) named another: a dry run ran on an event the page did not show."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.events_support import Ev, store
from tests.helpers import db
from tests.inbox_browser import account_api, inbox_link, open_inbox
from tests.stack import Stack

pytestmark = pytest.mark.slow


async def test_an_events_address_in_an_open_page_shows_that_event(
    browser: Any,
    stack: Stack,
    database_url: str,
) -> None:
    from playwright.async_api import expect

    async with account_api(stack, database_url) as api:
        ep = (await api.post("/v1/endpoints", json={"name": "fragments"})).json()["id"]
        link = await inbox_link(api, ep)
    older = Ev(endpoint_id=ep, body=b'{"type":"older.one"}', path="/older")
    newer = Ev(endpoint_id=ep, body=b'{"type":"newer.one"}', path="/newer")
    async with db(database_url) as conn:
        await store(conn, None, None, [older])
        await store(conn, None, None, [newer])

    page, foreign = await open_inbox(browser, stack, link)
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
