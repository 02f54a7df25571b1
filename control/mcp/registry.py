"""The tool registry: ``@tool`` turns a thin async adapter over a service function into an MCP tool.

A tool module writes, per operation, what only it knows: the /v1 operation it mirrors, its hints, and the
call into the service layer. Everything else is derived, so nothing is stated twice:

- the name is the function's (snake_case verbs; for a /v1 operation, its ``operationId`` in snake_case:
  ``ListEndpoints`` is ``list_endpoints``, checked when the tool registers);
- the arguments are the function's parameters after ``call``: plain ones (path and query parameters) are
  tool arguments of their own, and a parameter typed with a request record (a msgspec Struct) contributes
  that record's fields, decoded strictly into it as the /v1 body is (``control.mcp.arguments``);
- the input schema is the /v1 operation's, from the app's OpenAPI document, or for a tool without one
  the argument records' (``control.mcp.schemas``); the output schema is the return type's;
- the one-line summary (the tool list in /llms.txt) is the docstring's first paragraph; the description is,
  for a /v1 operation that has one, that operation's description followed by the docstring's further
  paragraphs (what only the tool has: ``timed_out`` instead of a 204...), else the whole docstring. So a
  tool's docstring says in one line what the operation's description says in full, and a parameter's
  meaning is its schema's ``description``, stated there only (tests/onboarding/test_tool_descriptions.py).

Adding a tool is a decorated function in a module of ``control.mcp.tools``.
"""

from __future__ import annotations

import inspect
import re
import typing
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import msgspec
from litestar.datastructures import State

from control.db.context import Context, Principal
from control.mcp.arguments import Arguments

__all__ = ("TOOLS", "Call", "ToolSpec", "snake_case", "tool")


@dataclass(frozen=True, slots=True)
class Call:
    """What a tool is handed: the process's Context, the authenticated caller, and the app's state (the
    long-poll ``wakeups`` live there)."""

    ctx: Context
    principal: Principal
    state: State


@dataclass(frozen=True, slots=True)
class ToolSpec:
    name: str
    summary: str
    """One line: the docstring's first paragraph."""
    doc: str
    """The whole docstring, summary included."""
    operation: str | None
    """The /v1 ``operationId`` this tool is the MCP form of; None for a tool of its own."""
    read_only: bool
    destructive: bool
    idempotent: bool
    open_world: bool
    """True when the tool reaches beyond hookyard (an outbound request to a URL the caller chose)."""
    arguments: Arguments
    output: type[msgspec.Struct]
    fn: Callable[..., Awaitable[msgspec.Struct]]

    @property
    def title(self) -> str:
        return self.name.replace("_", " ").capitalize()


TOOLS: dict[str, ToolSpec] = {}
"""Every registered tool by name, in registration order (the order tools/list answers in)."""


def snake_case(operation_id: str) -> str:
    """``ListEndpoints`` → ``list_endpoints``: how a /v1 operation's tool is named."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", operation_id).lower()


def tool(
    operation: str | None = None,
    *,
    read_only: bool = False,
    destructive: bool = False,
    idempotent: bool = False,
    open_world: bool = False,
) -> Callable[[Callable[..., Awaitable[Any]]], Callable[..., Awaitable[Any]]]:
    """Registers ``fn(call, ...) -> Struct`` as a tool. ``read_only`` implies idempotent and not destructive;
    the hints are MCP's ``readOnlyHint``, ``destructiveHint``, ``idempotentHint`` and ``openWorldHint``."""

    def register(fn: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        name = fn.__name__
        if operation is not None and snake_case(operation) != name:
            raise ValueError(f"tool {name!r} mirrors {operation}: name it {snake_case(operation)!r}")
        if name in TOOLS:
            raise ValueError(f"tool {name!r} is registered twice")
        doc = inspect.cleandoc(fn.__doc__ or "")
        if not doc:
            raise ValueError(f"tool {name!r} needs a docstring: it is the tool's description")
        hints = typing.get_type_hints(fn, include_extras=True)  # an argument's description is in Annotated
        output = hints.pop("return")
        if not (isinstance(output, type) and issubclass(output, msgspec.Struct)):
            raise TypeError(f"tool {name!r} must return a msgspec Struct, not {output!r}")
        TOOLS[name] = ToolSpec(
            name=name,
            summary=" ".join(doc.split("\n\n", 1)[0].split()),
            doc=doc,
            operation=operation,
            read_only=read_only,
            destructive=destructive and not read_only,
            idempotent=idempotent or read_only,
            open_world=open_world,
            arguments=Arguments.of(fn, hints),
            output=output,
            fn=fn,
        )
        return fn

    return register
