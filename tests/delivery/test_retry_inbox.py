"""The inbox page marks a failed attempt whose retry is scheduled with the time it is due ("retry at
HH:MM:SS", the browser's local time), and one the schedule gave up on: the page listed every failure alike,
and a failure about to be tried again read as the delivery's end. Headless Chromium against a real control
process; the attempts and their tasks stored as the deliver worker leaves them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.events_support import Ev, store_failed_attempt
from tests.helpers import db
from tests.inbox_browser import account_api, inbox_link, open_inbox
from tests.stack import Stack

pytestmark = pytest.mark.slow


async def test_the_inbox_marks_a_scheduled_retry_and_one_given_up(
    browser: Any, stack: Stack, database_url: str
) -> None:
    from playwright.async_api import expect

    due = datetime.now(UTC).replace(microsecond=0) + timedelta(minutes=5)
    async with account_api(stack, database_url) as api:
        endpoint = (await api.post("/v1/endpoints", json={"name": "billing"})).json()["id"]
        async with db(database_url) as conn:
            await store_failed_attempt(conn, Ev(endpoint), status="failed", attempts=10, due=due)
            # the newest, listed first
            await store_failed_attempt(conn, Ev(endpoint), status="pending", attempts=1, due=due)
        page, foreign = await open_inbox(browser, stack, await inbox_link(api, endpoint))
    local = await page.evaluate(
        "(iso) => new Date(iso).toLocaleTimeString(undefined, { hour12: false })", due.isoformat()
    )
    await page.locator("li.event").first.click()
    await expect(page.locator(".deliveries .retry.scheduled")).to_have_text(f"retry at {local}")
    await expect(page.locator(".deliveries td", has_text="retry at")).to_have_text(f"HTTP 500 retry at {local}")
    await page.locator("li.event").nth(1).click()
    await expect(page.locator(".deliveries .retry.gave_up")).to_have_text("gave up")
    await expect(page.locator(".deliveries .retry.scheduled")).to_have_count(0)
    assert foreign == []
    assert page.errors == []
