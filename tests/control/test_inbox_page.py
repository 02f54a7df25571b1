"""GET /inbox/{endpoint_id} and its data routes over HTTP: who may open it (the /api/start cookie, a key or
token of the account, a signed inbox link's cookie), what the shell and its headers say, and what the data
routes answer. What the page does in a browser is tests/e2e/test_inbox_browser.py."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

from control.db.context import Principal
from control.service.accounts import issue_key
from control.service.inbox_links import LINK_COOKIE, _key, _sign
from tests.destination import serving
from tests.events_support import Ev, store
from tests.helpers import assert_error, create_endpoint, db
from tests.mcp_client import posted_call

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)


async def _start(client) -> dict:
    resp = await client.post("/api/start")
    assert resp.status_code == 200, resp.text
    return resp.json()


def _assert_page(resp, endpoint_id: str) -> str:
    assert resp.status_code == 200, resp.text
    assert resp.headers["content-type"].startswith("text/html")
    assert resp.headers["content-security-policy"] == CSP
    assert resp.headers["x-content-type-options"] == "nosniff"
    assert resp.headers["referrer-policy"] == "no-referrer"
    assert resp.headers["cache-control"] == "no-store"
    page = resp.text
    assert page.startswith("<!doctype html>")
    assert f'data-endpoint="{endpoint_id}"' in page
    names = ("curl", "hexdump", "pretty", "resign", "inbox", "transform", "alerts", "destinations")
    scripts = [f'<script src="/static/{name}.js" defer>' for name in names]
    assert re.findall(r"<script[^>]*>", page) == scripts  # no inline script
    assert not re.search(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//""", page)  # no external asset
    return page


async def _link(client, headers: dict[str, str], endpoint_id: str) -> str:
    resp = await client.post(f"/v1/endpoints/{endpoint_id}/inbox-link", headers=headers)
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert set(body) == {"url", "expires_at"}
    expires = datetime.fromisoformat(body["expires_at"])
    assert timedelta(minutes=14) < expires - datetime.now(UTC) <= timedelta(minutes=15)
    return body["url"]


async def _open(client, url: str, settings) -> Any:
    return await client.get(url.removeprefix(settings.control_url), follow_redirects=False)


async def test_the_browser_that_called_start_opens_its_inbox(client, settings):
    started = await _start(client)
    inbox = f"/inbox/{started['endpoint_id']}"
    assert started["inbox_url"].startswith(f"{settings.control_url}{inbox}?link=acct_")  # tests/onboarding
    page = _assert_page(await client.get(inbox), started["endpoint_id"])
    assert started["ingest_url"] in page
    assert page.count("Temporary endpoint") == 1, "the name once, not again as the id's label"
    assert "<dt>Endpoint id</dt>" in page
    assert "UTC (temporary)</dd>" in page
    assert (await client.get(f"{inbox}/events")).json() == {"events": [], "next_cursor": None}


async def test_the_token_or_an_api_key_opens_it_without_the_cookie(client, account):
    started = await _start(client)
    client.cookies.clear()
    auth = {"Authorization": f"Bearer {started['api_token']}"}
    _assert_page(await client.get(f"/inbox/{started['endpoint_id']}", headers=auth), started["endpoint_id"])
    endpoint = await create_endpoint(client, account.headers)
    _assert_page(await client.get(f"/inbox/{endpoint['id']}", headers=account.headers), endpoint["id"])


async def test_no_credentials_is_401_and_someone_elses_endpoint_is_404(client, account):
    mine = await _start(client)
    inbox = f"/inbox/{mine['endpoint_id']}"
    client.cookies.clear()
    for path in (inbox, f"{inbox}/events", f"{inbox}/stream"):
        err = assert_error(await client.get(path), 401, "unauthorized")
        assert "/api/start" in err["message"]
        assert "inbox-link" in err["message"]
    assert_error(await client.get(inbox, headers={"Authorization": "Bearer hy_tmp_" + "A" * 32}), 401, "unauthorized")
    assert_error(await client.get(inbox, headers={"cookie": "hy_session=" + "A" * 43}), 401, "unauthorized")
    assert_error(await client.get(inbox, headers={"cookie": f"{LINK_COOKIE}=garbage"}), 401, "unauthorized")

    theirs = await _start(client)  # another session, now in the cookie jar
    assert_error(await client.get(inbox), 404, "not_found")
    assert_error(await client.get(f"{inbox}/events"), 404, "not_found")
    assert_error(await client.get(inbox, headers={"Authorization": f"Bearer {theirs['api_token']}"}), 404, "not_found")
    assert_error(await client.get(inbox, headers=account.headers), 404, "not_found")
    for unknown in ("ep_01J00000000000000000000000", "nonsense", "ep_%00"):
        assert_error(await client.get(f"/inbox/{unknown}"), 404, "not_found")


