"""The MCP client side of tests/e2e/test_mcp.py: the official MCP client connected over Streamable HTTP, a
tool caller, and small /v1 and /api/start helpers."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any

import httpx
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.conftest import Account
from tests.stack import Stack

NO_SUCH_EVENT = "evt_01KAAAAAAAAAAAAAAAAAAAAAAA"
NO_SUCH_ENDPOINT = "ep_01KAAAAAAAAAAAAAAAAAAAAAAA"


@contextlib.asynccontextmanager
async def connected(stack: Stack, key: str, mode: str = "auto") -> AsyncIterator[Tools]:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=httpx2.Timeout(70))
    async with http, Client(streamable_http_client(f"{stack.control_url}/mcp", http_client=http), mode=mode) as c:
        yield Tools(c)


class Tools:
    """The client, with assertions: ``ok`` for a call that must succeed, ``error`` for a refused one."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.called: set[str] = set()

    async def ok(self, tool: str, /, **arguments: Any) -> dict[str, Any]:
        result = await self.client.call_tool(tool, arguments)
        assert not result.is_error, f"{tool}: {result.content}"
        assert json.loads(result.content[0].text) == result.structured_content
        self.called.add(tool)
        return result.structured_content

    async def error(self, tool: str, /, **arguments: Any) -> dict[str, str]:
        """The envelope's ``{code, message}``, checked to be the tool error's text and structured content."""
        result = await self.client.call_tool(tool, arguments)
        assert result.is_error, f"{tool} succeeded: {result.structured_content}"
        envelope = json.loads(result.content[0].text)
        assert envelope == result.structured_content
        assert set(envelope) == {"error"}
        assert set(envelope["error"]) == {"code", "message"}
        return envelope["error"]


def v1_request(stack: Stack, account: Account, method: str, path: str, **kwargs: Any) -> httpx.Response:
    return httpx.request(method, f"{stack.control_url}{path}", headers=account.headers, timeout=10, **kwargs)


def iso(at: datetime) -> str:
    return at.isoformat().replace("+00:00", "Z")


async def until(check: Any, timeout: float = 15.0) -> Any:
    deadline = time.monotonic() + timeout
    while not (found := await check()):
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.05)
    return found


def temporary(stack: Stack) -> tuple[str, str]:
    """A temporary endpoint and its ``hy_tmp_`` token, from ``POST /api/start`` (no key)."""
    started = httpx.post(f"{stack.control_url}/api/start", json={"provider_hint": "identity"}, timeout=10)
    assert started.status_code == 200, started.text
    body = started.json()
    assert body["api_token"].startswith("hy_tmp_")
    return body["api_token"], body["endpoint_id"]
