"""Every authenticated surface is rate limited per credential, and outbound sends per account.

The audit found the inbox's data routes outside the limiter (``control/service/inbox/page.py`` resolved its
Bearer key itself): with one key, 300 event lists and 150 replays in a row all answered 200, each replay an
outbound request. Here each surface is tried with each credential it accepts: a burst past the limit is 429
``rate_limited`` with ``Retry-After`` and the envelope, and another credential carries on. The outbound-send
limit (replays, destination tests, test webhooks, delivery retries) is one bucket per account, whichever
surface and credential spend it; the destination is a real loopback server, so "refused" is checked where
it matters: nothing was sent.

Limits are small (1/s, burst 3) so a burst is a few requests; the count that may pass is the burst plus what
the clock refilled, never an assumption about the machine's speed.
"""

from __future__ import annotations

import ast
import json
import re
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest

from control.db.context import Context, Principal
from control.service.accounts import issue_key
from control.service.inbox_links import LINK_COOKIE, _key, _sign
from shared.settings import Settings
from tests.conftest import Account
from tests.destination import Destination, add_destination, add_endpoint, add_rule, serving
from tests.events_support import Ev, store, store_delivery, store_task
from tests.helpers import assert_error, concurrent_client, db

BURST = 3
"""Requests per credential that pass at once (``rate_limit_burst``); ``rate_limit_per_s`` is 1."""
SENDS = 3
"""Outbound sends per account that pass at once (``send_rate_burst``); ``send_rate_per_min`` is 1."""
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def destination() -> Iterator[Destination]:
    with serving() as server:
        yield server


def _limited(settings: Settings, **extra: Any) -> Settings:
    return msgspec.structs.replace(settings, rate_limit_per_s=1, rate_limit_burst=BURST, **extra)


# -- credentials ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Credential:
    """One credential and the endpoint (with one stored event) its inbox is about."""

    headers: dict[str, str]
    endpoint_id: str
    event_id: str


async def _event(database_url: str, endpoint_id: str) -> str:
    async with db(database_url) as conn:
        return (await store(conn, None, None, [Ev(endpoint_id=endpoint_id)]))[0]


async def _endpoint(database_url: str, account_id: str) -> str:
    """Made in the database: through /v1 it would spend the tokens the test is about."""
    async with db(database_url) as conn:
        return await add_endpoint(conn, account_id=account_id)


def _cookie(name: str, value: str) -> dict[str, str]:
    return {"cookie": f"{name}={value}"}


async def _link_cookie(ctx: Context, account_id: str, endpoint_id: str, *, purpose: str = "cookie", age_s: int = 0):
    """A valid ``hy_inbox`` cookie (or, with ``purpose="link"``, a link token), as the page's redemption
    signs it; ``age_s`` makes another one for the same endpoint (another expiry)."""
    principal = Principal(account_id=account_id, key_id="", kind="live")
    expires = datetime.now(UTC).replace(microsecond=0) + timedelta(hours=1, seconds=-age_s)
    return _sign(await _key(ctx), purpose, endpoint_id, principal, expires)


async def _start(client: httpx.AsyncClient, session: str | None = None) -> tuple[dict[str, Any], str]:
    """(the /api/start answer, the browser's session cookie); the client keeps no cookie."""
    headers = _cookie("hy_session", session) if session else {}
    resp = await client.post("/api/start", headers=headers)
    assert resp.status_code == 200, resp.text
    cookie = session or resp.cookies["hy_session"]
    client.cookies.clear()
    return resp.json(), cookie


