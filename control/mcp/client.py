"""One MCP tool call from a command-line client, with the official MCP client over Streamable HTTP.

What a temporary token (``hy_tmp_`` from ``POST /api/start``) can use: a temporary endpoint has no
/v1 access until an account is registered (403 ``temporary_token``), while /mcp serves the token its own
endpoints. ``hookyard open`` asks here for an inbox link when its key is such a token."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from control.support.client_tls import verify_for
from shared.errors import HookyardError

__all__ = ("call_tool",)


def call_tool(control_url: str, key: str, name: str, arguments: dict[str, Any], *, source: str = "") -> dict[str, Any]:
    """The tool's structured result; a refusal raises ``HookyardError`` with its envelope's code and message.
    ``source``: where ``control_url`` came from, named when it does not answer."""
    return asyncio.run(_call(control_url, key, name, arguments, source))


async def _call(control_url: str, key: str, name: str, arguments: dict[str, Any], source: str) -> dict[str, Any]:
    try:
        verify = verify_for(control_url, trust_env=True)  # TLS trust only for https (control.support.client_tls)
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=httpx2.Timeout(30), verify=verify)
        async with http, Client(streamable_http_client(f"{control_url}/mcp", http_client=http)) as client:
            result = await client.call_tool(name, arguments)
    except Exception as exc:  # the SDK raises transport errors inside task groups: any of them means "no answer"
        where = f"{control_url} (from {source})" if source else control_url
        raise HookyardError(
            f"cannot reach the control plane at {where}: MCP {name}: {type(exc).__name__}: {exc}"
        ) from exc
    if result.is_error:
        text = result.content[0].text if result.content and hasattr(result.content[0], "text") else ""
        try:
            error = json.loads(text)["error"]
            message = f"{error['code']}: {error['message']}"
        except (ValueError, KeyError, TypeError):
            message = text or "refused"
        raise HookyardError(f"MCP {name}: {message}")
    return dict(result.structured_content or {})
