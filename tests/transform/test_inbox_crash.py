"""The inbox page shows a destination whose transform ended its sandbox process (headless Chromium against a
real control process), and what the process said stays text."""

from __future__ import annotations

from typing import Any

import pytest

from control.db import destinations as db_destinations
from tests.helpers import db
from tests.inbox_browser import account_api, inbox_link, open_inbox
from tests.stack import Stack

HOSTILE = '<img src=x onerror="window.__pwned = 7">'


@pytest.mark.slow
async def test_the_inbox_shows_a_crashed_transform(
    browser: Any,
    stack: Stack,
    database_url: str,
) -> None:
    from playwright.async_api import expect

    async with account_api(stack, database_url) as api:
        ep = (await api.post("/v1/endpoints", json={"name": "billing"})).json()["id"]
        body = {"url": "https://crm.example/hooks", "transform": "function handler(r) { return r; }"}
        created = (await api.post(f"/v1/endpoints/{ep}/destinations", json=body)).json()
        async with db(database_url) as conn:  # as the deliver worker marks it (tests/transform/test_deliveries)
            digest = await conn.fetchval("SELECT transform_digest FROM destinations WHERE id = $1", created["id"])
            await db_destinations.mark_transform_crash(conn, created["id"], digest, HOSTILE)
        link = await inbox_link(api, ep)
        page, foreign = await open_inbox(browser, stack, link)
        item = page.locator(f'#destinations li.destination[data-id="{created["id"]}"]')
        crash = item.locator(".destination-transform-crash")
        await expect(crash).to_contain_text("transform crashed its sandbox")
        assert await crash.get_attribute("title") == HOSTILE
    assert await page.evaluate("window.__pwned") is None
    assert foreign == []
    assert page.errors == []