async def _pair(
    kind: str, client: httpx.AsyncClient, database_url: str, ctx: Context, account: Account
) -> tuple[Credential, Credential, Credential]:
    """(the credential under test, another one of the same kind, the account's API key on the same endpoint).

    The other one is as close as the kind allows: another key of the same account, another token of the same
    anonymous account, a link cookie of the account's other endpoint (all link cookies of one endpoint are
    one credential: a link can be redeemed again and again), another browser's session."""
    if kind == "api_key":
        endpoint_id = await _endpoint(database_url, account.id)
        async with db(database_url) as conn:
            second = await issue_key(conn, account.id)
        event_id = await _event(database_url, endpoint_id)
        mine = Credential(account.headers, endpoint_id, event_id)
        return mine, Credential({"authorization": f"Bearer {second}"}, endpoint_id, event_id), mine
    if kind in ("temporary_token", "session"):
        started, session = await _start(client)
        again, _ = await _start(client, session)  # the same browser: the same account, a new token
        theirs, their_session = await _start(client)  # another browser
        assert again["endpoint_id"] == started["endpoint_id"]
        endpoint_id = started["endpoint_id"]
        event_id = await _event(database_url, endpoint_id)
        async with db(database_url) as conn:
            account_id = await conn.fetchval("SELECT account_id FROM endpoints WHERE id = $1", endpoint_id)
            key = await issue_key(conn, account_id)  # a live key of the anonymous account, for the third
        owner = Credential({"authorization": f"Bearer {key}"}, endpoint_id, event_id)
        if kind == "temporary_token":
            mine = Credential({"authorization": f"Bearer {started['api_token']}"}, endpoint_id, event_id)
            return mine, Credential({"authorization": f"Bearer {again['api_token']}"}, endpoint_id, event_id), owner
        their_event = await _event(database_url, theirs["endpoint_id"])
        other = Credential(_cookie("hy_session", their_session), theirs["endpoint_id"], their_event)
        return Credential(_cookie("hy_session", session), endpoint_id, event_id), other, owner
    assert kind == "link_cookie"
    endpoint_id, second = await _endpoint(database_url, account.id), await _endpoint(database_url, account.id)
    event_id = await _event(database_url, endpoint_id)
    mine = Credential(_cookie(LINK_COOKIE, await _link_cookie(ctx, account.id, endpoint_id)), endpoint_id, event_id)
    cookie = await _link_cookie(ctx, account.id, second)
    other = Credential(_cookie(LINK_COOKIE, cookie), second, await _event(database_url, second))
    return mine, other, Credential(account.headers, endpoint_id, event_id)


# -- surfaces ------------------------------------------------------------------------------------------------

MCP_HEADERS = {"accept": "application/json, text/event-stream", "mcp-protocol-version": "2025-06-18"}


def _call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": arguments}}


def _result(resp: httpx.Response) -> dict[str, Any]:
    """The tools/call result of a 200 from /mcp (JSON, or one server-sent event when it was not ready at once)."""
    assert resp.status_code == 200, resp.text
    json_body = resp.headers["content-type"].startswith("application/json")
    return json.loads(resp.text if json_body else resp.text.split("data: ", 1)[1])["result"]


Surface = Callable[[httpx.AsyncClient, Credential, str], Awaitable[httpx.Response]]


async def _v1(client: httpx.AsyncClient, who: Credential, url: str) -> httpx.Response:
    return await client.get("/v1/endpoints", headers=who.headers)


async def _mcp(client: httpx.AsyncClient, who: Credential, url: str) -> httpx.Response:
    resp = await client.post("/mcp", json=_call("list_endpoints"), headers={**who.headers, **MCP_HEADERS})
    if resp.status_code == 200:
        assert _result(resp).get("isError") is not True, resp.text
    return resp


async def _inbox_page(client: httpx.AsyncClient, who: Credential, url: str) -> httpx.Response:
    return await client.get(f"/inbox/{who.endpoint_id}", headers=who.headers)


async def _inbox_events(client: httpx.AsyncClient, who: Credential, url: str) -> httpx.Response:
    return await client.get(f"/inbox/{who.endpoint_id}/events", headers=who.headers)


async def _inbox_event(client: httpx.AsyncClient, who: Credential, url: str) -> httpx.Response:
    return await client.get(f"/inbox/{who.endpoint_id}/events/{who.event_id}/body", headers=who.headers)


async def _inbox_replay(client: httpx.AsyncClient, who: Credential, url: str) -> httpx.Response:
    path = f"/inbox/{who.endpoint_id}/events/{who.event_id}/replay"
    resp = await client.post(path, json={"url": url}, headers=who.headers)
    if resp.status_code == 200:
        assert resp.json()["success"] is True, resp.text
    return resp


