"""The inbox page shows a destination whose transform ended its sandbox process (headless Chromium against a
real control process), and what the process said stays text; and one whose transform the worker slows after
repeated stops by its limits, with the wait per call."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from control.db import destinations as db_destinations
from tests.helpers import db
from tests.inbox_browser import account_api, inbox_link, open_inbox
from tests.stack import Stack

HOSTILE = '<img src=x onerror="window.__pwned = 7">'


async def _marked(
    browser: Any, stack: Stack, database_url: str, transform: str, mark: Callable[[Any, str, str], Awaitable[None]]
) -> tuple[Any, Any, list[str]]:
    """The inbox page of an endpoint with a destination of ``transform`` that ``mark`` (a connection, its id and
    digest) marked as the deliver worker does (tests/transform/test_deliveries, test_slowed), its item, and the
    foreign requests the page made."""
    async with account_api(stack, database_url) as api:
        ep = (await api.post("/v1/endpoints", json={"name": "billing"})).json()["id"]
        body = {"url": "https://crm.example/hooks", "transform": transform}
        created = (await api.post(f"/v1/endpoints/{ep}/destinations", json=body)).json()
        async with db(database_url) as conn:
            digest = await conn.fetchval("SELECT transform_digest FROM destinations WHERE id = $1", created["id"])
            await mark(conn, created["id"], digest)
        link = await inbox_link(api, ep)
        page, foreign = await open_inbox(browser, stack, link)
    return page, page.locator(f'#destinations li.destination[data-id="{created["id"]}"]'), foreign


@pytest.mark.slow
async def test_the_inbox_shows_a_crashed_transform(browser: Any, stack: Stack, database_url: str) -> None:
    from playwright.async_api import expect

    async def crashed(conn: Any, destination_id: str, digest: str) -> None:
        await db_destinations.mark_transform_crash(conn, destination_id, digest, HOSTILE)

    page, item, foreign = await _marked(browser, stack, database_url, "function handler(r) { return r; }", crashed)
    crash = item.locator(".destination-transform-crash")
    await expect(crash).to_contain_text("transform crashed its sandbox")
    assert await crash.get_attribute("title") == HOSTILE
    assert await page.evaluate("window.__pwned") is None
    assert foreign == []
    assert page.errors == []


@pytest.mark.slow
async def test_the_inbox_shows_a_slowed_transform(browser: Any, stack: Stack, database_url: str) -> None:
    from playwright.async_api import expect

    async def slowed(conn: Any, destination_id: str, digest: str) -> None:
        await db_destinations.mark_transform_slowed(conn, destination_id, digest, 4.0)

    page, item, foreign = await _marked(browser, stack, database_url, "function handler(r) { for (;;) {} }", slowed)
    await expect(item.locator(".destination-transform-slowed")).to_contain_text(
        "transform slowed: each call waits 4 s after repeated stops by its limits; fix the code to end it"
    )
    await expect(item.locator(".destination-transform-crash")).to_have_count(0)
    assert foreign == []
    assert page.errors == []
