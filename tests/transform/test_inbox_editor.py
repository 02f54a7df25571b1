"""The inbox page's transform editor in headless Chromium (Debian's, driven by Playwright) against a real
control process: a dry run on the event shown, a syntax error with its line, hostile output shown as text,
and a replay through the transform to a real destination. No request leaves this machine."""

from __future__ import annotations

import re
from typing import Any

import msgspec
import pytest

from shared.settings import Settings
from tests.destination import serving
from tests.events_support import Ev, store
from tests.helpers import db
from tests.inbox_browser import ARTIFACTS, account_api, inbox_link, open_inbox
from tests.stack import Stack

pytestmark = pytest.mark.slow

BODY = b'{"type":"invoice.paid","data":{"object":{"id":"in_42","amount_due":2000}}}'
SLACK = """function handler(request, context) {
  console.log("reshaping", context.event.event_type);
  return { ...request, body: { text: `${request.body.type}: ${request.body.data.object.id}` } };
}"""
HOSTILE = "function handler(r) { r.body = { note: '<img src=x onerror=\"window.__pwned = 1\">' }; return r; }"


async def test_the_editor_runs_and_replays_a_transform_on_the_event_shown(
    browser: Any, stack: Stack, database_url: str, settings: Settings
) -> None:
    from playwright.async_api import expect

    async with account_api(stack, database_url) as api:
        ep = (await api.post("/v1/endpoints", json={"name": "billing"})).json()["id"]
        link = await inbox_link(api, ep)
    ev = Ev(endpoint_id=ep, body=BODY, provider="payments", event_type="invoice.paid")
    async with db(database_url) as conn:
        await store(conn, None, None, [ev])

    page, foreign = await open_inbox(browser, stack, link)
    await page.locator("li.event").first.click()
    source = page.get_by_label("transform source")
    try:
        await source.wait_for(timeout=10_000)
    except Exception as exc:  # once under the suite's load: the page as it stood says which step stalled
        shown = await page.locator("main").inner_text()
        raise AssertionError(f"no transform editor after 10 s; the page showed: {shown[:2000]!r}") from exc
    assert "function handler(request, context)" in await source.input_value()

    await source.fill(SLACK)
    await page.get_by_role("button", name="Run on this event").click()
    output = page.locator("#transform-output")
    await output.wait_for(timeout=10_000)
    shown = msgspec.json.decode((await output.text_content() or "").encode())
    assert shown["body"] == {"text": "invoice.paid: in_42"}
    assert "reshaping invoice.paid" in (await page.locator(".transform-logs").text_content() or "")
    await page.screenshot(path=str(ARTIFACTS / "transform.png"), full_page=True)

    await source.fill("function handler(request) {\n  return request +;\n}")
    await page.get_by_role("button", name="Run on this event").click()
    await expect(page.locator(".transform-error")).to_have_text(re.compile(r"line 2: SyntaxError"), timeout=10_000)

    await source.fill(HOSTILE)
    await page.get_by_role("button", name="Run on this event").click()
    await output.wait_for(timeout=10_000)
    assert "onerror" in (await output.text_content() or "")
    assert await page.locator("main img").count() == 0
    assert await page.evaluate("window.__pwned") is None

    with serving() as sink:
        await source.fill(SLACK)
        await page.get_by_label("where to send the transformed event").fill(sink.url)
        await page.get_by_role("button", name="Send through transform").click()
        await expect(page.locator("#transform-replayed")).to_have_text(
            re.compile("replayed · HTTP 200"), timeout=10_000
        )
        (received,) = await sink.wait_for(1)
    assert msgspec.json.decode(received.body) == {"text": "invoice.paid: in_42"}
    assert foreign == []
    assert page.errors == []