SURFACES: dict[str, Surface] = {
    "v1": _v1,
    "mcp": _mcp,
    "inbox_page": _inbox_page,
    "inbox_events": _inbox_events,
    "inbox_body": _inbox_event,
    "inbox_replay": _inbox_replay,
}
INBOX = ("inbox_page", "inbox_events", "inbox_body", "inbox_replay")
CASES = [
    ("v1", "api_key"),
    ("mcp", "api_key"),
    ("mcp", "temporary_token"),
    *((surface, kind) for surface in INBOX for kind in ("api_key", "temporary_token", "link_cookie", "session")),
]
SUBJECTS = {
    "api_key": "this API key",
    "temporary_token": "this temporary token",
    "link_cookie": "this endpoint's inbox links",
    "session": "this browser session",
}


async def _until_refused(send: Callable[[], Awaitable[httpx.Response]]) -> httpx.Response:
    """Sends until one is refused; the burst passes, and past it only what the clock refilled (1/s)."""
    started, passed = time.monotonic(), 0
    while (resp := await send()).status_code == 200:
        passed += 1
        assert passed < BURST + 30, f"{passed} requests in a row passed a limit of 1/s, burst {BURST}"
    assert passed >= BURST, f"refused within the burst: {resp.text}"
    assert passed <= BURST + int(time.monotonic() - started), f"{passed} passed: more than the bucket refilled"
    return resp


def _assert_limited(resp: httpx.Response, subject: str, *, most_s: int) -> int:
    err = assert_error(resp, 429, "rate_limited")
    retry_after = int(resp.headers["retry-after"])
    assert 1 <= retry_after <= most_s, resp.headers
    assert subject in err["message"], err
    assert f"retry in {retry_after} s" in err["message"], err
    return retry_after


@pytest.mark.parametrize(("surface", "kind"), CASES, ids=[f"{s}-{k}" for s, k in CASES])
async def test_a_burst_past_the_limit_is_429_for_that_credential_only(
    settings: Settings,
    database_url: str,
    ctx: Context,
    account: Account,
    destination: Destination,
    surface: str,
    kind: str,
) -> None:
    send = SURFACES[surface]
    # The outbound limit out of the way: this is the per-credential one, spent by reads and replays alike.
    async with concurrent_client(_limited(settings, send_rate_burst=1000)) as client:
        mine, other, owner = await _pair(kind, client, database_url, ctx, account)
        refused = await _until_refused(lambda: send(client, mine, destination.url))
        _assert_limited(refused, SUBJECTS[kind], most_s=1)
        assert (await send(client, other, destination.url)).status_code == 200, "another credential was refused"
        if owner.headers != mine.headers:
            assert (await send(client, owner, destination.url)).status_code == 200, "the account's key was refused"
        if kind == "link_cookie":
            # One bucket for every link of the endpoint: a fresh cookie, or redeeming a link, buys nothing.
            fresh = await _link_cookie(ctx, account.id, mine.endpoint_id, age_s=60)
            again = Credential(_cookie(LINK_COOKIE, fresh), mine.endpoint_id, mine.event_id)
            _assert_limited(await send(client, again, destination.url), SUBJECTS[kind], most_s=1)
            link = await _link_cookie(ctx, account.id, mine.endpoint_id, purpose="link")
            redeemed = await client.get(f"/inbox/{mine.endpoint_id}?link={link}", follow_redirects=False)
            _assert_limited(redeemed, SUBJECTS[kind], most_s=1)
        # Bad credentials are 401 whatever the buckets hold: an unauthenticated flood spends nobody's budget.
        forged = {"authorization": "Bearer hy_live_" + "x" * 32}
        assert_error(await client.get(f"/inbox/{mine.endpoint_id}/events", headers=forged), 401, "unauthorized")


# -- outbound sends: one bucket per account ------------------------------------------------------------------


