"""In a real browser: an agent provisions an endpoint with ``POST /api/start`` (no browser
involved) and hands ``inbox_url`` to its human, who opens it in a browser that never saw hookyard. The inbox
shows, live, and the token is gone from the address bar; a second person's browser opens it too. The agent
rotates the endpoint's inbox links with the official MCP client: the open page is refused on reload, the
old link shows a page that says how to get a new one (a JSON client still gets the envelope), the new
link works. Screenshots land in test-artifacts/onboarding/."""

from __future__ import annotations

import json
import re
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.onboarding.conftest import ARTIFACTS, person
from tests.stack import Stack

pytestmark = pytest.mark.slow


async def _tool(stack: Stack, token: str, name: str, **arguments: Any) -> dict[str, Any]:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=httpx2.Timeout(30))
    async with http, Client(streamable_http_client(f"{stack.control_url}/mcp", http_client=http)) as client:
        result = await client.call_tool(name, arguments)
    assert not result.is_error, result.content
    return dict(result.structured_content or {})


async def test_the_agents_inbox_url_opens_in_any_browser_until_rotated(browser: Any, stack: Stack) -> None:
    from playwright.async_api import expect

    stack.start_edge()
    stack.start_control()
    stack.start_worker()
    started = httpx.post(f"{stack.control_url}/api/start", json={"provider_hint": "payments"}, timeout=10).json()
    ep, inbox_url = started["endpoint_id"], started["inbox_url"]
    clean = f"{stack.control_url}/inbox/{ep}"

    first = await person(browser, stack)
    opened = await first.page.goto(inbox_url)
    assert opened is not None
    assert opened.status == 200
    assert first.page.url == clean  # the token left the address bar
    assert "link=" not in await first.page.evaluate("location.href + document.referrer")
    await expect(first.page.locator("#status")).to_have_text(re.compile("^live"), timeout=10_000)
    assert await first.page.locator("h1").text_content() == "Inbox Temporary payments endpoint"
    await first.page.screenshot(path=str(ARTIFACTS / "inbox-url-opened.png"), full_page=True)
    # Live in the first person's page: an event sent now is listed.
    assert httpx.post(started["ingest_url"], json={"hello": 1}, timeout=10).status_code == 200
    await first.page.locator("li.event").first.wait_for(timeout=10_000)

    second = await person(browser, stack)
    again = await second.page.goto(inbox_url)
    assert again is not None
    assert again.status == 200
    assert second.page.url == clean
    await expect(second.page.locator("li.event")).to_have_count(1, timeout=10_000)
    assert first.errors == second.errors == []

    rotated = await _tool(stack, started["api_token"], "rotate_inbox_links", endpoint_id=ep)
    assert rotated["url"] != inbox_url

    # The page already open is refused from its next request on; a reload shows how to get a link.
    reloaded = await first.page.reload()
    assert reloaded is not None
    assert reloaded.status == 401
    await expect(first.page.locator("h1")).to_have_text("This inbox did not open")
    # A third browser with the old link: the same page, not JSON.
    third = await person(browser, stack)
    refused = await third.page.goto(inbox_url)
    assert refused is not None
    assert refused.status in (401, 403)
    assert refused.headers["content-type"].startswith("text/html")
    assert await third.page.locator("h2").first.text_content() == "How to get a link that works"
    assert "rotated" in (await third.page.locator("#reason").text_content() or "")
    assert "create_inbox_link" in (await third.page.locator("main").text_content() or "")
    await third.page.screenshot(path=str(ARTIFACTS / "inbox-url-rotated.png"), full_page=True)
    as_json = httpx.get(inbox_url, headers={"accept": "application/json"}, follow_redirects=False, timeout=10)
    assert as_json.status_code == 401
    assert json.loads(as_json.text)["error"]["code"] == "unauthorized"

    # The new link opens it, in the browser that was refused.
    renewed = await third.page.goto(rotated["url"])
    assert renewed is not None
    assert renewed.status == 200
    assert third.page.url == clean
    await expect(third.page.locator("li.event")).to_have_count(1, timeout=10_000)
    assert [who.foreign for who in (first, second, third)] == [[], [], []]
    for who in (first, second, third):
        await who.context.close()
