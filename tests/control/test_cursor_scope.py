"""A page cursor of one endpoint's list is refused on another endpoint's, over /v1 and MCP alike: it was
taken, and answered a page of nothing (or of the wrong rows), while a cursor of another list was refused."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from tests.events_support import Ev, live_app, store, store_delivery
from tests.helpers import create_endpoint
from tests.mcp_client import call, connected

START = datetime.now(UTC) - timedelta(hours=1)


async def test_a_cursor_is_bound_to_its_endpoint(settings, account, conn) -> None:
    async with live_app(settings) as (client, app):
        a, b = [(await create_endpoint(client, account.headers))["id"] for _ in range(2)]
        for endpoint in (a, b):
            stored = await store(
                conn, None, None, [Ev(endpoint, received_at=START + timedelta(seconds=i)) for i in range(3)]
            )
            for i, event_id in enumerate(stored):
                await store_delivery(conn, endpoint, event_id, created_at=START + timedelta(seconds=i))
        refused = {}
        for kind in ("events", "deliveries"):
            first = await client.get(f"/v1/endpoints/{a}/{kind}", params={"limit": 1}, headers=account.headers)
            cursor = first.json()["next_cursor"]
            assert cursor
            same = await client.get(f"/v1/endpoints/{a}/{kind}", params={"cursor": cursor}, headers=account.headers)
            assert len(same.json()[kind]) == 2  # the rest of a's list
            other = await client.get(f"/v1/endpoints/{b}/{kind}", params={"cursor": cursor}, headers=account.headers)
            assert other.status_code == 400, other.text
            refused[kind] = other.json()["error"]["message"]
            assert refused[kind].startswith(f"cursor: a cursor of another endpoint's list, not of {b}'s"), other.text
        async with connected(app, account.key) as mcp:
            _, page = await call(mcp, "list_events", endpoint_id=a, limit=1)
            is_error, content = await call(mcp, "list_events", endpoint_id=b, cursor=page["next_cursor"])
        assert is_error
        assert content["error"]["message"] == refused["events"]
