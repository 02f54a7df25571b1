"""Over HTTP: the ``inbox_url`` that /api/start answers is a link a human opens anywhere,
for the endpoint's life; rotating the endpoint's inbox capability ends it and every page opened with it; a
browser that is refused reads how to get a link, a JSON client the envelope; ``hookyard open`` works with
the temporary token. The same in a real browser: test_inbox_url_browser.py."""

from __future__ import annotations

import json
import subprocess
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from control.service.accounts import issue_key
from control.service.inbox_links import LINK_COOKIE
from tests.conftest import make_account
from tests.helpers import assert_error, create_endpoint, db, parse_ts
from tests.mcp_client import posted_call
from tests.stack import Stack, hookyard_command

HTML = {"accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"}  # a browser's navigation


def _path(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.path}?{parts.query}" if parts.query else parts.path


async def _start(client: Any, **body: str) -> dict[str, Any]:
    resp = await client.post("/api/start", json=body)
    assert resp.status_code == 200, resp.text
    return resp.json()


async def _mcp(client: Any, token: str, tool: str, **arguments: Any) -> dict[str, Any]:
    """One tools/call in a single stateless POST (the official client over real processes: the CLI test)."""
    result = await posted_call(client, token, tool, **arguments)
    return (
        {"error": json.loads(result["content"][0]["text"])["error"]}
        if result.get("isError")
        else result["structuredContent"]
    )


async def _opened_by(client: Any, url: str) -> str:
    """Follows ``url`` as a browser without cookies would; answers the ``hy_inbox`` cookie it was given."""
    client.cookies.clear()
    opened = await client.get(_path(url), follow_redirects=False)
    assert opened.status_code == 303, opened.text
    assert opened.headers["location"] == urlsplit(url).path  # the token leaves the address bar
    return opened.cookies[LINK_COOKIE]


def _page_ok(resp: httpx.Response, endpoint_id: str) -> None:
    assert resp.status_code == 200, resp.text
    assert f'data-endpoint="{endpoint_id}"' in resp.text


async def test_inbox_url_opens_the_inbox_without_the_session_for_the_endpoints_life(client, settings):
    started = await _start(client)
    ep, inbox = started["endpoint_id"], f"/inbox/{started['endpoint_id']}"
    link = parse_qs(urlsplit(started["inbox_url"]).query)["link"][0]
    expires = parse_ts(started["expires_at"])
    assert link.split(".")[1] == str(int(expires.timestamp()))  # valid as long as the endpoint

    client.cookies.clear()  # the human's browser is not the one that called /api/start
    opened = await client.get(_path(started["inbox_url"]), follow_redirects=False)
    assert opened.status_code == 303, opened.text
    assert opened.headers["location"] == inbox
    max_age = int(opened.headers["set-cookie"].split("Max-Age=")[1].split(";")[0])
    assert timedelta(days=3) - timedelta(minutes=5) < timedelta(seconds=max_age) <= timedelta(days=3)
    cookie = {"cookie": f"{LINK_COOKIE}={opened.cookies[LINK_COOKIE]}"}
    client.cookies.clear()
    _page_ok(await client.get(inbox, headers=cookie), ep)
    assert (await client.get(f"{inbox}/events", headers=cookie)).json() == {"events": [], "next_cursor": None}
    # A second browser, and a chat app's preview before it: the link is not spent by use.
    await _opened_by(client, started["inbox_url"])
    await _opened_by(client, started["inbox_url"])


async def test_rotating_ends_every_link_and_page_and_answers_the_new_inbox_url(client, settings):
    started = await _start(client, ref="shop")
    token, ep = started["api_token"], started["endpoint_id"]
    inbox = f"/inbox/{ep}"
    session = dict(client.cookies)
    first_cookie = await _opened_by(client, started["inbox_url"])
    # The agent's own tool with its temporary token: a 15-minute link (on /v1 the token is refused).
    short = await _mcp(client, token, "create_inbox_link", endpoint_id=ep)
    assert timedelta(minutes=14) < parse_ts(short["expires_at"]) - datetime.now(UTC) <= timedelta(minutes=15)
    short_cookie = await _opened_by(client, short["url"])

    rotated = await _mcp(client, token, "rotate_inbox_links", endpoint_id=ep)
    assert rotated["url"].startswith(f"{settings.control_url}{inbox}?link=acct_")
    assert parse_ts(rotated["expires_at"]) == parse_ts(started["expires_at"]).replace(microsecond=0)
    client.cookies.clear()
    for old in (started["inbox_url"], short["url"]):
        err = assert_error(await client.get(_path(old), follow_redirects=False), 401, "unauthorized")
        assert "rotated" in err["message"]
        page = await client.get(_path(old), headers=HTML, follow_redirects=False)
        assert page.status_code == 401
        assert page.headers["content-type"].startswith("text/html")
        assert "How to get a link that works" in page.text
    for old_cookie in (first_cookie, short_cookie):
        assert_error(await client.get(inbox, headers={"cookie": f"{LINK_COOKIE}={old_cookie}"}), 401, "unauthorized")
        data = await client.get(f"{inbox}/events", headers={"cookie": f"{LINK_COOKIE}={old_cookie}"})
        assert_error(data, 401, "unauthorized")
    fresh = await _opened_by(client, rotated["url"])
    _page_ok(await client.get(inbox, headers={"cookie": f"{LINK_COOKIE}={fresh}"}), ep)
    # The session that made it is answered the new inbox_url, the same until the next rotation.
    client.cookies.update(session)
    again = await _start(client, ref="shop")
    assert (again["reused"], again["inbox_url"]) == (True, rotated["url"])
    # Another account's endpoint is not this token's to rotate; /v1 stays closed to temporary tokens.
    client.cookies.clear()
    theirs = await _start(client)  # another session: another anonymous account
    refused = await _mcp(client, token, "rotate_inbox_links", endpoint_id=theirs["endpoint_id"])
    assert refused["error"]["code"] == "not_found"
    rotate = f"/v1/endpoints/{ep}/inbox-link/rotate"
    assert_error(await client.post(rotate, headers={"Authorization": f"Bearer {token}"}), 403, "temporary_token")


