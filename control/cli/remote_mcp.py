"""The client commands' operations for a temporary ``hy_tmp_`` token: MCP tool calls instead of /v1 requests.

``POST /api/start`` answers a token that /v1 refuses (403 ``temporary_token``: no /v1 access until an account
is registered) and /mcp takes, for the endpoints /api/start made for its account. So a user who followed the
anonymous quick start runs ``trigger``, ``replay``, ``tail``, ``listen ENDPOINT`` and ``open`` with the token
they were given: each operation of ``Remote`` is the tool of the same /v1 operation (``send_test_webhook`` for
``POST .../test-webhook``, ``wait_for_event`` with ``after`` for ``events/wait``...), called with the official
MCP client over Streamable HTTP, so the same service functions answer. What the token cannot do is refused
before anything is sent, saying what to do instead: it creates no endpoint (``listen --start``).

Each call is a client session of its own (the server is stateless): ``tail`` makes its calls side by side,
and a restarted control plane needs no session found again. Failures keep ``Remote``'s meaning: a tool's
error envelope (or the envelope of a refusal before the tool, a 401 or a 429) is ``ApiError`` with its code,
no answer or a 502-504 is ``Unreachable``, which ``listen`` and ``tail`` wait out.
"""

from __future__ import annotations

import json
from typing import Any

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from control.cli.remote import Remote, transport_failure
from control.support.client_tls import verify_for
from shared.errors import ApiError, ConfigError

__all__ = ("RemoteOverMcp",)

_TIMEOUT_S = 30.0


class RemoteOverMcp(Remote):
    def __init__(self, base_url: str, key: str, **kwargs: Any) -> None:
        super().__init__(base_url, key, **kwargs)
        self._key = key

    async def tool(self, name: str, arguments: dict[str, Any], *, timeout_s: float = _TIMEOUT_S) -> dict[str, Any]:
        """The tool's structured result."""
        refusals: list[tuple[int, bytes, str]] = []

        async def note_refusal(response: httpx2.Response) -> None:
            # The SDK turns an HTTP error into a generic one: its envelope is read here, before it does.
            if response.status_code >= 400:
                refusals.append((response.status_code, await response.aread(), response.reason_phrase))

        http = httpx2.AsyncClient(
            headers={"authorization": f"Bearer {self._key}", "user-agent": "hookyard-cli"},
            timeout=httpx2.Timeout(timeout_s, connect=5.0),
            trust_env=False,
            verify=verify_for(self.base_url),
            event_hooks={"response": [note_refusal]},
        )
        try:
            async with http, Client(streamable_http_client(f"{self.base_url}/mcp", http_client=http)) as client:
                result = await client.call_tool(name, arguments)
        except Exception as exc:  # the SDK raises transport errors inside task groups: any of them means "no answer"
            if refusals:
                raise self.refused(*refusals[0]) from None
            raise transport_failure(self._where, _innermost(exc), f"MCP {name}: ") from exc
        if result.is_error:
            raise _tool_error(name, result.structured_content, result.content)
        return dict(result.structured_content or {})

    async def endpoint_by_id(self, endpoint_id: str) -> dict[str, Any]:
        return await self.tool("get_endpoint", {"endpoint_id": endpoint_id})

    async def endpoints_by_ref(self, ref: str) -> list[dict[str, Any]]:
        listed: list[dict[str, Any]] = (await self.tool("list_endpoints", {"external_ref": ref}))["endpoints"]
        return listed

    async def endpoints(self) -> list[dict[str, Any]]:
        listed: list[dict[str, Any]] = (await self.tool("list_endpoints", {}))["endpoints"]
        return listed

    async def create_temporary_endpoint(self, name: str) -> dict[str, Any]:
        """Refused here: the server would refuse it too (``create_endpoint``: 403 ``temporary_token``), and the
        token already has the endpoint /api/start made, which ``listen`` follows when named."""
        ids = " or ".join(e["id"] for e in await self.endpoints()) or "ENDPOINT"
        raise ConfigError(
            "listen --start: a temporary hy_tmp_ token cannot create endpoints; follow the one POST /api/start "
            f"made for it: `hookyard listen {ids} --forward-to URL`. POST /api/register "
            '{"email": ..., "api_token": "hy_tmp_..."} turns its account into a registered one, whose hy_live_ key '
            "can create endpoints"
        )

    async def latest_event(self, endpoint_id: str) -> dict[str, Any]:
        return await self.tool("get_latest_event", {"endpoint_id": endpoint_id})

    async def event(self, event_id: str) -> dict[str, Any]:
        return await self.tool("get_event", {"event_id": event_id})

    async def wait(self, endpoint_id: str, after: str, timeout_s: int) -> tuple[dict[str, Any] | None, str]:
        arguments = {"endpoint_id": endpoint_id, "after": after, "timeout": timeout_s}
        waited = await self.tool("wait_for_event", arguments, timeout_s=timeout_s + 15)
        return waited.get("event"), str(waited["cursor"])

    async def deliveries(self, endpoint_id: str, limit: int) -> list[dict[str, Any]]:
        listed: list[dict[str, Any]] = (
            await self.tool("list_deliveries", {"endpoint_id": endpoint_id, "limit": limit})
        )["deliveries"]
        return listed

    async def send_test_webhook(self, endpoint_id: str, sample: dict[str, Any]) -> dict[str, Any]:
        return await self.tool("send_test_webhook", {"endpoint_id": endpoint_id, **sample})

    async def replay(self, event_id: str, request: dict[str, Any]) -> dict[str, Any]:
        return await self.tool("replay_event", {"event_id": event_id, **request})

    async def record_forward(self, event_id: str, report: dict[str, Any], timeout_s: float) -> None:
        await self.tool("record_forward", {"event_id": event_id, **report}, timeout_s=timeout_s)

    async def inbox_link(self, endpoint_id: str) -> dict[str, Any]:
        return await self.tool("create_inbox_link", {"endpoint_id": endpoint_id})


def _innermost(exc: BaseException) -> BaseException:
    """The first error inside the SDK's task groups: "ConnectError: All connection attempts failed", not
    "ExceptionGroup: unhandled errors in a TaskGroup (1 sub-exception)"."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _tool_error(name: str, structured: dict[str, Any] | None, content: list[Any]) -> ApiError:
    """A tool's error result: the /v1 error envelope (``control.mcp.errors``), as ``ApiError``."""
    text = content[0].text if content and hasattr(content[0], "text") else ""
    try:
        error = (structured or json.loads(text))["error"]
        code, message = str(error["code"]), str(error["message"])
    except (ValueError, KeyError, TypeError):
        code, message = "tool_error", text or "refused"
    return ApiError(f"MCP {name}: {code}: {message}", code=code, rate_limited=code == "rate_limited")
