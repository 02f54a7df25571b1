"""Maps every failure to the error envelope ``{"error": {"code", "message"}}`` with a stable code.

Covers our own ``ServiceError`` tree (its statuses are said here, by class: ``STATUSES``), Litestar's
exceptions (unknown route 404, 405, body-size 413, validation 400, malformed JSON 400), Postgres or Redis
being unavailable (503 ``unavailable`` with ``Retry-After``) and anything unexpected (500
``internal_error``, logged with its traceback, never echoed to the caller).
"""

from __future__ import annotations

import logging
import traceback

from litestar import Request, Response
from litestar.exceptions import HTTPException, SerializationException, ValidationException
from redis.exceptions import RedisError

from control.db.faults import UNAVAILABLE, describe
from control.service.decoding import field_message
from shared.errors import (
    ConflictError,
    ForbiddenError,
    GoneError,
    NotFoundError,
    PayloadTooLargeError,
    RateLimitedError,
    ServiceError,
    UnauthorizedError,
    ValidationError,
    envelope,
)

__all__ = ("EXCEPTION_HANDLERS", "STATUSES", "error_response", "field_messages", "status_of")

log = logging.getLogger("hookyard.control")

_CODES = {
    400: "validation_error",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    410: "gone",
    413: "payload_too_large",
    429: "rate_limited",
    503: "unavailable",
}


STATUSES: dict[type[ServiceError], int] = {
    ValidationError: 400,
    UnauthorizedError: 401,
    ForbiddenError: 403,
    NotFoundError: 404,
    GoneError: 410,
    ConflictError: 409,
    PayloadTooLargeError: 413,
    RateLimitedError: 429,
}
"""The status each ``ServiceError`` class answers with; a subclass answers as its nearest listed ancestor
(``InvalidConditionTree`` is a ``ValidationError``: 400), a bare ``ServiceError`` 400."""


def status_of(exc: ServiceError) -> int:
    return next((STATUSES[cls] for cls in type(exc).__mro__ if cls in STATUSES), 400)


def error_response(status: int, code: str, message: str, headers: dict[str, str] | None = None) -> Response:
    return Response(envelope(code, message), status_code=status, headers=headers, media_type="application/json")


def field_messages(exc: ValidationException) -> str:
    """``name: Expected `str` of length >= 1`` for each problem Litestar reports (a path or query parameter);
    the field always leads the message, worded as the strict body decoder words it
    (``control.service.decoding``)."""
    parts = []
    for item in exc.extra if isinstance(exc.extra, list) else []:
        if not isinstance(item, dict):
            continue
        key, message = item.get("key"), str(item.get("message", "invalid value"))
        if message == "'data'":  # Litestar's KeyError text when there is no body at all
            message = "a JSON object is required, the request body is empty"
        parts.append(field_message(key, message))
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
    status = status_of(exc)
    headers = {"retry-after": str(exc.retry_after_s)} if isinstance(exc, RateLimitedError) else None
    if status == 401:
        headers = {"www-authenticate": 'Bearer realm="hookyard"'}
    return error_response(status, exc.code, exc.message, headers)


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


EXCEPTION_HANDLERS = {
    ServiceError: _service_error,
    HTTPException: _http_exception,
    UnicodeDecodeError: _undecodable,
    **dict.fromkeys(UNAVAILABLE, _unavailable),
    Exception: _internal,
}
