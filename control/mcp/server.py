"""The MCP server: tools/list and tools/call over the registry, on the SDK's low-level ``Server``.

Why the low-level server and not ``MCPServer``'s decorated functions: ``MCPServer`` derives input schemas
from Python signatures through pydantic, which knows nothing of the records' msgspec constraints and would
restate (and drift from) what the OpenAPI document already states exactly, and it cannot take a msgspec
Struct as a return type. Here each tool's schemas come from the document and the records
(``control.mcp.schemas``), its arguments that are /v1 parameters are checked as /v1 checks them
(``control.mcp.parameters``) and all are decoded by the /v1 decoder (``control.mcp.arguments``), and
the results are the records themselves, so a tool is one small adapter over its service function.

Who calls: the request that carried the call was authenticated by the mount (``control.mcp.mount``), which
put the ``Principal`` in the ASGI scope; the process's ``Context`` is the Litestar app's state. Both reach the
handler through the HTTP request the SDK hands it (``ctx.request``), in stateless mode as in the modern
per-request protocol.
"""

from __future__ import annotations

from importlib.metadata import version
from typing import Any

import mcp_types as types
import msgspec
from mcp.server import Server, ServerRequestContext
from mcp.shared.exceptions import MCPError

from control.mcp.catalog import Catalog
from control.mcp.errors import failure_result
from control.mcp.parameters import check_parameters, given
from control.mcp.registry import Call

__all__ = ("create_server",)

INSTRUCTIONS = """hookyard captures webhooks sent to an endpoint's ingest URL, verifies and routes them, and
replays them. Every tool is the same operation as a /v1 route, with the same validation and error codes; a
refused call is a tool error whose text is {"error": {"code", "message"}}.
A first flow: create_endpoint (or list_endpoints) -> send_test_webhook (a signed sample of a real provider's
event; it answers once the event is stored, with a `cursor`) -> wait_for_event with `after` set to that
`cursor` (it answers the sample itself, and the `cursor` to wait for the next event from) -> replay_event to
your own URL. wait_for_event blocks until a matching event arrives (timeout 1-55 s); no event in time is not
an error, call it again."""


def _call(ctx: ServerRequestContext[Any, Any]) -> Call:
    scope = ctx.request.scope  # type: ignore[union-attr]  # stateless HTTP: every message came in a request
    state = scope["litestar_app"].state
    return Call(ctx=state.ctx, principal=scope["user"], state=state)


def _result(value: msgspec.Struct) -> types.CallToolResult:
    text = msgspec.json.encode(value).decode()
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)], structured_content=msgspec.to_builtins(value)
    )


def create_server(catalog: Catalog) -> Server[Any]:
    async def list_tools(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=catalog.tools)

    async def call_tool(
        ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        spec = catalog.specs.get(params.name)
        if spec is None:
            raise MCPError(types.INVALID_PARAMS, f"unknown tool {params.name!r}; tools/list names them all")
        try:
            parameters, required = catalog.parameters(spec.name), catalog.required(spec.name)
            arguments = given(parameters, params.arguments or {}, required)
            check_parameters(parameters, arguments)
            kwargs = spec.arguments.decode(arguments)
            value = await spec.fn(_call(ctx), **kwargs)
        except Exception as exc:  # noqa: BLE001 - every failure is answered as a tool error (control.mcp.errors)
            return failure_result(spec.name, exc)
        return _result(value)

    return Server(
        "hookyard",
        version=version("hookyard"),
        title="hookyard",
        description="Webhook capture, routing and replay",
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        get_tool_input_schema=catalog.input_schema,
    )
