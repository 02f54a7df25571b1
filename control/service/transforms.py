"""Transforms as the services use them: checked on write, run once for a replay, and the dry run.

Rule deliveries run a destination's transform in the deliver worker (``control.delivery.transforms``). A
replay's transform and a dry run are one call each. Every call runs in a sandbox process of this process's
pool (``control.transform.pool``), in the caller's account's share of it: V8 never runs in the control
plane, and what a transform does to its sandbox process fails only its own call.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import msgspec

from control.db import delivery_records
from control.db.context import Context, Principal
from control.delivery.send import forwardable, merge
from control.records.storable import captured_headers, check_text
from control.records.transforms import (
    TransformError,
    TransformRequest,
    TransformTest,
    TransformTestResult,
)
from control.service.endpoints import require_event
from control.transform.apply import Call, Outgoing, Result, apply, event_context, view
from control.transform.pool import pool_for
from control.transform.wire import MAX_SOURCE, Input, Problem, Run
from shared import ids
from shared.errors import ForbiddenError, NotATransformError, NotFoundError, ValidationError

__all__ = ("caller", "check_transform", "run_once", "test_transform")

MAX_DEPTH = 128
"""Levels a dry run's given ``request.body`` may nest."""
_NOWHERE = "https://destination.invalid/"
"""The URL a dry run without a destination shows: path ``/``, no query."""
_encode = msgspec.json.Encoder().encode
_NO_EVENT: dict[str, Any] = {
    "event": {"id": None, "provider": None, "event_type": None, "received_at": None, "labels": []},
    "destination": None,
}


def _line(error: Problem | NotATransformError) -> str:
    return f"line {error.line}: {error.message}" if error.line is not None else error.message


def caller(ctx: Context, source: str, *, account: str, key: str) -> Call:
    """One call of ``source`` at a time, in ``account``'s share of this process's sandbox pool; ``key``
    (a destination, or the account's dry runs) is what a run of stopped calls slows down."""
    pool = pool_for(ctx.settings)

    async def call(payload: Input) -> Run | Problem:
        return await pool.run(source, payload, account=account, key=key)

    return call


async def check_transform(
    ctx: Context, principal: Principal, source: str | None, *, where: str = "transform"
) -> str | None:
    """The source when it is a transform (it compiles, and loading it defines ``handler``), None for none;
    ValidationError naming ``where`` and the line otherwise."""
    if source is None:
        return None
    check_text(source, where)
    if len(source) > MAX_SOURCE:
        raise ValidationError(f"{where}: longer than {MAX_SOURCE} characters")
    problem = await pool_for(ctx.settings).check(source, account=principal.account_id)
    if problem is not None:
        raise ValidationError(f"{where}: {_line(problem)}")
    return source


async def run_once(
    ctx: Context,
    principal: Principal,
    source: str,
    request: Outgoing,
    context: Mapping[str, Any],
    *,
    where: str = "transform",
) -> Result:
    """One call of ``source`` on ``request``; a source that does not compile is a ValidationError naming
    ``where``."""
    account = principal.account_id
    try:
        return await apply(caller(ctx, source, account=account, key="once:" + account), request, context)
    except NotATransformError as exc:
        raise ValidationError(f"{where}: {_line(exc)}") from None