def _tool_error(resp: httpx.Response) -> dict[str, str]:
    result = _result(resp)
    assert result.get("isError") is True, result
    envelope = json.loads(result["content"][0]["text"])
    assert envelope == result["structuredContent"]
    return envelope["error"]


def _assert_tool_limited(resp: httpx.Response) -> None:
    error = _tool_error(resp)
    assert error["code"] == "rate_limited", error
    assert "outbound sends" in error["message"], error
    found = re.search(r"retry in (\d+) s", error["message"])
    assert found, error
    assert 1 <= int(found.group(1)) <= 60, error


def _sends_limited(settings: Settings, destination: Destination) -> Settings:
    """A send limit of 1/min, burst ``SENDS``; the per-credential limit (50/s, burst 100) stays out of the way.
    The edge URL is the destination, so a test webhook is an outbound request the destination counts like the others."""
    edge = destination.url.removesuffix("/hook")
    return msgspec.structs.replace(settings, send_rate_per_min=1, send_rate_burst=SENDS, public_edge_url=edge)


async def test_replays_over_v1_mcp_and_the_inbox_share_the_accounts_send_limit(
    settings: Settings,
    database_url: str,
    ctx: Context,
    account: Account,
    other_account: Account,
    destination: Destination,
) -> None:
    async with concurrent_client(_sends_limited(settings, destination)) as client:
        await _replays_share_the_limit(client, database_url, ctx, account, other_account, destination)


async def _replays_share_the_limit(
    client: httpx.AsyncClient,
    database_url: str,
    ctx: Context,
    account: Account,
    other: Account,
    destination: Destination,
) -> None:
    before = len(destination.requests)
    endpoint_id = await _endpoint(database_url, account.id)
    event_id = await _event(database_url, endpoint_id)
    async with db(database_url) as conn:
        mcp_key = await issue_key(conn, account.id)  # each surface with a credential of its own
    mcp = {"authorization": f"Bearer {mcp_key}", **MCP_HEADERS}
    link = _cookie(LINK_COOKIE, await _link_cookie(ctx, account.id, endpoint_id))

    async def v1() -> httpx.Response:
        return await client.post(
            f"/v1/events/{event_id}/replay", json={"url": destination.url}, headers=account.headers
        )

    async def over_mcp() -> httpx.Response:
        return await client.post(
            "/mcp", json=_call("replay_event", event_id=event_id, url=destination.url), headers=mcp
        )

    async def inbox() -> httpx.Response:
        path = f"/inbox/{endpoint_id}/events/{event_id}/replay"
        return await client.post(path, json={"url": destination.url}, headers=link)

    assert (await v1()).json()["success"] is True
    assert _result(await over_mcp())["structuredContent"]["success"] is True
    assert (await inbox()).json()["success"] is True
    subject = "this account's outbound sends"
    _assert_limited(await v1(), subject, most_s=60)
    _assert_tool_limited(await over_mcp())
    _assert_limited(await inbox(), subject, most_s=60)
    assert len(destination.requests) - before == SENDS, "a refused replay was sent"
    # Reads are not sends: the same credentials still read.
    assert (await client.get(f"/v1/events/{event_id}", headers=account.headers)).status_code == 200
    assert (await client.get(f"/inbox/{endpoint_id}/events", headers=link)).status_code == 200

    theirs = await _endpoint(database_url, other.id)
    their_event = await _event(database_url, theirs)
    resp = await client.post(f"/v1/events/{their_event}/replay", json={"url": destination.url}, headers=other.headers)
    assert resp.status_code == 200, "another account was refused"
    assert resp.json()["success"] is True
    # What an agent is told of this instance's limits is what it gets.
    assert f"1 a minute (bursts of {SENDS})" in (await client.get("/llms.txt")).text


async def test_every_on_demand_send_spends_and_respects_the_send_limit(
    settings: Settings, database_url: str, account: Account, destination: Destination
) -> None:
    """Destination tests, test webhooks, a retry and a bulk retry draw from the replays' bucket; once it is
    empty each is refused, on /v1 as a 429 and over MCP as a tool error, before anything is sent or queued."""
    async with concurrent_client(_sends_limited(settings, destination)) as client:
        await _each_send_kind(client, database_url, account, destination)