async def test_after_registering_the_cookie_no_longer_opens_it_but_the_key_and_a_link_do(client, settings):
    started = await _start(client)
    inbox = f"/inbox/{started['endpoint_id']}"
    resp = await client.post("/api/register", json={"email": "a@example.com", "api_token": started["api_token"]})
    assert resp.status_code == 201
    key = {"Authorization": f"Bearer {resp.json()['api_key']}"}
    assert_error(await client.get(inbox), 401, "unauthorized")
    assert "never (permanent)" in _assert_page(await client.get(inbox, headers=key), started["endpoint_id"])
    opened = await _open(client, await _link(client, key, started["endpoint_id"]), settings)
    assert opened.status_code == 303
    _assert_page(await client.get(inbox), started["endpoint_id"])


async def test_a_signed_link_is_traded_for_a_cookie_of_that_page_and_leaves_the_url(client, account, settings):
    endpoint = await create_endpoint(client, account.headers)
    other = await create_endpoint(client, account.headers, name="other")
    url = await _link(client, account.headers, endpoint["id"])
    assert url.startswith(f"{settings.control_url}/inbox/{endpoint['id']}?link=acct_")
    opened = await _open(client, url, settings)
    assert opened.status_code == 303
    assert opened.headers["location"] == f"/inbox/{endpoint['id']}"
    assert opened.headers["cache-control"] == "no-store"
    assert opened.headers["referrer-policy"] == "no-referrer"
    cookie = opened.headers["set-cookie"]
    assert cookie.startswith(f"{LINK_COOKIE}=acct_")
    assert f"Path=/inbox/{endpoint['id']}" in cookie
    for attribute in ("HttpOnly", "SameSite=lax", "Max-Age=43200"):
        assert attribute in cookie, cookie
    value = opened.cookies[LINK_COOKIE]
    client.cookies.clear()
    as_link = {"cookie": f"{LINK_COOKIE}={value}"}
    _assert_page(await client.get(f"/inbox/{endpoint['id']}", headers=as_link), endpoint["id"])
    assert (await client.get(f"/inbox/{endpoint['id']}/events", headers=as_link)).status_code == 200
    # The cookie is this endpoint's only, although its principal is the whole account; and it is no API key.
    assert_error(await client.get(f"/inbox/{other['id']}", headers=as_link), 401, "unauthorized")
    assert_error(await client.get("/v1/endpoints", headers={"Authorization": f"Bearer {value}"}), 401, "unauthorized")
    # The link's own token is not a cookie, nor the cookie a link.
    token = url.split("?link=", 1)[1]
    assert_error(
        await client.get(f"/inbox/{endpoint['id']}", headers={"cookie": f"{LINK_COOKIE}={token}"}), 401, "unauthorized"
    )
    assert_error(await client.get(f"/inbox/{endpoint['id']}?link={value}"), 401, "unauthorized")


async def test_forged_expired_and_orphaned_links_are_refused_with_the_envelope(client, account, ctx, settings):
    endpoint = await create_endpoint(client, account.headers)
    url = await _link(client, account.headers, endpoint["id"])
    base, token = url.removeprefix(settings.control_url).split("?link=")
    forged = token[:-1] + ("A" if token[-1] != "A" else "B")
    other_account = token.replace(account.id, "acct_" + "0" * 26)
    for bad in (forged, other_account, "garbage", token + "x", token.replace(".w.", ".r.")):
        err = assert_error(await client.get(f"{base}?link={bad}", follow_redirects=False), 401, "unauthorized")
        assert "expired" in err["message"]
    key = await _key(ctx)
    principal = Principal(account_id=account.id, key_id="", kind="live")
    expired = _sign(key, "link", endpoint["id"], principal, datetime.now(UTC) - timedelta(seconds=1))
    assert_error(await client.get(f"{base}?link={expired}", follow_redirects=False), 401, "unauthorized")
    assert_error(await client.get(f"{base}?link={'a' * 201}"), 400, "validation_error")
    # Another endpoint's link does not open this one.
    second = await create_endpoint(client, account.headers, name="second")
    theirs = (await _link(client, account.headers, second["id"])).split("?link=")[1]
    assert_error(await client.get(f"{base}?link={theirs}", follow_redirects=False), 401, "unauthorized")
    # Deleting the endpoint ends its links.
    assert (await client.delete(f"/v1/endpoints/{endpoint['id']}", headers=account.headers)).status_code == 200
    assert_error(await client.get(f"{base}?link={token}", follow_redirects=False), 404, "not_found")


