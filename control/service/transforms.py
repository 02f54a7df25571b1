"""Transforms as the services use them: checked on write, run once for a replay, and the dry run.

Rule deliveries run a destination's transform in the deliver worker (``control.workers.transforms``), each
version compiled once. A replay's transform and a dry run are one call each: compiled in an isolate of their
own and closed after it (a few milliseconds), so nothing of one caller's code stays in the control plane.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import msgspec

from control.db import delivery_records
from control.db import events as db_events
from control.delivery.send import Outcome, forwardable, merge
from control.records.storable import captured_headers, check_text
from control.records.transforms import (
    TransformError,
    TransformRecord,
    TransformRequest,
    TransformTest,
    TransformTestResult,
)
from control.service import Context, Principal
from control.service.endpoints import require_endpoint
from control.transform.apply import Outgoing, Result, apply, view
from control.transform.sandbox import MAX_SOURCE, Problem, Sandbox, check
from shared import ids
from shared.errors import NotFoundError, ValidationError

__all__ = ("check_transform", "event_context", "run_once", "test_transform", "unsent")

_NOWHERE = "https://destination.invalid/"
"""The URL a dry run without a destination shows: path ``/``, no query."""
_encode = msgspec.json.Encoder().encode
_NO_EVENT: dict[str, Any] = {
    "event": {"id": None, "provider": None, "event_type": None, "received_at": None, "labels": []},
    "destination": None,
}


def _line(error: Problem) -> str:
    return f"line {error.line}: {error.message}" if error.line is not None else error.message


async def check_transform(source: str | None, *, where: str = "transform") -> str | None:
    """The source when it is a transform (it compiles, and loading it defines ``handler``), None for none;
    ValidationError naming ``where`` and the line otherwise."""
    if source is None:
        return None
    check_text(source, where)
    if len(source) > MAX_SOURCE:
        raise ValidationError(f"{where}: longer than {MAX_SOURCE} characters")
    problem = await check(source)
    if problem is not None:
        raise ValidationError(f"{where}: {_line(problem)}")
    return source


def _iso(at: datetime) -> str:
    return at.isoformat().replace("+00:00", "Z")


def event_context(
    event: Mapping[str, Any], destination: Mapping[str, Any] | None, *, event_id: str | None = None
) -> dict[str, Any]:
    """``context``: the event (id, provider, event_type, received_at, labels) and the destination (id, name)."""
    return {
        "event": {
            "id": event_id or event["id"],
            "provider": event["provider"],
            "event_type": event["event_type"],
            "received_at": _iso(event["received_at"]) if event["received_at"] else None,
            "labels": event["labels"] or [],
        },
        "destination": {"id": destination["id"], "name": destination["name"]} if destination else None,
    }


async def run_once(source: str, request: Outgoing, context: Mapping[str, Any], *, where: str = "transform") -> Result:
    """One call of ``source`` on ``request``, in an isolate made for it; a source that does not compile is a
    ValidationError naming ``where``."""
    sandbox = Sandbox.compile(source)
    if isinstance(sandbox, Problem):
        raise ValidationError(f"{where}: {_line(sandbox)}")
    try:
        return await apply(sandbox, request, context)
    finally:
        sandbox.close()


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
        row = (
            await db_events.get_for_account(conn, principal.account_id, event_id)
            if ids.is_id(event_id, "evt")
            else None
        )
        if row is None:
            raise NotFoundError(f"event_id: event {event_id!r} not found")
        await require_endpoint(conn, principal, row["endpoint_id"])
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
    """Runs ``data.transform`` once and answers what it returned; sends nothing, stores nothing (so a
    read-only credential, such as an inbox link's, may run it)."""
    check_text(data.transform, "transform")
    check_text(data.event_id, "event_id")
    check_text(data.destination_id, "destination_id")
    if data.request is not None:
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
    sandbox = Sandbox.compile(data.transform)
    if isinstance(sandbox, Problem):
        error = TransformError(message=sandbox.message, line=sandbox.line)
        return TransformTestResult(
            request=None, skipped=False, logs=[], logs_truncated=False, error=error, duration_ms=0
        )
    try:
        result = await apply(sandbox, request, context)
    finally:
        sandbox.close()
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


def unsent(record: TransformRecord) -> tuple[Outcome, str, str | None]:
    """The outcome of an attempt the transform kept from being sent, the task's status and its error:
    skipped is done (succeeded); failed is failed for good, neither retried (the same input gives the same
    result: retry it after changing the code) nor counted against the destination's circuit."""
    if record.outcome == "skipped":
        return Outcome(status=None, latency_ms=0, sent_headers={}), "succeeded", None
    error = record.error
    where = f" (line {error.line})" if error is not None and error.line is not None else ""
    text = f"transform failed: {error.message if error else 'unknown error'}{where}"
    return Outcome(status=None, latency_ms=0, sent_headers={}, error=text, permanent=True), "failed", text
