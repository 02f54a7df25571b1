"""A provider's handshake in the inbox, in a real browser (headless Chromium, as ``test_inbox_browser.py``):
Meta's GET challenge, answered at the edge of real ``hookyard edge``/``control``/``worker`` processes, is
listed live marked as a handshake (and its detail says it was answered at the edge, never delivered), while
an ordinary request to the same URL is not marked."""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest

from tests.inbox_browser import ARTIFACTS, account_api, inbox_link, open_inbox
from tests.stack import Stack

pytestmark = pytest.mark.slow


async def test_a_handshake_is_listed_marked_as_one(browser: Any, stack: Stack, database_url: str) -> None:
    from playwright.async_api import expect

    async with account_api(stack, database_url, everything=True) as api:
        endpoint = (await api.post("/v1/endpoints", json={"name": "meta"})).json()
        ep = endpoint["id"]
        config = {"provider": "meta", "verify_token": "meatyhamhock"}
        assert (await api.patch(f"/v1/endpoints/{ep}/auth-config", json=config)).status_code == 200
        link = await inbox_link(api, ep)

    page, foreign = await open_inbox(browser, stack, link)
    await expect(page.locator("#status")).to_have_text(re.compile("^live"), timeout=10_000)

    async with httpx.AsyncClient(timeout=10) as sender:
        params = {"hub.mode": "subscribe", "hub.challenge": "1158201444", "hub.verify_token": "meatyhamhock"}
        answer = await sender.get(endpoint["ingest_url"], params=params)
        assert (answer.status_code, answer.text) == (200, "1158201444")
        handshake_id = answer.headers["x-hookyard-event-id"]
        await page.locator(f'li.event[data-id="{handshake_id}"]').wait_for(timeout=10_000)
        ordinary = await sender.post(endpoint["ingest_url"], content=b'{"object": "page"}')
        assert ordinary.status_code == 200, ordinary.text
        await page.locator(f'li.event[data-id="{ordinary.json()["id"]}"]').wait_for(timeout=10_000)

    shaken = page.locator(f'li.event[data-id="{handshake_id}"]')
    assert await shaken.locator(".handshake").text_content() == "handshake"
    assert await shaken.locator(".provider").text_content() == "meta"
    assert await shaken.locator(".type").text_content() == "meta_hub_challenge"
    assert await page.locator("li.event .handshake").count() == 1  # the ordinary request is not marked
    await shaken.click()
    summary = page.locator("dl.summary")
    await summary.wait_for()
    handshake = summary.locator("dt", has_text="handshake").locator("xpath=following-sibling::dd[1]")
    assert await handshake.text_content() == "yes: answered at the edge, never delivered"
    # The provider filter offers every catalog name, not only the four kinds, and filters by it.
    chooser = page.get_by_label("provider", exact=True)
    offered = await chooser.locator("option").evaluate_all("options => options.map(o => o.value)")
    assert offered[:5] == ["", "identity", "commerce", "payments", "code_host"]
    assert {"slack", "meta", "zoom", "discord"} <= set(offered)
    await chooser.select_option("slack")
    await expect(page.locator("li.event")).to_have_count(0, timeout=10_000)
    await chooser.select_option("meta")
    await expect(page.locator("li.event")).to_have_count(2, timeout=10_000)
    await page.screenshot(path=str(ARTIFACTS / "handshake.png"), full_page=True)
    assert foreign == []
    assert page.errors == []  # type: ignore[attr-defined]  # the list offline_page attaches to the page
