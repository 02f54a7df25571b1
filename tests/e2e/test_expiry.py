"""Expiry of temporary endpoints, through real processes: past `expires_at` the edge answers 410; the sweep then
deletes the endpoint with its events, deliveries, destinations and tasks (learned schemas stay with the
account), tombstones it at the edge (404), and deletes the anonymous account once it has no endpoint left.

The edge, flush and deliver run as processes; the sweep runs here, one step at a time, so the test sees the
410 for a day (``expired_grace_s``) before the sweep acts. Expiry is set in the database, never waited for.
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import httpx
import pytest

from control.db.context import Context
from control.records.destinations import DestinationCreate
from control.service import endpoints as endpoints_service
from control.service.accounts import authenticate
from control.service.destinations import crud as destinations_service
from control.support import edge_config
from control.workers.sweep.loop import Sweep
from shared.errors import UnauthorizedError
from tests.destination import Destination
from tests.helpers import wait_for
from tests.stack import Stack

pytestmark = pytest.mark.slow


def _start(client: httpx.Client, control_url: str, **body: Any) -> dict[str, Any]:
    resp = client.post(f"{control_url}/api/start", json=body)
    assert resp.status_code == 200, resp.text
    return resp.json()


async def _count(ctx: Context, sql: str, *args: Any) -> int:
    async with ctx.pool.acquire() as conn:
        return await conn.fetchval(sql, *args)


async def _expire(ctx: Context, endpoint_id: str, ago: timedelta = timedelta(seconds=1)) -> None:
    async with ctx.pool.acquire() as conn:
        await conn.execute("UPDATE endpoints SET expires_at = now() - $2::interval WHERE id = $1", endpoint_id, ago)
        await edge_config.sync(ctx, conn, [endpoint_id])


def _answer_within(client: httpx.Client, url: str, status: int, seconds: float = 2.0) -> httpx.Response:
    deadline = time.monotonic() + seconds
    while (resp := client.post(url, json={"type": "late"})).status_code != status and time.monotonic() < deadline:
        time.sleep(0.02)
    assert resp.status_code == status, resp.text
    return resp


async def test_expired_endpoints_answer_410_then_go_with_everything_theirs(
    stack: Stack, ctx: Context, destination: Destination
) -> None:
    stack.start_control()
    stack.start_edge()
    stack.start_worker("worker", "flush", "learn", "deliver")
    with httpx.Client(timeout=10) as client:  # keeps the session cookie: both endpoints in one account
        doomed = _start(client, stack.control_url)
        kept = _start(client, stack.control_url, ref="kept")
        principal = await authenticate(ctx, f"Bearer {doomed['api_token']}", allow_temporary=True)
        account_id = principal.account_id

        # What an agent builds over MCP with the token: a destination forwarding every event.
        await destinations_service.create_destination(
            ctx, principal, doomed["endpoint_id"], DestinationCreate(url=destination.url, forward_all=True)
        )
        for n in range(3):
            assert client.post(doomed["ingest_url"], json={"type": "order.paid", "n": n}).status_code == 200
        assert client.post(kept["ingest_url"], json={"type": "order.paid"}).status_code == 200
        doomed_id = doomed["endpoint_id"]
        await wait_for(
            lambda: _count(ctx, "SELECT count(*) = 3 FROM deliveries WHERE endpoint_id = $1", doomed_id), timeout=15
        )

        # The learn loop learned the doomed endpoint's shape (unattributed traffic: a schema of that endpoint).
        async def learned() -> str | None:
            async with ctx.pool.acquire() as conn:
                return await conn.fetchval(
                    "SELECT id FROM schemas WHERE account_id = $1 AND endpoint_id = $2 AND sample_count = 3",
                    account_id,
                    doomed_id,
                )

        schema_id = await wait_for(learned, timeout=15)

        await _expire(ctx, doomed_id)
        expired = _answer_within(client, doomed["ingest_url"], 410)
        assert expired.json()["error"]["code"] == "endpoint_expired"
        # Within the grace (a day) the sweep keeps it: senders keep learning it expired, not that it never was.
        await Sweep(ctx).step()
        assert await _count(ctx, "SELECT count(*) FROM events WHERE endpoint_id = $1", doomed_id) == 3
        assert client.post(doomed["ingest_url"], json={}).status_code == 410

        await _expire(ctx, doomed_id, ago=timedelta(days=1, seconds=1))
        await Sweep(ctx).step()
        for table in ("endpoints", "auth_configs", "destinations", "rules", "deliveries", "delivery_tasks"):
            column = "id" if table == "endpoints" else "endpoint_id"
            assert await _count(ctx, f"SELECT count(*) FROM {table} WHERE {column} = $1", doomed_id) == 0, table
        assert await _count(ctx, "SELECT count(*) FROM events WHERE endpoint_id = $1", doomed_id) == 0
        assert await _count(ctx, "SELECT count(*) FROM events WHERE endpoint_id = $1", kept["endpoint_id"]) == 1
        assert await _count(ctx, "SELECT count(*) FROM schemas WHERE id = $1", schema_id) == 1
        # Learned schemas are retained permanently (docs/reference/retention.md): the schema stays, its link to the
        # endpoint goes.
        assert await _count(ctx, "SELECT count(*) FROM schema_endpoints WHERE schema_id = $1", schema_id) == 0
        gone = _answer_within(client, doomed["ingest_url"], 404)
        assert gone.json()["error"]["code"] == "endpoint_not_found"
        assert client.post(kept["ingest_url"], json={}).status_code == 200
        # The account still has an endpoint: it, its session and its tokens stay.
        assert await _count(ctx, "SELECT count(*) FROM accounts WHERE id = $1", account_id) == 1
        assert (await authenticate(ctx, f"Bearer {doomed['api_token']}", allow_temporary=True)).account_id == account_id

        # Stored first: a flush still writing the event holds the endpoint's row, and the sweep skips locked rows
        # (the next round takes them).
        kept_id = kept["endpoint_id"]
        await wait_for(lambda: _count(ctx, "SELECT count(*) = 2 FROM events WHERE endpoint_id = $1", kept_id))
        await _expire(ctx, kept_id, ago=timedelta(days=2))
        await Sweep(ctx).step()
        for table in ("accounts", "anonymous_sessions", "api_keys", "schemas", "endpoints"):
            column = "id" if table == "accounts" else "account_id"
            assert await _count(ctx, f"SELECT count(*) FROM {table} WHERE {column} = $1", account_id) == 0, table
        with pytest.raises(UnauthorizedError):
            await authenticate(ctx, f"Bearer {kept['api_token']}", allow_temporary=True)
        _answer_within(client, kept["ingest_url"], 404)
        again = _start(client, stack.control_url, ref="kept")  # the old cookie names nothing now
        assert again["reused"] is False
        assert again["endpoint_id"] not in (doomed_id, kept["endpoint_id"])


async def test_the_sweep_keeps_what_is_not_expired_and_empty_accounts_go(client, ctx: Context, account) -> None:
    """In process: unexpired temporary endpoints, permanent accounts without endpoints and claimed endpoints
    stay; an anonymous account whose endpoint was deleted (over MCP, with its token) goes."""
    fresh = (await client.post("/api/start")).json()
    client.cookies.clear()
    emptied = (await client.post("/api/start")).json()
    client.cookies.clear()
    claimed = (await client.post("/api/start")).json()
    resp = await client.post("/api/register", json={"email": "a@example.com", "api_token": claimed["api_token"]})
    assert resp.status_code == 201
    principal = await authenticate(ctx, f"Bearer {emptied['api_token']}", allow_temporary=True)
    await endpoints_service.delete_endpoint(ctx, principal, emptied["endpoint_id"])

    await Sweep(ctx).step()

    assert await _count(ctx, "SELECT count(*) FROM accounts WHERE id = $1", principal.account_id) == 0
    assert await _count(ctx, "SELECT count(*) FROM accounts WHERE id = $1", account.id) == 1  # permanent, empty
    for started in (fresh, claimed):
        assert await _count(ctx, "SELECT count(*) FROM endpoints WHERE id = $1", started["endpoint_id"]) == 1
