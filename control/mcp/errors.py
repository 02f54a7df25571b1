"""Tool results from failures: the error envelope of /v1, carried in a tool error.

MCP has two kinds of failure. A JSON-RPC error means the call itself was malformed (an unknown tool): the
client raises. A tool result with ``isError: true`` is an answer the agent reads and acts on, which is what
a refused request is. So every failure of a known tool becomes such a result, whose text is the very
envelope /v1 answers with, ``{"error": {"code", "message"}}`` (and its structured content the same
object), with the same stable code:

- ``shared.errors.ServiceError`` (validation, not found, forbidden, conflict...): its code and message;
- Postgres or Redis away (``control.db.faults.UNAVAILABLE``): ``unavailable``, retry shortly (503 on /v1);
- anything else: ``internal_error``, logged with its traceback and never echoed (500 on /v1).
"""

from __future__ import annotations

import logging

import mcp_types as types
import msgspec
from redis.exceptions import RedisError

from control.db.faults import UNAVAILABLE, describe
from shared.errors import ServiceError, envelope

__all__ = ("error_result", "failure_result")

log = logging.getLogger("hookyard.control.mcp")


def error_result(code: str, message: str) -> types.CallToolResult:
    body = msgspec.to_builtins(envelope(code, message))
    text = msgspec.json.encode(body).decode()
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)], structured_content=body, is_error=True
    )


def failure_result(tool: str, exc: Exception) -> types.CallToolResult:
    """The tool error for ``exc``, raised by tool ``tool``."""
    if isinstance(exc, ServiceError):
        return error_result(exc.code, exc.message)
    if isinstance(exc, UNAVAILABLE):
        what = "Redis" if isinstance(exc, RedisError) else "the database"
        log.warning("tool %s: %s unavailable (%s)", tool, what, describe(exc))
        return error_result("unavailable", f"{what} is unavailable; retry shortly")
    log.error("unhandled error in tool %s", tool, exc_info=exc)
    return error_result("internal_error", "internal server error; the failure was logged")
