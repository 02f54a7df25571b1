"""The inbox page says "verified" for a triggered sample, in the words ``hookyard tail`` and ``hookyard up``
use (``control.records.verdict``), and "not checked" for a request nothing proved. Headless Chromium
(Debian's, driven by Playwright) against real edge, control and worker processes; skipped without the
browser, failed under ``CI=true`` (the ``browser`` fixture of ``conftest.py``)."""

from __future__ import annotations

import re

import httpx
import pytest

from control.records.verdict import NOT_CHECKED, VERIFIED
from tests.conftest import make_account
from tests.inbox_browser import inbox_link
from tests.stack import Stack

pytestmark = pytest.mark.slow


async def test_a_triggered_sample_reads_verified_in_the_inbox(browser, stack: Stack, database_url: str) -> None:
    from playwright.async_api import expect

    stack.start_edge()
    stack.start_control()
    stack.start_worker()
    account = await make_account(database_url)
    async with httpx.AsyncClient(base_url=stack.control_url, headers=account.headers, timeout=30) as api:
        endpoint = (await api.post("/v1/endpoints", json={"name": "inbox"})).json()
        ep = endpoint["id"]
        link = await inbox_link(api, ep)
        page = await (await browser.new_context()).new_page()
        await page.goto(link)
        await expect(page.locator("#status")).to_have_text(re.compile("^live"), timeout=10_000)
        sent = (
            await api.post(
                f"/v1/endpoints/{ep}/test-webhook", json={"provider": "payments", "event_type": "invoice.paid"}
            )
        ).json()
        assert sent["accepted"], sent
        row = page.locator(f'li.event[data-id="{sent["event_id"]}"]')
        await row.wait_for(timeout=10_000)
        assert await row.locator(".verdict").text_content() == VERIFIED
        await row.click()
        summary = page.locator("dl.summary")
        await summary.wait_for()
        assert await summary.locator("dt:has-text('signature') + dd").text_content() == VERIFIED
        async with httpx.AsyncClient(timeout=10) as sender:
            unsigned = (await sender.post(endpoint["ingest_url"], json={"plain": True})).json()["id"]
        other = page.locator(f'li.event[data-id="{unsigned}"]')
        await other.wait_for(timeout=10_000)
        assert await other.locator(".verdict").text_content() == NOT_CHECKED
