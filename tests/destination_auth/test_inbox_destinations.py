"""The inbox page lists the endpoint's destinations with their state, and its buttons disable and enable one
(headless Chromium against a real control process); a hostile destination name stays text."""

from __future__ import annotations

from typing import Any

import pytest

from tests.inbox_browser import account_api, inbox_link, open_inbox
from tests.stack import Stack

HOSTILE = '<img src=x onerror="window.__pwned = 5">'


@pytest.mark.slow
async def test_the_inbox_disables_and_enables_a_destination(
    browser: Any,
    stack: Stack,
    database_url: str,
) -> None:
    from playwright.async_api import expect

    async with account_api(stack, database_url) as api:
        ep = (await api.post("/v1/endpoints", json={"name": "billing"})).json()["id"]
        body = {"url": "https://crm.example/hooks", "name": HOSTILE, "auth": {"type": "bearer", "token": "t0k"}}
        destination = (await api.post(f"/v1/endpoints/{ep}/destinations", json=body)).json()["id"]
        link = await inbox_link(api, ep)
        page, foreign = await open_inbox(browser, stack, link)
        item = page.locator(f'#destinations li.destination[data-id="{destination}"]')
        await expect(item.locator(".destination-name")).to_have_text(HOSTILE)
        await expect(item.locator(".destination-state")).to_have_text("enabled")
        await item.locator("button.destination-disable").click()
        await expect(item.locator(".destination-state")).to_have_text("disabled")
        await expect(item.locator(".destination-reason")).to_have_text("disabled on the inbox page")
        assert (await api.get(f"/v1/destinations/{destination}")).json()["state"] == "disabled"
        await item.locator("button.destination-enable").click()
        await expect(item.locator(".destination-state")).to_have_text("enabled")
        assert (await api.get(f"/v1/destinations/{destination}")).json()["state"] == "enabled"
    assert await page.evaluate("window.__pwned") is None
    assert foreign == []
    assert page.errors == []
