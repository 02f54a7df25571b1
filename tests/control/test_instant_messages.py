"""A bad ``since``/``until`` reads like every other refused parameter, the text given quoted as JSON
(``got "yesterday"``), on /v1 and through the official MCP client alike; it once read ``'yesterday' is not an
ISO 8601 ...`` in Python's quotes."""

from __future__ import annotations

from tests.events_support import live_app
from tests.mcp_client import call, connected

EXPECTED = 'since: must be an ISO 8601 date-time (2026-11-21T10:00:00Z) or date (2026-11-21), got "yesterday"'


async def test_a_bad_since_quotes_the_text_as_json(settings, account) -> None:
    async with live_app(settings) as (client, app):
        created = await client.post("/v1/endpoints", json={"name": "instants"}, headers=account.headers)
        endpoint = created.json()["id"]
        resp = await client.get(f"/v1/endpoints/{endpoint}/events?since=yesterday", headers=account.headers)
        assert resp.status_code == 400
        assert resp.json()["error"]["message"] == EXPECTED
        resp = await client.get(f"/v1/endpoints/{endpoint}/events?until=it%27s", headers=account.headers)
        assert resp.json()["error"]["message"].endswith(', got "it\'s"')
        async with connected(app, account.key) as mcp:
            is_error, content = await call(mcp, "list_events", endpoint_id=endpoint, since="yesterday")
        assert is_error
        assert content["error"]["message"] == EXPECTED
