"""Issue 45, the inbox page in a real browser (headless Chromium, real edge, control and worker processes):

- the pretty body view is the body's own text, indented and coloured: ``48.0`` stays ``48.0``, an integer past
  2^53 keeps its digits, an escape stays as sent (it was ``JSON.parse`` and ``JSON.stringify``: ``48``);
- the page opens on the newest event, not on an empty detail;
- the list shows where each request came from (its source address);
- search finds the path, the query and header values (``q=shop`` for ``/orders?source=shop``);
- the replay box starts with where ``hookyard listen`` forwards (a recorded forward), then with the URL last
  used, and re-signs in the event's own provider header by default (Stripe's library verifies it);
- ``/favicon.ico`` is an icon, not a 404 in the console.
"""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest
import stripe

from tests.conftest import make_account
from tests.destination import serving
from tests.onboarding.clirun import until
from tests.onboarding.conftest import ARTIFACTS, person
from tests.stack import Stack

pytestmark = pytest.mark.slow

SENT = (
    '{"total": 48.0, "big": 12345678901234567890123, "name": "J\\u00fcrgen", "nested": {"a": [1, 2.50, true, null]},'
    ' "empty": {}, "list": []}'
)
PRETTY = """{
  "total": 48.0,
  "big": 12345678901234567890123,
  "name": "J\\u00fcrgen",
  "nested": {
    "a": [
      1,
      2.50,
      true,
      null
    ]
  },
  "empty": {},
  "list": []
}"""
SECRET = "whsec_the_local_apps_own_secret_0123"


def _stored(api: httpx.Client, endpoint_id: str, count: int) -> list[dict[str, Any]]:
    def listed() -> list[dict[str, Any]] | None:
        events = api.get(f"/v1/endpoints/{endpoint_id}/events").json()["events"]
        return events if len(events) >= count else None

    return until(listed, 20, f"{count} events stored")


async def test_the_inbox_shows_a_body_exactly_as_sent_and_replays_where_listen_forwards(
    browser: Any, stack: Stack, database_url: str
) -> None:
    from playwright.async_api import expect

    stack.start_edge()
    stack.start_control()
    stack.start_worker()
    account = await make_account(database_url)
    api = httpx.Client(base_url=stack.control_url, headers=account.headers, timeout=10)
    with api, serving() as app:
        endpoint = api.post("/v1/endpoints", json={"name": "shop"}).json()
        ep = endpoint["id"]
        sample = api.post(
            f"/v1/endpoints/{ep}/test-webhook",
            json={"provider": "payments", "event_type": "invoice.paid", "headers": "provider"},
        ).json()
        assert sample["stored"], sample
        orders = httpx.post(
            f"{endpoint['ingest_url']}/orders?source=shop",
            content=SENT.encode(),
            headers={"content-type": "application/json", "x-shop-domain": "acme-store.example"},
        )
        assert orders.status_code == 200, orders.text
        newest, older = _stored(api, ep, 2)
        assert (newest["id"], older["id"]) == (orders.json()["id"], sample["event_id"])
        # as hookyard listen records a forward it made: the endpoint's replay target from now on
        forward = {"url": app.url, "status": 200, "latency_ms": 3}
        assert api.post(f"/v1/events/{older['id']}/forwards", json=forward).status_code == 201
        link = api.post(f"/v1/endpoints/{ep}/inbox-link").json()["url"]

        who = await person(browser, stack)
        page = who.page
        await page.goto(link)
        await expect(page.locator("#status")).to_have_text(re.compile("^live"), timeout=10_000)
        # opened on the newest event
        await expect(page.locator("li.event.selected")).to_have_attribute("data-id", newest["id"], timeout=5_000)
        await expect(page.locator("#detail h2")).to_have_text("POST /orders")
        # the body as sent: the pretty view is its own text, indented, each token coloured by kind
        view = page.locator("#body-view")
        await expect(view).to_have_text(PRETTY)
        number = view.locator("span.json-number", has_text="48.0")
        assert await number.evaluate("el => getComputedStyle(el).color") == "rgb(31, 79, 184)"
        assert await view.locator("span.json-key").first.text_content() == '"total"'
        assert await view.locator("span.json-string").first.text_content() == '"J\\u00fcrgen"'
        await page.screenshot(path=str(ARTIFACTS / "inbox-as-sent.png"), full_page=True)
        await page.get_by_role("tab", name="raw").click()
        await expect(view).to_have_text(SENT)

        # where each came from
        sources = await page.locator("li.event .source").all_text_contents()
        assert sources == ["127.0.0.1", "127.0.0.1"], sources

        # search: the path, the query, a header value
        search = page.get_by_label("search", exact=True)
        for q in ("shop", "/orders", "acme-store"):
            await search.fill(q)
            await expect(page.locator("li.event")).to_have_count(1, timeout=5_000)
            assert await page.locator("li.event").first.get_attribute("data-id") == newest["id"]
        await search.fill("")
        await expect(page.locator("li.event")).to_have_count(2, timeout=5_000)

        # the replay box starts with where listen forwards; re-signed, the event's own header is the default
        await page.locator(f'li.event[data-id="{older["id"]}"]').click()
        await expect(page.locator("#detail h2")).to_have_text("POST /")
        url = page.get_by_label("replay URL")
        await expect(url).to_have_value(app.url, timeout=5_000)
        header = page.get_by_label("signature header")
        assert (await header.input_value(), await header.get_attribute("placeholder")) == ("", "stripe-signature")
        await page.locator("input[name=resign]").check()
        await page.get_by_label("signing secret").fill(SECRET)
        await page.get_by_role("button", name="Replay").click()
        await page.locator("#replay-outcome.ok").wait_for(timeout=10_000)
        (got,) = await app.wait_for(1)
        stripe.Webhook.construct_event(got.body, got.headers["stripe-signature"], SECRET)
        assert "x-signature" not in got.headers

        # the URL last used, on the next event shown
        await page.locator(f'li.event[data-id="{newest["id"]}"]').click()
        await expect(page.get_by_label("replay URL")).to_have_value(app.url)
        await page.get_by_role("button", name="Replay").click()
        await page.locator("#replay-outcome.ok").wait_for(timeout=10_000)
        assert (await app.wait_for(2))[1].body == SENT.encode()

        icon = httpx.get(f"{stack.control_url}/favicon.ico", timeout=10)
        assert (icon.status_code, icon.headers["content-type"]) == (200, "image/x-icon")
        assert icon.content.startswith(b"\x00\x00\x01\x00")  # an ICO
        assert await page.locator('link[rel="icon"]').get_attribute("href") == "/favicon.ico"
        assert who.errors == [], who.errors
        assert who.foreign == []
        await who.context.close()
