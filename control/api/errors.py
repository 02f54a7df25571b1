"""Maps every failure to the error envelope ``{"error": {"code", "message"}}`` with a stable code.

Covers our own ``ServiceError`` tree (its statuses are said here, by class: ``STATUSES``), Litestar's
exceptions (unknown route 404, 405, body-size 413, validation 400, malformed JSON 400), Postgres or Redis
being unavailable (503 ``unavailable`` with ``Retry-After``) and anything unexpected (500
``internal_error``, logged with its traceback, never echoed to the caller).
"""

from __future__ import annotations

import logging
import re
import traceback
from typing import Any

from litestar import Request, Response
from litestar.exceptions import HTTPException, SerializationException, ValidationException
from litestar.types import ExceptionHandlersMap
from litestar.utils.scope.state import ScopeState
from redis.exceptions import RedisError

from control.api.empty_segments import empty_segment
from control.db.faults import UNAVAILABLE, describe
from control.support.parameter_messages import out_of_range, query_text
from control.support.request_decoding import field_message
from shared.errors import (
    ConflictError,
    ForbiddenError,
    GoneError,
    NotFoundError,
    PayloadTooLargeError,
    RateLimitedError,
    ServiceError,
    UnauthorizedError,
    UnsupportedEncodingError,
    ValidationError,
    body_too_large,
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
    UnsupportedEncodingError: 415,
    RateLimitedError: 429,
}
"""The status each ``ServiceError`` class answers with; a subclass answers as its nearest listed ancestor
(``InvalidConditionTree`` is a ``ValidationError``: 400), a bare ``ServiceError`` 400."""


def status_of(exc: ServiceError) -> int:
    return next((STATUSES[cls] for cls in type(exc).__mro__ if cls in STATUSES), 400)


def error_response(status: int, code: str, message: str, headers: dict[str, str] | None = None) -> Response[Any]:
    return Response(envelope(code, message), status_code=status, headers=headers, media_type="application/json")


def field_messages(exc: ValidationException, request: Request[Any, Any, Any] | None = None) -> str:
    """``name: problem`` for each problem Litestar reports (a path or query parameter); the field always leads
    the message (``control.support.request_decoding.field_message``; msgspec's words where no value is at
    hand). An integer past one of its bounds says the whole range (``_range``)."""
    parts = []
    for item in exc.extra if isinstance(exc.extra, list) else []:
        if not isinstance(item, dict):
            continue
        key, message = item.get("key"), str(item.get("message", "invalid value"))
        if message == "'data'":  # Litestar's KeyError text when there is no body at all
            message = "a JSON object is required, the request body is empty"
        elif request is not None and isinstance(key, str) and _BOUND.fullmatch(message):
            ranged = _range(request, key)
            if ranged is not None:
                parts.append(ranged)
                continue
        parts.append(field_message(key, message))
    return "; ".join(parts) or str(exc.detail)


_BOUND = re.compile(r"Expected `int`(?: [<>]=? -?\d+|, got `\w+`)")
"""msgspec's words for a bounded integer parameter out of its range or not an integer at all (``timeout=abc``)."""


def _range(request: Request[Any, Any, Any], key: str) -> str | None:
    """``timeout: must be an integer from 1 to 55 (seconds to wait), got 60`` for a query parameter declared with both
    bounds: msgspec names only the bound crossed (``Expected `int` <= 55``), which leaves the caller guessing
    the other one, or only the type (``Expected `int`, got `str```), which names neither.
    Read from the parameter's own declaration, so the message and the document cannot differ; worded by
    ``control.support.parameter_messages``, as a tool's argument is (``control.mcp.parameters``)."""
    handler = request.scope.get("route_handler")
    parameters = getattr(getattr(handler, "parsed_fn_signature", None), "parameters", {})
    found = parameters.get(key)
    declared = getattr(found, "kwarg_definition", None)
    low, high = getattr(declared, "ge", None), getattr(declared, "le", None)
    if low is None or high is None:
        return None
    given = request.query_params.get(key)
    shown = None if given is None else query_text(given)
    return out_of_range(key, low, high, getattr(declared, "description", None), shown)


def _why_not_json(request: Request[Any, Any, Any]) -> str:
    """Why a body that is not JSON likely is not: of another media type (a form, multipart, text); nothing when
    it does not say so (a compressed body never gets here: ``control.api.content_encoding``). The media type
    is named only for a body that is no attempt at JSON: curl's ``-d`` labels every body a form, so a README
    command with a trailing comma was told its Content-Type, not its comma."""
    media = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if media and media != "application/json" and not media.endswith("+json") and not _json_like(request):
        return f"; a body must be JSON (Content-Type: application/json), this one is {media[:80]}"
    return ""