async def test_the_link_route_like_every_v1_route(client, account, other_account):
    endpoint = await create_endpoint(client, account.headers)
    path = f"/v1/endpoints/{endpoint['id']}/inbox-link"
    assert_error(await client.post(path), 401, "unauthorized")
    assert_error(await client.post(path, headers=other_account.headers), 404, "not_found")
    assert_error(await client.post("/v1/endpoints/nonsense/inbox-link", headers=account.headers), 404, "not_found")
    started = await _start(client)
    token = {"Authorization": f"Bearer {started['api_token']}"}
    path = f"/v1/endpoints/{started['endpoint_id']}/inbox-link"
    assert_error(await client.post(path, headers=token), 403, "temporary_token")


async def test_a_read_only_key_makes_a_link_that_reads_but_cannot_replay(client, account, database_url, settings):
    endpoint = await create_endpoint(client, account.headers)
    async with db(database_url) as conn:
        reader = {"Authorization": f"Bearer {await issue_key(conn, account.id, read_only=True)}"}
        await store(conn, None, None, [event := Ev(endpoint["id"])])
    opened = await _open(client, await _link(client, reader, endpoint["id"]), settings)
    assert opened.status_code == 303
    inbox = f"/inbox/{endpoint['id']}"
    assert (await client.get(f"{inbox}/events/{event.id}")).status_code == 200
    resp = await client.post(f"{inbox}/events/{event.id}/replay", json={"url": "http://127.0.0.1:9/"})
    assert assert_error(resp, 403, "forbidden")["message"] == "this API key is read-only"


async def test_the_data_routes_are_the_v1_operations_of_this_endpoint_only(client, database_url, settings):
    started = await _start(client)
    ep = started["endpoint_id"]
    inbox = f"/inbox/{ep}"
    hostile = b'{"note": "<script>alert(1)</script>"}'
    async with db(database_url) as conn:
        await store(
            conn,
            None,
            None,
            [
                first := Ev(ep, provider="payments", event_type="charge.succeeded", signature_valid=True),
                second := Ev(ep, body=hostile, signature_valid=False, signature_failure_reason="missing_header"),
                binary := Ev(ep, body=b"\xff\x00\xfe", content_type="application/octet-stream"),
            ],
        )
    listed = (await client.get(f"{inbox}/events")).json()
    assert [e["id"] for e in listed["events"]] == [binary.id, second.id, first.id]
    row = listed["events"][1]
    assert "body" not in row
    assert "headers" not in row
    assert (row["size"], row["signature_failure_reason"]) == (len(hostile), "missing_header")
    assert listed["events"][0]["size"] == 3
    filtered = (await client.get(f"{inbox}/events", params={"provider": "payments", "signature_valid": "true"})).json()
    assert [e["id"] for e in filtered["events"]] == [first.id]
    assert [e["id"] for e in (await client.get(f"{inbox}/events", params={"q": "<script>"})).json()["events"]] == [
        second.id
    ]
    assert_error(await client.get(f"{inbox}/events", params={"provider": "nope"}), 400, "validation_error")
    assert_error(await client.get(f"{inbox}/events", params={"q": "a\x00b"}), 400, "validation_error")
    for bad in ({"limit": "0"}, {"limit": "101"}, {"cursor": "garbage"}, {"signature_valid": "maybe"}):
        assert_error(await client.get(f"{inbox}/events", params=bad), 400, "validation_error")
    assert_error(await client.get(f"{inbox}/events", params={"type": "x" * 201}), 400, "validation_error")
    assert_error(await client.get(f"{inbox}/events/nonsense"), 404, "not_found")
    paged = (await client.get(f"{inbox}/events", params={"limit": 2})).json()
    assert paged["next_cursor"]
    rest = (await client.get(f"{inbox}/events", params={"cursor": paged["next_cursor"]})).json()
    assert [e["id"] for e in rest["events"]] == [first.id]

    detail = (await client.get(f"{inbox}/events/{second.id}")).json()
    assert (detail["body"], detail["deliveries"]) == (hostile.decode(), [])
    body = await client.get(f"{inbox}/events/{binary.id}/body")
    assert body.content == b"\xff\x00\xfe"
    assert body.headers["content-type"] == "application/octet-stream"
    assert body.headers["content-disposition"] == f'attachment; filename="{binary.id}.bin"'
    assert body.headers["content-security-policy"] == "default-src 'none'; sandbox"
    json_body = await client.get(f"{inbox}/events/{second.id}/body")
    assert json_body.content == hostile
    assert json_body.headers["content-disposition"].endswith('.json"')

    assert_error(await client.get(f"{inbox}/events/evt_01J00000000000000000000000"), 404, "not_found")


