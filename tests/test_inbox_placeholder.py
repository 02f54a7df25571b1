"""GET /inbox/{endpoint_id}: where `inbox_url` leads. Its owner (the /api/start cookie, or a key or token of the
account) gets a safe HTML placeholder; nobody else learns the endpoint exists."""

from __future__ import annotations

import re

from tests.events_support import Ev, store
from tests.helpers import assert_error, create_endpoint, db

CSP = re.compile(r"^default-src 'none'; style-src 'sha256-[A-Za-z0-9+/]{43}='; ")


async def _start(client) -> dict:
    resp = await client.post("/api/start")
    assert resp.status_code == 200, resp.text
    return resp.json()


def _assert_page(resp, endpoint_id: str) -> str:
    assert resp.status_code == 200, resp.text
    assert resp.headers["content-type"].startswith("text/html")
    csp = resp.headers["content-security-policy"]
    assert CSP.match(csp), csp
    assert "unsafe-inline" not in csp
    assert "script-src" not in csp  # default-src 'none' covers scripts: none at all
    assert "frame-ancestors 'none'" in csp
    assert resp.headers["x-content-type-options"] == "nosniff"
    assert resp.headers["referrer-policy"] == "no-referrer"
    assert resp.headers["cache-control"] == "no-store"
    page = resp.text
    assert page.startswith("<!doctype html>")
    assert endpoint_id in page
    assert "<script" not in page
    assert not re.search(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//""", page)  # no external asset
    return page


async def test_the_browser_that_called_start_opens_its_inbox(client, settings):
    started = await _start(client)
    inbox = started["inbox_url"].removeprefix(settings.control_url)
    assert inbox == f"/inbox/{started['endpoint_id']}"
    page = _assert_page(await client.get(inbox), started["endpoint_id"])
    assert started["ingest_url"] in page
    assert "Temporary endpoint" in page


async def test_the_token_opens_it_without_the_cookie(client):
    started = await _start(client)
    client.cookies.clear()
    resp = await client.get(
        f"/inbox/{started['endpoint_id']}", headers={"Authorization": f"Bearer {started['api_token']}"}
    )
    _assert_page(resp, started["endpoint_id"])


async def test_an_api_key_of_the_account_opens_it(client, account):
    endpoint = await create_endpoint(client, account.headers)
    _assert_page(await client.get(f"/inbox/{endpoint['id']}", headers=account.headers), endpoint["id"])


async def test_no_credentials_is_401_and_someone_elses_endpoint_is_404(client, account, database_url):
    mine = await _start(client)
    inbox = f"/inbox/{mine['endpoint_id']}"
    client.cookies.clear()
    err = assert_error(await client.get(inbox), 401, "unauthorized")
    assert "/api/start" in err["message"]
    assert_error(await client.get(inbox, headers={"Authorization": "Bearer hy_tmp_" + "A" * 32}), 401, "unauthorized")
    assert_error(await client.get(inbox, headers={"cookie": "hy_session=" + "A" * 43}), 401, "unauthorized")

    theirs = await _start(client)  # another session, now in the cookie jar
    assert_error(await client.get(inbox), 404, "not_found")
    assert_error(await client.get(inbox, headers={"Authorization": f"Bearer {theirs['api_token']}"}), 404, "not_found")
    assert_error(await client.get(inbox, headers=account.headers), 404, "not_found")
    for unknown in ("ep_01J00000000000000000000000", "nonsense", "ep_%00"):
        assert_error(await client.get(f"/inbox/{unknown}"), 404, "not_found")


async def test_after_registering_the_cookie_no_longer_opens_it_but_the_key_does(client):
    started = await _start(client)
    inbox = f"/inbox/{started['endpoint_id']}"
    resp = await client.post("/api/register", json={"email": "a@example.com", "api_token": started["api_token"]})
    assert resp.status_code == 201
    assert_error(await client.get(inbox), 401, "unauthorized")
    page = _assert_page(
        await client.get(inbox, headers={"Authorization": f"Bearer {resp.json()['api_key']}"}), started["endpoint_id"]
    )
    assert "never (permanent)" in page


async def test_what_the_page_shows_is_escaped(client, database_url):
    started = await _start(client)
    async with db(database_url) as conn:
        await conn.execute(
            "UPDATE endpoints SET name = $2 WHERE id = $1", started["endpoint_id"], '<script>alert("x")</script>&'
        )
    page = _assert_page(await client.get(f"/inbox/{started['endpoint_id']}"), started["endpoint_id"])
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&amp;" in page


async def test_nothing_from_captured_events_is_rendered(client, database_url):
    started = await _start(client)
    async with db(database_url) as conn:
        await store(conn, None, None, [Ev(started["endpoint_id"], body=b"<b>captured-marker</b>")])
    page = _assert_page(await client.get(f"/inbox/{started['endpoint_id']}"), started["endpoint_id"])
    assert "captured-marker" not in page
