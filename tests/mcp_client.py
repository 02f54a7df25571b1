"""MCP from a test, against a control app served in this process: the official client over Streamable HTTP
through ASGI (``connected``) with its tool caller (``call``), and one ``tools/call`` as a single stateless POST
through any HTTP test client (``posted_call``), the way a plain HTTP agent calls. Over real processes:
``tests/e2e/mcp_support.py``."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

__all__ = ("call", "connected", "posted_call")


@contextlib.asynccontextmanager
async def connected(app: Any, key: str) -> AsyncIterator[Client]:
    """The official client of ``app``'s /mcp in process, authorised by ``key`` (an API key or token)."""
    transport = httpx2.ASGITransport(app=app)
    headers = {"Authorization": f"Bearer {key}"}
    http = httpx2.AsyncClient(transport=transport, base_url="http://control.test", headers=headers)
    async with http, Client(streamable_http_client("http://control.test/mcp", http_client=http)) as client:
        yield client


async def call(client: Client, tool: str, **arguments: Any) -> tuple[bool, dict[str, Any]]:
    """(is the answer a tool error, its structured content), checked to be the same as its text."""
    result = await client.call_tool(tool, arguments)
    assert json.loads(result.content[0].text) == result.structured_content
    return result.is_error, result.structured_content


async def posted_call(client: Any, token: str, tool: str, **arguments: Any) -> dict[str, Any]:
    """The JSON-RPC ``result`` of one tools/call POSTed to /mcp with ``token``, asserted to be a 200."""
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, text/event-stream",
        "mcp-protocol-version": "2025-06-18",
    }
    resp = await client.post("/mcp", json=message, headers=headers)
    assert resp.status_code == 200, resp.text
    # JSON, or one server-sent event when the answer was not ready at once (control.mcp.mount)
    body = resp.text if resp.headers["content-type"].startswith("application/json") else resp.text.split("data: ")[1]
    result: dict[str, Any] = json.loads(body)["result"]
    return result
