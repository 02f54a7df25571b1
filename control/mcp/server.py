"""The MCP server: tools/list and tools/call over the registry, on the SDK's low-level ``Server``.

Why the low-level server and not ``MCPServer``'s decorated functions: ``MCPServer`` derives input schemas
from Python signatures through pydantic, which knows nothing of the records' msgspec constraints and would
restate (and drift from) what the OpenAPI document already states exactly, and it cannot take a msgspec
Struct as a return type. Here each tool's schemas come from the document and the records
(``control.mcp.schemas``), its arguments are decoded by the /v1 decoder (``control.mcp.arguments``), and
the results are the records themselves, so a tool is one small adapter over its service function.

Who calls: the request that carried the call was authenticated by the mount (``control.mcp.mount``), which
put the ``Principal`` in the ASGI scope; the process's ``Context`` is the Litestar app's state. Both reach the
handler through the HTTP request the SDK hands it (``ctx.request``), in stateless mode as in the modern
per-request protocol.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib.metadata import version
from typing import Any

import mcp_types as types
import msgspec
from mcp.server import Server, ServerRequestContext
from mcp.shared.exceptions import MCPError

import control.mcp.tools  # noqa: F401 - registers every tool
from control.mcp.errors import failure_result
from control.mcp.registry import TOOLS, Call, ToolSpec
from control.mcp.schemas import find_operation, operation_input_schema, output_schema, record_input_schema

__all__ = ("Catalog", "create_server")

INSTRUCTIONS = """hookyard captures webhooks sent to an endpoint's ingest URL, verifies and routes them, and
replays them. Every tool is the same operation as a /v1 route, with the same validation and error codes; a
refused call is a tool error whose text is {"error": {"code", "message"}}.
A first flow: create_endpoint (or list_endpoints) -> send_test_webhook (a signed sample of a real provider's
event; it answers once the event is stored, with a `cursor`) -> wait_for_event with `after` set to that
`cursor` (it answers the sample itself, and the `cursor` to wait for the next event from) -> replay_event to
your own URL. wait_for_event blocks until a matching event arrives (timeout 1-55 s); no event in time is not
an error, call it again."""


class Catalog:
    """The tools as one app lists them: built from the registry and that app's OpenAPI document, on first use
    (generating the document costs a tenth of a second, which an app that never serves /mcp need not pay)."""

    def __init__(self, specs: dict[str, ToolSpec]) -> None:
        self.specs = specs
        self._document: Callable[[], dict[str, Any]] | None = None
        self._tools: dict[str, types.Tool] | None = None
        self._routes: dict[str, tuple[str, str]] = {}

    def attach(self, document: Callable[[], dict[str, Any]]) -> None:
        """Where the OpenAPI document comes from once the catalog is first needed."""
        self._document = document

    def bind(self, document: dict[str, Any]) -> None:
        """Builds every tool; listed in the document's order of their operations, tools of their own last."""
        order = [op.get("operationId") for item in document["paths"].values() for op in item.values()]
        rank = {operation: i for i, operation in enumerate(order)}
        tools, routes = {}, {}
        for spec in sorted(self.specs.values(), key=lambda s: rank.get(s.operation, len(rank))):
            description = spec.doc
            if spec.operation is None:
                input_schema = record_input_schema(spec.arguments)
            else:
                method, path, operation = find_operation(document, spec.operation)
                routes[spec.name] = (method.upper(), path)
                input_schema = operation_input_schema(document, spec.operation)
                description = _described(spec, operation.get("description"))
            tools[spec.name] = types.Tool(
                name=spec.name,
                title=spec.title,
                description=description,
                input_schema=input_schema,
                output_schema=output_schema(spec.output),
                annotations=types.ToolAnnotations(
                    title=spec.title,
                    read_only_hint=spec.read_only,
                    destructive_hint=spec.destructive,
                    idempotent_hint=spec.idempotent,
                    open_world_hint=spec.open_world,
                ),
            )
        self._tools, self._routes = tools, routes

    def _built(self) -> dict[str, types.Tool]:
        if self._tools is None:
            if self._document is None:
                raise RuntimeError("the tool catalog needs the app's OpenAPI document (McpMount.lifespan attaches it)")
            self.bind(self._document())
        assert self._tools is not None
        return self._tools

    @property
    def tools(self) -> list[types.Tool]:
        return list(self._built().values())

    @property
    def routes(self) -> dict[str, tuple[str, str]]:
        """Tool name → (METHOD, path) of the /v1 operation it mirrors."""
        self._built()
        return self._routes

    def input_schema(self, name: str) -> dict[str, Any] | None:
        """For the SDK's check of ``Mcp-Param-*`` headers, which runs before any handler."""
        found = self._built().get(name)
        return None if found is None else found.input_schema


def _described(spec: ToolSpec, operation: str | None) -> str:
    """A mirrored tool's description: the operation's own (the one text of what it does, also the /v1
    reader's) and after it the tool's notes for MCP (its docstring past the summary); the summary itself,
    the same thing said shorter, only where the operation has no description."""
    if not operation:
        return spec.doc
    notes = spec.doc.split("\n\n", 1)[1:]
    return "\n\n".join([operation, *notes])


def _call(ctx: ServerRequestContext[Any, Any]) -> Call:
    scope = ctx.request.scope  # the HTTP request that carried this message (see the module docstring)
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
            kwargs = spec.arguments.decode(params.arguments or {})
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


def catalog() -> Catalog:
    """A catalog of every registered tool (one per app: each binds its own document)."""
    return Catalog(TOOLS)
