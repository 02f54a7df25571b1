"""Maps every failure to the error envelope ``{"error": {"code", "message"}}`` with a stable code.

Covers our own ``ServiceError`` tree, Litestar's exceptions (unknown route 404, 405, body-size 413,
validation 400, malformed JSON 400), Postgres or Redis being unavailable (503 ``unavailable`` with
``Retry-After``) and anything unexpected (500 ``internal_error``, logged with its traceback, never echoed to
the caller).
"""

from __future__ import annotations

import logging
import traceback

import asyncpg
from litestar import Request, Response
from litestar.exceptions import HTTPException, SerializationException, ValidationException
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

from control.db.faults import describe
from control.records.text import PATTERN_RULES
from shared.errors import RateLimitedError, ServiceError, envelope

__all__ = ("EXCEPTION_HANDLERS", "UNAVAILABLE", "error_response", "field_messages")

log = logging.getLogger("hookyard.control")

_CODES = {
    400: "validation_error",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "payload_too_large",
    429: "rate_limited",
    503: "unavailable",
}


def error_response(status: int, code: str, message: str, headers: dict[str, str] | None = None) -> Response:
    return Response(envelope(code, message), status_code=status, headers=headers, media_type="application/json")


_NAMED_FIELD_MESSAGES = {
    "Object contains unknown field": "unknown field",
    "Object missing required field": "required field is missing",
}
# msgspec says which regex a value missed; the records say what the regex means.
_PATTERN_MESSAGES = {f"Expected `str` matching regex {pattern!r}": rule for pattern, rule in PATTERN_RULES.items()}


def field_messages(exc: ValidationException) -> str:
    """``name: Expected `str` of length >= 1`` for each problem; the field always leads the message. Also
    what the MCP tools say of arguments they decode with the same strict decoder (``control.mcp.arguments``)."""
    parts = []
    for item in exc.extra if isinstance(exc.extra, list) else []:
        if not isinstance(item, dict):
            continue
        key, message = item.get("key"), str(item.get("message", "invalid value"))
        path = message.rsplit(" - at `$", 1)
        where = ""
        if len(path) == 2:
            message, where = path[0], path[1].rstrip("`").lstrip(".")
        named = _NAMED_FIELD_MESSAGES.get(message.split("`", 1)[0].strip())
        if named and "`" in message:  # the problem is a field of the object: name that field, not the object
            field = message.split("`")[1]
            parts.append(f"{where}.{field}: {named}" if where else f"{field}: {named}")
            continue
        key = where or key
        if key in (None, "", "data", "body"):
            key = "body"
        if message == "'data'":  # Litestar's KeyError text when there is no body at all
            message = "a JSON object is required, the request body is empty"
        message = _PATTERN_MESSAGES.get(message, message)
        parts.append(f"{key}: {message}")
    return "; ".join(parts) or str(exc.detail)


def _http_exception(request: Request, exc: HTTPException) -> Response:
    status = exc.status_code
    if isinstance(exc, ValidationException):
        message = field_messages(exc)
    elif status == 400 and isinstance(exc.__cause__, SerializationException):
        # Litestar re-raises msgspec's decode errors ("JSON is malformed: ...", "Input data was truncated")
        message = f"body: malformed JSON ({str(exc.detail).split(': ', 1)[-1]})"
    elif status == 404 and exc.detail in ("Not Found", ""):
        message = f"no route for {request.method} {request.url.path}"
    elif status == 405:
        message = f"method {request.method} is not allowed on {request.url.path}"
    elif status == 413:
        message = "body: request body is too large"
    else:
        message = str(exc.detail)
    headers = {name.lower(): value for name, value in (exc.headers or {}).items()}
    if status == 405 and "allow" in headers:
        # Litestar's router lists every method of the path (from its trie node, unlike its OPTIONS answer,
        # see control.api.allow); sorted here so both answers read alike.
        headers["allow"] = ", ".join(sorted({m.strip() for m in headers["allow"].split(",") if m.strip()}))
    return error_response(status, _CODES.get(status, "http_error"), message, headers)


def _undecodable(request: Request, exc: UnicodeDecodeError) -> Response:
    """msgspec raises this (not a DecodeError, so Litestar passes it on) for invalid UTF-8 inside a JSON string
    of the request body; raised anywhere else it is our own failure."""
    if not any(frame.f_code.co_name == "decode_json" for frame, _ in traceback.walk_tb(exc.__traceback__)):
        return _internal(request, exc)
    return error_response(400, "validation_error", "body: malformed JSON (a string is not valid UTF-8)")


def _service_error(request: Request, exc: ServiceError) -> Response:
    headers = {"retry-after": str(exc.retry_after_s)} if isinstance(exc, RateLimitedError) else None
    if exc.status == 401:
        headers = {"www-authenticate": 'Bearer realm="hookyard"'}
    return error_response(exc.status, exc.code, exc.message, headers)


def _unavailable(request: Request, exc: Exception) -> Response:
    """Postgres or Redis away, restarting, refusing or out of connections: the caller's request is fine and
    will work once the store is back, so 503 with ``Retry-After``, never a 500. Logged as one line: an outage
    makes many of these and the workers' logs already tell its story."""
    what = "Redis" if isinstance(exc, RedisError) else "the database"
    log.warning("%s %s: %s unavailable (%s)", request.method, request.url.path, what, describe(exc))
    return error_response(503, "unavailable", f"{what} is unavailable; retry shortly", {"retry-after": "2"})


def _internal(request: Request, exc: Exception) -> Response:
    log.error("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
    return error_response(500, "internal_error", "internal server error; the failure was logged")


UNAVAILABLE: tuple[type[Exception], ...] = (
    # Also what the MCP tools report as `unavailable` (control.mcp.errors).
    OSError,  # refused, reset, and TimeoutError (a pool that could not hand out a connection in time)
    asyncpg.PostgresConnectionError,
    asyncpg.InterfaceError,  # the connection went away under a query
    asyncpg.InternalClientError,  # a pooled connection whose backend was terminated, met mid-protocol
    asyncpg.OperatorInterventionError,  # shutting down, cannot connect now, backend terminated
    asyncpg.InsufficientResourcesError,  # too many connections
    asyncpg.ObjectNotInPrerequisiteStateError,  # the database does not accept connections right now
    asyncpg.TransactionRollbackError,  # deadlock or serialization failure: the same request would succeed
    RedisConnectionError,
    RedisTimeoutError,
)

EXCEPTION_HANDLERS = {
    ServiceError: _service_error,
    HTTPException: _http_exception,
    UnicodeDecodeError: _undecodable,
    **dict.fromkeys(UNAVAILABLE, _unavailable),
    Exception: _internal,
}