async def test_replay_from_the_page_reaches_the_url_and_is_recorded(client, database_url, settings):
    started = await _start(client)
    ep = started["endpoint_id"]
    inbox = f"/inbox/{ep}"
    async with db(database_url) as conn:
        await store(conn, None, None, [event := Ev(ep, headers={"content-type": "application/json", "x-a": "1"})])
    with serving() as sink:
        replay = f"{inbox}/events/{event.id}/replay"
        resp = await client.post(replay, json={"url": sink.url})
        assert resp.status_code == 200, resp.text
        outcome = resp.json()
        assert (outcome["success"], outcome["status"]) == (True, 200)
        received = (await sink.wait_for(1))[-1]
        assert received.body == event.body
        assert received.headers["x-a"] == "1"
        resigned = await client.post(replay, json={"url": sink.url, "resign_with": "s" * 24})
        assert resigned.json()["success"] is True
        assert (await sink.wait_for(2))[-1].headers["x-signature"].startswith("v1,")  # Standard Webhooks
    deliveries = (await client.get(f"{inbox}/events/{event.id}")).json()["deliveries"]
    assert [(d["source"], d["success"]) for d in deliveries] == [("replay", True), ("replay", True)]
    assert_error(await client.post(replay, json={"url": "not a url"}), 400, "validation_error")
    assert_error(await client.post(replay, json={"url": sink.url, "resign_with": "short"}), 400, "validation_error")
    assert_error(await client.post(replay, json={"url": sink.url, "nope": 1}), 400, "validation_error")
    foreign = await client.post(replay, json={"url": sink.url}, headers={"origin": "https://evil.example"})
    assert_error(foreign, 403, "forbidden", field="origin")
    with serving() as sink:  # the public control URL is the page's origin too (a proxy may rewrite Host)
        public = await client.post(replay, json={"url": sink.url}, headers={"origin": settings.control_url})
        assert public.json()["success"] is True


async def test_what_the_shell_shows_is_escaped_and_holds_nothing_captured(client, database_url):
    started = await _start(client)
    async with db(database_url) as conn:
        await conn.execute(
            "UPDATE endpoints SET name = $2 WHERE id = $1", started["endpoint_id"], '<script>alert("x")</script>&'
        )
        await store(conn, None, None, [Ev(started["endpoint_id"], body=b"<b>captured-marker</b>")])
    page = _assert_page(await client.get(f"/inbox/{started['endpoint_id']}"), started["endpoint_id"])
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&amp;" in page
    assert "captured-marker" not in page


async def test_static_files_are_the_packaged_ones_and_nothing_else(client):
    for name in ("inbox.js", "pretty.js", "resign.js", "destinations.js"):
        script = await client.get(f"/static/{name}")
        assert script.status_code == 200
        assert script.headers["content-type"].startswith("text/javascript")
        assert "innerHTML" not in script.text
        assert "eval(" not in script.text
    script = await client.get("/static/inbox.js")
    icon = await client.get("/favicon.ico")  # browsers ask for it unprompted: a 404 was an error in the console
    assert (icon.status_code, icon.headers["content-type"]) == (200, "image/x-icon")
    assert icon.content == (await client.get("/static/favicon.ico")).content
    again = await client.get("/static/inbox.js", headers={"if-none-match": script.headers["etag"]})
    assert again.status_code == 304
    for name in ("nope.js", "..%2Fapp.py", "inbox.js.map"):
        assert_error(await client.get(f"/static/{name}"), 404, "not_found")
    docs = await client.get("/schema")
    assert docs.status_code == 200
    assert '<script src="/static/redoc.standalone.js"' in docs.text
    assert "https://" not in docs.text.split("Redoc.init(")[0]  # nothing from a CDN or a font service
    assert (await client.get("/static/redoc.standalone.js")).status_code == 200


async def test_an_agent_with_a_temporary_token_gets_a_link_over_mcp(client, settings):
    started = await _start(client)
    client.cookies.clear()  # the agent is not the browser that called /api/start
    result = await posted_call(client, started["api_token"], "create_inbox_link", endpoint_id=started["endpoint_id"])
    assert result.get("isError") is not True, result
    url = result["structuredContent"]["url"]
    opened = await _open(client, url, settings)
    assert opened.status_code == 303
    _assert_page(await client.get(f"/inbox/{started['endpoint_id']}"), started["endpoint_id"])
