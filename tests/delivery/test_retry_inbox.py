"""The inbox page marks a failed attempt whose retry is scheduled with the time it is due ("retry at
HH:MM:SS", the browser's local time), and one the schedule gave up on: the page listed every failure alike,
and a failure about to be tried again read as the delivery's end. Headless Chromium against a real control
process; the attempts and their tasks stored as the deliver worker leaves them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.events_support import Ev, store, store_delivery, store_task
from tests.helpers import db
from tests.inbox_browser import account_api, inbox_link, open_inbox
from tests.stack import Stack

pytestmark = pytest.mark.slow


async def _attempt(conn: Any, endpoint_id: str, *, status: str, attempts: int, due: datetime) -> None:
    """An event with one failed attempt (the task's last, ``attempts``) whose task is ``status``, due ``due``."""
    ev = Ev(endpoint_id)
    await store(conn, None, None, [ev])
    task = await store_task(
        conn,
        endpoint_id=endpoint_id,
        event_id=ev.id,
        received_at=ev.received_at,
        rule_id="rule_1",
        destination_id="dst_1",
        status=status,
    )
    await conn.execute(
        "UPDATE delivery_tasks SET attempts = $2, next_attempt_at = $3 WHERE id = $1", task, attempts, due
    )
    await store_delivery(
        conn,
        endpoint_id,
        ev.id,
        created_at=datetime.now(UTC),
        success=False,
        attempt_number=attempts,
        task_id=task,
        error="HTTP 500",
    )


async def test_the_inbox_marks_a_scheduled_retry_and_one_given_up(
    browser: Any, stack: Stack, database_url: str
) -> None:
    from playwright.async_api import expect

    due = datetime.now(UTC).replace(microsecond=0) + timedelta(minutes=5)
    async with account_api(stack, database_url) as api:
        endpoint = (await api.post("/v1/endpoints", json={"name": "billing"})).json()["id"]
        async with db(database_url) as conn:
            await _attempt(conn, endpoint, status="failed", attempts=10, due=due)
            await _attempt(conn, endpoint, status="pending", attempts=1, due=due)  # the newest: listed first
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