async def test_rotating_over_v1_with_a_key(client, account, other_account, database_url):
    endpoint = await create_endpoint(client, account.headers)
    rotate = f"/v1/endpoints/{endpoint['id']}/inbox-link/rotate"
    before = (await client.post(f"/v1/endpoints/{endpoint['id']}/inbox-link", headers=account.headers)).json()
    cookie = await _opened_by(client, before["url"])
    resp = await client.post(rotate, headers=account.headers)
    assert resp.status_code == 200, resp.text
    after = resp.json()
    assert timedelta(minutes=14) < parse_ts(after["expires_at"]) - datetime.now(UTC) <= timedelta(minutes=15)
    client.cookies.clear()
    assert_error(await client.get(_path(before["url"]), follow_redirects=False), 401, "unauthorized")
    old_page = await client.get(f"/inbox/{endpoint['id']}", headers={"cookie": f"{LINK_COOKIE}={cookie}"})
    assert_error(old_page, 401, "unauthorized")
    await _opened_by(client, after["url"])
    assert_error(await client.post(rotate), 401, "unauthorized")
    assert_error(await client.post(rotate, headers=other_account.headers), 404, "not_found")
    async with db(database_url) as conn:
        reader = {"Authorization": f"Bearer {await issue_key(conn, account.id, read_only=True)}"}
    assert_error(await client.post(rotate, headers=reader), 403, "forbidden")


async def test_a_refused_browser_reads_how_to_get_a_link_and_a_json_client_the_envelope(client, account):
    started = await _start(client)
    ep = started["endpoint_id"]
    session = dict(client.cookies)
    client.cookies.clear()
    page = await client.get(f"/inbox/{ep}", headers=HTML)
    assert page.status_code == 401
    assert page.headers["content-type"].startswith("text/html")
    assert page.headers["content-security-policy"].startswith("default-src 'none'")
    assert page.headers["cache-control"] == "no-store"
    for told in ("How to get a link that works", "create_inbox_link", f"hookyard open {ep}", "/inbox-link"):
        assert told in page.text, told
    assert "<script" not in page.text
    for accept in (None, "*/*", "application/json", "application/json, text/html;q=0.5"):
        headers = {"accept": accept} if accept else {}
        assert_error(await client.get(f"/inbox/{ep}", headers=headers), 401, "unauthorized")
    # Someone else's or no endpoint: 404 as a page too; nothing of the request but an id's shape is echoed.
    theirs = await create_endpoint(client, account.headers)
    client.cookies.update(session)
    other = await client.get(f"/inbox/{theirs['id']}", headers=HTML)
    assert other.status_code == 404
    assert "How to get a link that works" in other.text
    odd = await client.get("/inbox/%3Cimg%20src%3Dx%3E", headers=HTML)
    assert odd.status_code == 404
    assert "<img" not in odd.text
    assert "hookyard open EP" in odd.text
    client.cookies.clear()
    garbage = await client.get(f"/inbox/{ep}?link=garbage", headers=HTML, follow_redirects=False)
    assert garbage.status_code == 401
    assert "How to get a link that works" in garbage.text
    # The page's data routes are read by its script, which wants the envelope.
    assert_error(await client.get(f"/inbox/{ep}/events", headers=HTML), 401, "unauthorized")


@pytest.mark.slow
async def test_hookyard_open_with_the_temporary_token(stack: Stack, database_url: str) -> None:
    """The agent that provisioned the endpoint holds only the hy_tmp_ token; `hookyard open` asks /mcp."""
    stack.start_control()
    started = httpx.post(f"{stack.control_url}/api/start", json={"ref": "shop"}, timeout=10).json()
    ep = started["endpoint_id"]
    environ = {k: v for k, v in stack.env.items() if k != "HOOKYARD_API_KEY"}
    environ["HOOKYARD_API_KEY"] = started["api_token"]
    for target in (ep, "shop"):
        done = subprocess.run(
            [*hookyard_command(), "open", target, "--no-browser"],
            env=environ,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        url = done.stdout.strip()
        assert url.startswith(f"{stack.control_url}/inbox/{ep}?link=acct_"), url
        opened = httpx.get(url, follow_redirects=False)
        assert opened.status_code == 303
        assert httpx.get(f"{stack.control_url}/inbox/{ep}", cookies=opened.cookies).status_code == 200
    other = await make_account(database_url)
    theirs = httpx.post(f"{stack.control_url}/v1/endpoints", json={"name": "x"}, headers=other.headers).json()["id"]
    refused = subprocess.run(
        [*hookyard_command(), "open", theirs, "--no-browser"], env=environ, capture_output=True, text=True, timeout=60
    )
    assert refused.returncode == 1
    # found first, as every client command finds its endpoint, so the line names the key that looked
    said = f"hookyard: MCP get_endpoint: not_found: endpoint '{theirs}' not found; the key used is HOOKYARD_API_KEY's, "
    assert refused.stderr.startswith(said + "a hy_tmp_ token"), refused.stderr