_JSON_START = re.compile(
    rb'[{\["0-9]|-(?![^0-9])|(?:t(?:r(?:ue?)?)?|f(?:a(?:l(?:se?)?)?)?|n(?:u(?:ll?)?)?)(?=[\s,\]}:]|$)'
)
"""The start of a JSON value: ``{``, ``[``, ``"``, a number (``-`` then a digit), or a word that begins
``true``, ``false`` or ``null``. A form (``name=x``) or multipart (``--boundary``) body starts otherwise,
though its first character alone would have read as a ``null`` or a negative number."""


def _json_like(request: Request[Any, Any, Any]) -> bool:
    """The body (as Litestar keeps it once read) starts as a JSON value would, past any white space."""
    body = ScopeState.from_scope(request.scope).body
    return isinstance(body, bytes) and _JSON_START.match(body.lstrip()[:16]) is not None


def _http_exception(request: Request[Any, Any, Any], exc: HTTPException) -> Response[Any]:
    status = exc.status_code
    if status in (404, 405) and (empty := empty_segment(request.scope)) is not None:
        return error_response(404, _CODES[404], empty)  # the collapsed path matched no route, or not this method
    if isinstance(exc, ValidationException):
        message = field_messages(exc, request)
    elif status == 400 and isinstance(exc.__cause__, SerializationException):
        # Litestar re-raises msgspec's decode errors ("JSON is malformed: ...", "Input data was truncated")
        message = f"body: malformed JSON ({str(exc.detail).split(': ', 1)[-1]}){_why_not_json(request)}"
    elif status == 404 and exc.detail in ("Not Found", ""):
        message = f"no route for {request.method} {request.url.path}"
    elif status == 405:
        message = f"method {request.method} is not allowed on {request.url.path}"
    elif status == 413:
        message = body_too_large(getattr(request.app, "request_max_body_size", None))
    else:
        message = str(exc.detail)
    headers = {name.lower(): value for name, value in (exc.headers or {}).items()}
    if status == 405 and "allow" in headers:
        # Litestar's router lists every method of the path (from its trie node, unlike its OPTIONS answer,
        # see control.api.allow); sorted here so both answers read alike.
        headers["allow"] = ", ".join(sorted({m.strip() for m in headers["allow"].split(",") if m.strip()}))
    return error_response(status, _CODES.get(status, "http_error"), message, headers)


def _undecodable(request: Request[Any, Any, Any], exc: UnicodeDecodeError) -> Response[Any]:
    """msgspec raises this (not a DecodeError, so Litestar passes it on) for invalid UTF-8 inside a JSON string
    of the request body; raised anywhere else it is our own failure."""
    if not any(frame.f_code.co_name == "decode_json" for frame, _ in traceback.walk_tb(exc.__traceback__)):
        return _internal(request, exc)
    return error_response(400, "validation_error", "body: malformed JSON (a string is not valid UTF-8)")


def _service_error(request: Request[Any, Any, Any], exc: ServiceError) -> Response[Any]:
    status = status_of(exc)
    headers = {"retry-after": str(exc.retry_after_s)} if isinstance(exc, RateLimitedError) else None
    if status == 401:
        headers = {"www-authenticate": 'Bearer realm="hookyard"'}
    if status == 415:  # RFC 9110: the codings that are taken
        headers = {"accept-encoding": "identity"}
    return error_response(status, exc.code, exc.message, headers)


def _unavailable(request: Request[Any, Any, Any], exc: Exception) -> Response[Any]:
    """Postgres or Redis away, restarting, refusing or out of connections: the caller's request is fine and
    will work once the store is back, so 503 with ``Retry-After``, never a 500. Logged as one line: an outage
    makes many of these and the workers' logs already tell its story."""
    what = "Redis" if isinstance(exc, RedisError) else "the database"
    log.warning("%s %s: %s unavailable (%s)", request.method, request.url.path, what, describe(exc))
    return error_response(503, "unavailable", f"{what} is unavailable; retry shortly", {"retry-after": "2"})


def _internal(request: Request[Any, Any, Any], exc: Exception) -> Response[Any]:
    log.error("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
    return error_response(500, "internal_error", "internal server error; the failure was logged")


EXCEPTION_HANDLERS: ExceptionHandlersMap = {
    ServiceError: _service_error,
    HTTPException: _http_exception,
    UnicodeDecodeError: _undecodable,
    **dict.fromkeys(UNAVAILABLE, _unavailable),
    Exception: _internal,
}
