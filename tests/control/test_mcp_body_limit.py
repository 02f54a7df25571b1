"""/mcp takes requests as large as /v1 does, and refuses a larger one as /v1 does: 413 with the error envelope
``payload_too_large`` naming the limit. It once let a 3 MB replay ``body`` through that /v1 refused, and
answered a 5 MB call with the SDK's plain-text ``Request body too large``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mcp.shared.exceptions import MCPError

from tests.events_support import live_app
from tests.mcp_client import call, connected

MISSING_EVENT = "evt_01JAAAAAAAAAAAAAAAAAAAAAAA"
HEADERS = {"Accept": "application/json, text/event-stream", "mcp-protocol-version": "2025-06-18"}


def _args(body: str) -> dict[str, Any]:
    """``ReplayEvent``'s request body (/v1's JSON body; MCP's arguments besides ``event_id``)."""
    return {"url": "https://example.com/hook", "body": body}


def _replay(body: str) -> dict[str, Any]:
    arguments = {"event_id": MISSING_EVENT, **_args(body)}
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "replay_event", "arguments": arguments},
    }


async def test_mcp_refuses_what_v1_refuses_with_the_same_envelope(settings, account) -> None:
    async with live_app(settings) as (client, app):
        limit = app.request_max_body_size
        auth = {**HEADERS, **account.headers}
        v1 = await client.post(
            f"/v1/events/{MISSING_EVENT}/replay",
            json=_args("x" * 3_000_000),
            headers=account.headers,
        )
        assert v1.status_code == 413
        assert v1.json() == {
            "error": {
                "code": "payload_too_large",
                "message": f"body: request body is too large (at most {limit:,} bytes)",
            }
        }
        for size in (3_000_000, 5_000_000):
            mcp = await client.post("/mcp", json=_replay("x" * size), headers=auth)
            assert (mcp.status_code, mcp.headers["content-type"]) == (413, "application/json"), mcp.text
            assert mcp.json() == v1.json()

        async def chunks() -> Any:  # no content-length: counted as it arrives
            encoded = json.dumps(_replay("x" * 3_000_000)).encode()
            for at in range(0, len(encoded), 65536):
                yield encoded[at : at + 65536]

        streamed = await client.post("/mcp", content=chunks(), headers={**auth, "content-type": "application/json"})
        assert (streamed.status_code, streamed.json()) == (413, v1.json())
        # Under the limit, a large argument still reaches the tool (which answers its own not found), as on /v1.
        near = "x" * (limit - 4096)
        v1_near = await client.post(f"/v1/events/{MISSING_EVENT}/replay", json=_args(near), headers=account.headers)
        assert v1_near.status_code == 404, v1_near.text
        async with connected(app, account.key) as session:
            is_error, content = await call(session, "replay_event", event_id=MISSING_EVENT, **_args(near))
        assert is_error
        assert content == v1_near.json()


async def test_the_official_client_shows_what_agents_md_says_of_an_over_size_call(settings, account) -> None:
    """The SDK reads a non-2xx body only when it is a JSON-RPC error, and ours is the envelope (as /v1's), so an
    agent on the official client sees its stand-in, not our message: agents.md says so, in these words. A JSON-RPC
    error body would reach it but is no envelope; if this starts failing, the SDK or /mcp changed: fix the doc."""
    doc = (Path(__file__).parents[2] / "docs" / "reference" / "agents.md").read_text()
    async with live_app(settings) as (_, app), connected(app, account.key) as session:
        with pytest.raises(MCPError) as raised:
            await call(session, "replay_event", event_id=MISSING_EVENT, **_args("x" * 3_000_000))
    assert (raised.value.error.code, raised.value.error.message) == (-32603, "Server returned an error response")
    assert f"`MCPError` {raised.value.error.code} `{raised.value.error.message}`" in doc