async def _each_send_kind(
    client: httpx.AsyncClient, database_url: str, account: Account, destination: Destination
) -> None:
    before = len(destination.requests)
    async with db(database_url) as conn:
        endpoint_id = await add_endpoint(conn, account_id=account.id)
        destination_id = await add_destination(conn, endpoint_id, destination.url)
        rule_id = await add_rule(conn, endpoint_id, [destination_id])
        event = Ev(endpoint_id=endpoint_id)
        await store(conn, None, None, [event])
        task_id = await store_task(
            conn,
            endpoint_id=endpoint_id,
            event_id=event.id,
            received_at=event.received_at,
            rule_id=rule_id,
            destination_id=destination_id,
        )
        delivery_id = await store_delivery(
            conn,
            endpoint_id,
            event.id,
            created_at=event.received_at,
            success=False,
            task_id=task_id,
            destination_id=destination_id,
            rule_id=rule_id,
        )
    h = account.headers
    mcp = {**h, **MCP_HEADERS}
    sample = {"provider": "commerce", "event_type": "orders/create"}
    v1: dict[str, Callable[[], Awaitable[httpx.Response]]] = {
        "test_destination": lambda: client.post(f"/v1/destinations/{destination_id}/test", headers=h),
        "test_webhook": lambda: client.post(f"/v1/endpoints/{endpoint_id}/test-webhook", json=sample, headers=h),
        "retry": lambda: client.post(f"/v1/deliveries/{delivery_id}/retry", headers=h),
        "bulk_retry": lambda: client.post(f"/v1/endpoints/{endpoint_id}/deliveries/retry?success=false", headers=h),
        "replay": lambda: client.post(f"/v1/events/{event.id}/replay", json={"url": destination.url}, headers=h),
    }
    tools = {
        "test_destination": _call("test_destination", destination_id=destination_id),
        "send_test_webhook": _call("send_test_webhook", endpoint_id=endpoint_id, **sample),
        "retry_delivery": _call("retry_delivery", delivery_id=delivery_id),
        "retry_deliveries": _call("retry_deliveries", endpoint_id=endpoint_id, success=False),
        "replay_event": _call("replay_event", event_id=event.id, url=destination.url),
    }
    # Spent by one of each kind: a destination test, a test webhook, then a retry.
    assert (await v1["test_destination"]()).json()["success"] is True
    assert _result(await client.post("/mcp", json=tools["send_test_webhook"], headers=mcp)).get("isError") is not True
    assert (await v1["retry"]()).status_code == 202
    for name, send in v1.items():
        resp = await send()
        assert resp.status_code == 429, (name, resp.text)
        _assert_limited(resp, "this account's outbound sends", most_s=60)
    for name, call in tools.items():
        resp = await client.post("/mcp", json=call, headers=mcp)
        assert _result(resp).get("isError") is True, (name, resp.text)
        _assert_tool_limited(resp)
    assert len(destination.requests) - before == 2, "a refused send was sent"
    async with db(database_url) as conn:
        assert await conn.fetchval("SELECT count(*) FROM delivery_retry_jobs") == 0, "a refused bulk retry started"


# -- one door ------------------------------------------------------------------------------------------------

_RESOLVERS = {"authenticate", "cookie_principal", "redeem_link"}
"""What turns a presented credential into a caller; only ``control.service.callers``, which charges the
credential's bucket, may use them."""


def test_every_credential_is_resolved_where_it_is_charged() -> None:
    """A surface that resolved a credential itself (as the inbox did) would be outside the limit."""
    offenders = []
    for path in sorted((ROOT / "control").rglob("*.py")):
        module = path.relative_to(ROOT).as_posix()
        if module == "control/service/callers.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                offenders += [f"{module}: imports {a.name}" for a in node.names if a.name in _RESOLVERS]
            elif isinstance(node, ast.Attribute) and node.attr in _RESOLVERS:
                offenders.append(f"{module}: uses .{node.attr}")
    assert offenders == []
