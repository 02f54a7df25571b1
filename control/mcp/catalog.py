"""The tool catalog: every registered tool as one app lists it, its schemas from that app's OpenAPI document.

Apart from the server (``control.mcp.server``) so that what lists the tools without serving them (the app at
start, ``/llms.txt``) does not import the MCP SDK: its types load on the first use of the catalog, the SDK's
server on the first call to /mcp (``control.mcp.mount``), which spares every control process that never
serves /mcp about 0.7 s of CPU at start.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import control.mcp.tools  # noqa: F401 - registers every tool: a catalog built before they are has none
from control.mcp.registry import TOOLS, ToolSpec
from control.mcp.schemas import (
    find_operation,
    integer_text,
    operation_input_schema,
    operation_parameters,
    own_schemas,
    plain_parameters,
    record_input_schema,
)

if TYPE_CHECKING:
    import mcp_types as types

__all__ = ("Catalog", "catalog")


class Catalog:
    """The tools as one app lists them: built from the registry and that app's OpenAPI document, on first use
    (generating the document costs a tenth of a second, which an app that never serves /mcp need not pay)."""

    def __init__(self, specs: dict[str, ToolSpec]) -> None:
        self.specs = specs
        self._document: Callable[[], dict[str, Any]] | None = None
        self._tools: dict[str, types.Tool] | None = None
        self._routes: dict[str, tuple[str, str]] = {}
        self._parameters: dict[str, dict[str, dict[str, Any]]] = {}

    def attach(self, document: Callable[[], dict[str, Any]]) -> None:
        """Where the OpenAPI document comes from once the catalog is first needed."""
        self._document = document

    def bind(self, document: dict[str, Any]) -> None:
        """Builds every tool; listed in the document's order of their operations, tools of their own last."""
        import mcp_types as types  # the SDK's types on first use (see the module docstring)

        order = [op.get("operationId") for item in document["paths"].values() for op in item.values()]
        rank = {operation: i for i, operation in enumerate(order)}
        tools, routes, parameters = {}, {}, {}
        for spec in sorted(self.specs.values(), key=lambda s: rank.get(s.operation, len(rank))):
            description = spec.doc
            if spec.operation is None:
                input_schema = record_input_schema(spec.arguments)
                parameters[spec.name] = plain_parameters(spec.arguments)
            else:
                method, path, operation = find_operation(document, spec.operation)
                routes[spec.name] = (method.upper(), path)
                checked = operation_parameters(document, spec.operation)
                for name, (_, own) in integer_text(checked, own_schemas(spec.arguments)).items():
                    checked[name] = own  # ``1`` or ``"1"``: the tool's decoder and service check it
                parameters[spec.name] = checked
                input_schema = operation_input_schema(document, spec.operation, spec.arguments)
                description = _described(spec, operation.get("description"))
            tools[spec.name] = types.Tool(
                name=spec.name,
                title=spec.title,
                description=description,
                input_schema=input_schema,  # no output schema: ADR 0092
                annotations=types.ToolAnnotations(
                    title=spec.title,
                    read_only_hint=spec.read_only,
                    destructive_hint=spec.destructive,
                    idempotent_hint=spec.idempotent,
                    open_world_hint=spec.open_world,
                ),
            )
        self._tools, self._routes, self._parameters = tools, routes, parameters

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

    def parameters(self, name: str) -> dict[str, dict[str, Any]]:
        """A mirrored tool's arguments that are its /v1 operation's path and query parameters → their schemas
        (``control.mcp.parameters`` checks them as /v1 does); for a tool of its own, its plain arguments."""
        self._built()
        return self._parameters.get(name, {})

    def required(self, name: str) -> frozenset[str]:
        """The arguments a tool's input schema requires (an optional parameter given as null is not given)."""
        found = self._built().get(name)
        return frozenset(found.input_schema.get("required", ())) if found is not None else frozenset()

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


def catalog() -> Catalog:
    """A catalog of every registered tool (one per app: each binds its own document)."""
    return Catalog(TOOLS)