def _check_body(body: Any, max_bytes: int) -> None:
    """A given body nests at most ``MAX_DEPTH`` deep and is at most ``max_bytes`` as JSON (a webhook's
    largest body): walked without recursion, so no depth reaches Python's stack."""
    stack = [(body, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict | list):
            if depth > MAX_DEPTH:
                raise ValidationError(f"request.body: nested deeper than {MAX_DEPTH} levels")
            stack.extend((v, depth + 1) for v in (value.values() if isinstance(value, dict) else value))
    size = len(body.encode("utf-8", "surrogatepass")) if isinstance(body, str) else len(_encode(body))
    if size > max_bytes:
        raise ValidationError(f"request.body: larger than {max_bytes} bytes (the largest webhook body accepted)")


def _check_request(request: TransformRequest) -> None:
    """Every string of a given request is text (a body that is not a string is JSON, text already)."""
    check_text(request.method, "request.method")
    check_text(request.path, "request.path")
    check_text(request.query, "request.query")
    for name, value in request.headers.items():
        check_text(name, "request.headers")
        check_text(value, f"request.headers.{name}")
    check_text(request.body, "request.body")


def _given(request: TransformRequest, url: str) -> Outgoing:
    """The given request, to the origin of ``url``."""
    headers = {name.lower(): value for name, value in request.headers.items()}
    body = request.body
    if isinstance(body, str):
        data = body.encode("utf-8", "surrogatepass")
    elif body is None:
        data = b""
    else:
        data = _encode(body)
        headers.setdefault("content-type", "application/json")
    query = request.query.removeprefix("?")
    path = request.path if request.path.startswith("/") else "/" + request.path
    origin = urlunsplit((*urlsplit(url)[:2], "", "", ""))
    return Outgoing(
        method=request.method.upper(), url=origin + path + (f"?{query}" if query else ""), headers=headers, body=data
    )


async def _stored(ctx: Context, principal: Principal, data: TransformTest) -> tuple[Outgoing, dict[str, Any]]:
    """The request a delivery of the stored event would send (to ``destination_id``'s URL with its headers,
    or to no URL in particular), and its context."""
    event_id = data.event_id or ""
    async with ctx.pool.acquire() as conn:
        row = await require_event(conn, principal, event_id, field="event_id")
        destination = None
        if data.destination_id is not None:
            if ids.is_id(data.destination_id, "dst"):
                destination = await delivery_records.destination_for_account(
                    conn, principal.account_id, data.destination_id
                )
            if destination is None or destination["endpoint_id"] != row["endpoint_id"]:
                raise NotFoundError(
                    f"destination_id: destination {data.destination_id!r} not found on the event's endpoint"
                )
    headers = merge(
        forwardable(captured_headers(row["headers"], row["headers_base64"])),
        destination["headers"] if destination else None,
    )
    url = destination["url"] if destination else _NOWHERE
    request = Outgoing(method=row["method"], url=url, headers=headers, body=bytes(row["body"]))
    return request, event_context(row, destination)


async def test_transform(ctx: Context, principal: Principal, data: TransformTest) -> TransformTestResult:
    """Runs ``data.transform`` once and answers what it returned; sends nothing, stores nothing. It runs the
    caller's code on the service's sandbox, so a read-only credential may not."""
    if principal.read_only:
        raise ForbiddenError("this API key is read-only: a dry run runs code, which takes a key that may write")
    check_text(data.transform, "transform")
    check_text(data.event_id, "event_id")
    check_text(data.destination_id, "destination_id")
    if data.request is not None:
        _check_body(data.request.body, ctx.settings.max_body_bytes)
        _check_request(data.request)
    if data.event_id is None and data.request is None:
        raise ValidationError("event_id: give event_id (a stored event), request, or both")
    if data.destination_id is not None and data.event_id is None:
        raise ValidationError("destination_id: only with event_id (a destination of the event's endpoint)")
    request, context = Outgoing("POST", _NOWHERE, {}, b""), _NO_EVENT
    if data.event_id is not None:
        request, context = await _stored(ctx, principal, data)
    if data.request is not None:  # the given request, sent where the event's would go
        request = _given(data.request, request.url)
    account = principal.account_id
    try:
        result = await apply(caller(ctx, data.transform, account=account, key="once:" + account), request, context)
    except NotATransformError as exc:
        error = TransformError(message=exc.message, line=exc.line)
        return TransformTestResult(
            request=None, skipped=False, logs=[], logs_truncated=False, error=error, duration_ms=0
        )
    record = result.record
    shown = None
    if result.request is not None:
        fields, _ = view(result.request)
        shown = TransformRequest(**fields)
    return TransformTestResult(
        request=shown,
        skipped=record.outcome == "skipped",
        logs=record.logs,
        logs_truncated=record.logs_truncated,
        error=record.error,
        duration_ms=record.duration_ms,
    )
