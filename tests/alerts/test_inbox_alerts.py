"""The inbox page shows its endpoint's open alerts: the data route (``GET /inbox/{id}/alerts``: type, since
when, what for) and the banner in headless Chromium (Debian's, driven by Playwright) against a real control
process, with a destination whose name is markup shown as text. No request leaves this machine."""

from __future__ import annotations

import re
from typing import Any

import pytest

from control.db.context import Context
from control.workers.alerts.evaluator import evaluate
from tests.conftest import Account
from tests.helpers import assert_error, create_endpoint
from tests.inbox_browser import ARTIFACTS, account_api, inbox_link, open_inbox
from tests.stack import Stack

HOSTILE = '<img src=x onerror="window.__pwned = 1">'


async def _failing(ctx: Context, api: Any, headers: dict[str, str], endpoint_id: str) -> str:
    """A destination named ``HOSTILE`` whose circuit is open, and the endpoint silent: two open alerts."""
    resp = await api.post(
        f"/v1/endpoints/{endpoint_id}/destinations",
        json={"url": "http://127.0.0.1:9/down", "name": HOSTILE},
        headers=headers,
    )
    assert resp.status_code == 201, resp.text
    dst = resp.json()["id"]
    async with ctx.pool.acquire() as conn:
        await conn.execute(
            "UPDATE destinations SET circuit = 'open', circuit_opened_at = now(), consecutive_failures = 7"
            " WHERE id = $1",
            dst,
        )
        await conn.execute(
            "UPDATE endpoints SET expect_event_within_s = 60, created_at = now() - interval '2 minutes' WHERE id = $1",
            endpoint_id,
        )
    assert len((await evaluate(ctx)).fired) == 2
    return dst


async def test_the_inbox_data_route_lists_the_endpoints_open_alerts(
    client, ctx: Context, account: Account, other_account: Account
) -> None:
    ep = (await create_endpoint(client, account.headers, name="orders"))["id"]
    quiet = (await create_endpoint(client, account.headers, name="quiet"))["id"]
    dst = await _failing(ctx, client, account.headers, ep)

    resp = await client.get(f"/inbox/{ep}/alerts", headers=account.headers)
    assert resp.status_code == 200, resp.text
    assert resp.headers["cache-control"] == "no-store"
    alerts = {a["type"]: a for a in resp.json()["alerts"]}
    assert set(alerts) == {"destination.circuit_opened", "endpoint.silent"}
    circuit = alerts["destination.circuit_opened"]
    assert (circuit["destination_id"], circuit["destination_name"], circuit["count"]) == (dst, HOSTILE, 7)
    assert circuit["since"]
    assert "circuit is open after 7 consecutive failed deliveries" in circuit["text"]
    assert HOSTILE in circuit["text"]  # data, as given: the page shows it as text
    assert "received nothing for 60 s" in alerts["endpoint.silent"]["text"]

    assert (await client.get(f"/inbox/{quiet}/alerts", headers=account.headers)).json() == {"alerts": []}
    assert_error(await client.get(f"/inbox/{ep}/alerts", headers=other_account.headers), 404, "not_found")
    assert_error(await client.get(f"/inbox/{ep}/alerts"), 401, "unauthorized")

    async with ctx.pool.acquire() as conn:  # recovered: no longer listed
        await conn.execute("UPDATE destinations SET circuit = 'closed', circuit_opened_at = NULL WHERE id = $1", dst)
    await evaluate(ctx)
    left = (await client.get(f"/inbox/{ep}/alerts", headers=account.headers)).json()["alerts"]
    assert [a["type"] for a in left] == ["endpoint.silent"]


@pytest.mark.slow
async def test_the_inbox_page_shows_open_alerts_as_text(
    browser: Any,
    stack: Stack,
    ctx: Context,
    database_url: str,
) -> None:
    from playwright.async_api import expect

    async with account_api(stack, database_url) as api:
        ep = (await api.post("/v1/endpoints", json={"name": "billing"})).json()["id"]
        await _failing(ctx, api, {}, ep)
        link = await inbox_link(api, ep)

    page, foreign = await open_inbox(browser, stack, link)
    banner = page.locator("#alerts")
    await expect(banner.locator("li.alert")).to_have_count(2, timeout=10_000)
    await expect(banner.locator("h2")).to_have_text("2 open alerts")
    circuit = banner.locator("li.alert", has_text="destination.circuit_opened")
    await expect(circuit.locator(".alert-destination")).to_have_text(HOSTILE)
    await expect(circuit.locator(".alert-count")).to_have_text("7")
    await expect(circuit.locator("time")).to_have_attribute("datetime", re.compile(r"^\d{4}-\d\d-\d\dT"))
    await expect(circuit.locator(".alert-text")).to_contain_text("circuit is open after 7 consecutive")
    await expect(banner.locator("li.alert", has_text="endpoint.silent")).to_contain_text("no events arriving")
    await page.screenshot(path=str(ARTIFACTS / "alerts.png"))
    assert await page.locator("img").count() == 0
    assert await page.evaluate("window.__pwned") is None
    assert foreign == []
    assert page.errors == []
