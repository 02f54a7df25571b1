"""Replay a captured event to any URL, and send a test event to a destination; each records a delivery.

Replay (docs/reference/delivery.md): by default the captured request is resent as it was, signature header
included, and no ``x-hookyard-*`` header is added (it is the provider's request, again). ``headers`` adds
or overrides; ``preserve_headers: false`` starts from the captured ``content-type`` alone; ``body``
replaces the body. ``resign_with`` recomputes the signature over what is actually sent, in the event's own
provider scheme and header family with a fresh timestamp, keeping the event's own message id (identity
scheme: its idempotency key), with ``shared.signatures.resign``; puts it in
``signature_header``, sets the scheme's id/timestamp headers, and drops the captured signature header it
replaces (stale, it could never verify). ``signature_header`` defaults to the event's own signature header
(``stripe-signature`` for a payments event...), where the provider's library looks, as ``hookyard listen
--resign-with`` signs; an event of no provider scheme is signed with Standard Webhooks (``webhook-id``,
``webhook-timestamp``) and its signature goes in ``x-signature``.

The destination test sends a small JSON event (``type: hookyard.test``) signed as rule deliveries are (the
destination's own secret, Standard Webhooks, unless it turned signing off), with the destination's headers
and the usual ``x-hookyard-*`` ones.

A replay given a ``destination_id`` goes to that destination's URL with its authentication (``auth``,
``tls_ca``: ``control.delivery.auth``); a replay to a URL never carries credentials, whichever destination
has that URL. The destination test authenticates as its deliveries do.

Both obey the egress policy and the delivery timeouts, and answer failures of the outbound request in
the outcome (``success: false``, ``error``), never as HTTP errors. Any body goes out and is recorded as
its exact bytes (NUL included); the outcome shows the response body as the delivery record does, text when
it is UTF-8 and base64 otherwise (``response_body_encoding``). A record the database still refuses is
stored reduced (``delivery_records.reduced``) rather than turning a finished request into a 500.

Each is one of the account's outbound sends (``control.support.rate_limits``), charged once the request is
known to be valid, just before it goes out.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from functools import partial
from typing import Any

import asyncpg
import msgspec

from control.db import delivery_records
from control.db.connection import Connection, Row
from control.db.context import Context, Principal
from control.db.faults import describe, is_record_fault
from control.delivery import egress
from control.delivery.auth.authenticator import Authenticator
from control.delivery.auth.material import load_material
from control.delivery.auth.oauth2 import Tokens
from control.delivery.auth.tls import TlsProfiles
from control.delivery.send import Outcome, delivery_row, forwardable, merge, send, signature
from control.delivery.tracing import PROPAGATED, SendSpan
from control.delivery.transforms import unsent
from control.records.destinations import HOP_BY_HOP
from control.records.replay import ReplayRequest, SendOutcome
from control.records.storable import captured_headers, check_text, storable
from control.records.transforms import TransformRecord
from control.service.endpoints import require_event, require_owned, require_write
from control.service.forwards import remember_target
from control.service.transforms import run_once
from control.support import sealing
from control.support.body_encoding import shown_body
from control.support.rate_limits import charge_send
from control.support.url_checks import check_outbound_url
from control.transform.apply import Outgoing, event_context
from shared import ids
from shared.errors import ConflictError, ValidationError
from shared.logs import bind
from shared.signatures import provider_signature_header, resign

__all__ = ("body_expired_error", "replay_event", "test_destination")

log = logging.getLogger("hookyard.control.replay")

_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_VALUE = re.compile(r"[\t\x20-\x7e\x80-\ud7ff\ue000-\U0010ffff]*")
"""A header value: no control characters but tab, and no lone surrogate (it has no UTF-8 bytes to send)."""
_encode = msgspec.json.Encoder().encode
_NO_SCHEME = "x-signature"
"""Where a re-signature goes by default for an event of no provider scheme (the API's documented default)."""


def _header_name(name: str, where: str) -> str:
    if not _TOKEN.fullmatch(name) or len(name) > 256:
        raise ValidationError(f"{where}: {name[:100]!r} is not a valid header name")
    lower = name.lower()
    if lower in HOP_BY_HOP:
        raise ValidationError(f"{where}: {lower} is set by the HTTP connection itself and cannot be given")
    return lower


def _check_headers(headers: Mapping[str, str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, value in headers.items():
        lower = _header_name(name, f"headers.{name}")
        if not _VALUE.fullmatch(value):
            raise ValidationError(
                f"headers.{name}: control characters (CR, LF, NUL...) and lone surrogates are not allowed"
            )
        out[lower] = value
    return out


def _body(text: str) -> bytes:
    """A replacement body as UTF-8; any text JSON can carry, NUL included, except a lone surrogate (only
    a caller that does not decode strict JSON, such as an MCP client's, can send one)."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValidationError("body: must not contain lone UTF-16 surrogates (U+D800 to U+DFFF)") from None


def body_expired_error(event_id: str, expired_at: datetime) -> ConflictError:
    """409 ``body_expired``: the event's body and headers are gone, so there is nothing to send again."""
    at = expired_at.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    return ConflictError(
        f"event {event_id!r}: its body and headers were removed at {at}, after its endpoint's "
        "body_retention_days; the event record stays, but it cannot be replayed or retried",
        code="body_expired",
    )


_TOKENS = Tokens()
_TLS = TlsProfiles()
"""This process's OAuth2 tokens and TLS contexts for replays and destination tests (bounded, as a worker's)."""


async def _send(
    ctx: Context,
    url: str,
    method: str,
    headers: dict[str, str],
    body: bytes,
    span: SendSpan | None = None,
    *,
    destination_id: str | None = None,
    version: str | None = None,
) -> tuple[Outcome, dict[str, Any] | None]:
    """One request; with the destination's authentication when ``version`` (its ``auth_version``) is given."""
    s = ctx.settings
    client = egress.client(
        s.egress, timeout_s=s.deliver_timeout_s, connect_timeout_s=s.deliver_connect_timeout_s, max_connections=1
    )
    if span is not None:
        span.sending(url)
    async with client:
        if destination_id is not None and version is not None:
            authenticator = Authenticator(partial(load_material, ctx), tokens=_TOKENS, tls=_TLS)
            prepared = await authenticator.prepare(destination_id, version)
            if prepared is not None:
                args = (client, prepared, method, url, headers, body)
                return await authenticator.send(*args, total_timeout_s=s.deliver_timeout_s)
        return await send(client, method, url, headers, body, total_timeout_s=s.deliver_timeout_s), None


async def _replay_destination(
    conn: Connection, principal: Principal, endpoint_id: str, destination_id: str, url: str | None
) -> asyncpg.Record:
    """The destination a replay goes to with its authentication: one of the event's endpoint, whose URL the
    replay's ``url`` (if given) repeats exactly, so credentials never go to a URL the destination does not have."""
    row = None
    if ids.is_id(destination_id, "dst"):
        row = await delivery_records.destination_for_account(conn, principal.account_id, destination_id)
    if row is None or row["endpoint_id"] != endpoint_id:
        raise ValidationError(f"destination_id: {destination_id[:100]!r} is not a destination of the event's endpoint")
    if url is not None and url != row["url"]:
        raise ValidationError("url: differs from the destination's url; leave it out to replay to the destination")
    return row


def _span(
    ctx: Context,
    source: str,
    event: Row,
    destination: Row | None,
    method: str,
    url: str,
) -> SendSpan | None:
    """The request's span when tracing is on: a replay's in its event's trace (a child of the event's own
    span), a destination test's in a trace of its own; its ids are bound to this request's log lines."""
    if ctx.tracing is None:
        return None
    attributes: dict[str, Any] = {
        "hookyard.source": source,
        "hookyard.event_id": event["id"],
        "hookyard.endpoint_id": event["endpoint_id"],
        "hookyard.attempt": 1,
    }
    if destination is not None:
        attributes["hookyard.destination_id"] = destination["id"]
    for name in ("provider", "event_type"):
        if event.get(name) is not None:
            attributes[f"hookyard.{name}"] = event[name]
    span = SendSpan(ctx.tracing, parent=event.get("traceparent"), method=method, url=url, attributes=attributes)
    if span.ids is not None:
        bind(trace_id=span.ids[0], span_id=span.ids[1])
    return span


def _names(headers: Mapping[str, str], names: tuple[str, ...]) -> bool:
    return any(name in headers for name in names)


async def _insert(conn: Connection, row: tuple[object, ...], received_at: datetime | None) -> None:
    if received_at is None:
        if not await delivery_records.insert(conn, row):
            log.info("destination test %s: its endpoint was deleted meanwhile; the attempt is not recorded", row[0])
    elif not await delivery_records.insert_for_event(conn, row, received_at):
        log.info("replay %s: its event is no longer stored (erased meanwhile); the attempt is not recorded", row[0])


async def _record(
    conn: Connection,
    outcome: Outcome,
    *,
    endpoint_id: str,
    event_id: str,
    source: str,
    url: str,
    body: bytes,
    destination: Row | None,
    transform: TransformRecord | None = None,
    received_at: datetime | None = None,
    span: SendSpan | None = None,
    auth: dict[str, Any] | None = None,
) -> SendOutcome:
    """Records the attempt and answers its outcome. ``received_at``: the replayed event's, whose record is
    written only while the event is still stored (an erasure may have removed it while the request was out:
    the outcome is answered, and nothing about the erased event is kept)."""
    record = msgspec.to_builtins(transform) if transform is not None else None
    row = delivery_row(
        outcome,
        body,
        endpoint_id=endpoint_id,
        event_id=event_id,
        task_id=None,
        destination_id=destination["id"] if destination else None,
        destination_name=destination["name"] if destination else None,
        destination_url=url,
        rule_id=None,
        source=source,
        attempt=1,
        transform=record,
        trace=span.ids if span is not None else None,
        auth=auth,
    )
    if span is not None:
        span.finish(outcome, delivery_id=row[0], transform=transform.outcome if transform is not None else None)
    try:
        await _insert(conn, row, received_at)
    except Exception as exc:
        if not is_record_fault(exc):
            raise
        log.error("%s of %s: the delivery record was reduced to be stored (%s)", source, event_id, describe(exc))
        await _insert(conn, delivery_records.reduced(row, describe(exc)), received_at)
    response_body, response_encoding = shown_body(outcome.response_body)
    return SendOutcome(
        id=row[0],
        status=outcome.status,
        latency_ms=outcome.latency_ms,
        success=outcome.success,
        sent_headers=storable(outcome.sent_headers),  # as recorded: a captured byte that is not text shows as U+FFFD
        response_body=response_body,
        response_body_encoding=response_encoding,
        error=storable(outcome.error),
        transform=msgspec.convert(storable(record), TransformRecord) if record is not None else None,
        trace_id=span.ids[0] if span is not None and span.ids is not None else None,
        span_id=span.ids[1] if span is not None and span.ids is not None else None,
    )


_NO_TARGET = "url: required (or destination_id, to replay to a destination with its auth)"


async def replay_event(ctx: Context, principal: Principal, event_id: str, data: ReplayRequest) -> SendOutcome:
    require_write(principal)
    if data.url is None and data.destination_id is None:
        raise ValidationError(_NO_TARGET)
    url = None if data.url is None else check_outbound_url(data.url, ctx.settings.egress)
    extra = _check_headers(data.headers)
    chosen = data.signature_header
    chosen_header = _header_name(chosen, "signature_header") if chosen is not msgspec.UNSET else None
    async with ctx.pool.acquire() as conn:
        row = await require_event(conn, principal, event_id)
        if row["body_expired_at"] is not None:
            raise body_expired_error(row["id"], row["body_expired_at"])
        authenticated = None
        if data.destination_id is not None:
            authenticated = await _replay_destination(conn, principal, row["endpoint_id"], data.destination_id, url)
            url = authenticated["url"]
        elif url is None:  # refused above already: without a destination, the request names the url
            raise ValidationError(_NO_TARGET)
        destination = await delivery_records.destination_with_url(conn, row["endpoint_id"], url)
        if authenticated is not None:
            destination = authenticated
    captured = captured_headers(row["headers"], row["headers_base64"])
    body = _body(data.body) if data.body is not None else bytes(row["body"])
    if data.preserve_headers:
        base = forwardable(captured)
    else:
        base = {"content-type": captured["content-type"]} if "content-type" in captured else {}
    headers = merge(base, extra)
    method, transform = row["method"], None
    span = _span(ctx, "replay", row, destination, method, url)
    recorded = partial(
        _record,
        endpoint_id=row["endpoint_id"],
        event_id=row["id"],
        source="replay",
        destination=destination,
        received_at=row["received_at"],
        span=span,
    )
    if data.transform is not None:
        request = Outgoing(method, url, headers, body)
        context = event_context(row, destination)
        result = await run_once(ctx, principal, check_text(data.transform, "transform"), request, context)
        transform = result.record
        if result.request is None:  # skipped or failed: nothing is sent, the replay is recorded as such
            outcome, _, _ = unsent(transform, result.unrun)
            async with ctx.pool.acquire() as conn:
                return await recorded(conn, outcome, url=url, body=b"", transform=transform)
        method, url, headers, body = (
            result.request.method,
            result.request.url,
            result.request.headers,
            result.request.body,
        )
    if data.resign_with is not None:
        signature_header = chosen_header or provider_signature_header(captured, row["provider"]) or _NO_SCHEME
        signed, replaced = resign(
            captured, row["provider"], body, data.resign_with, signature_header=signature_header, url=url, method=method
        )
        if replaced is not None and replaced != signature_header:
            headers.pop(replaced, None)
        headers = merge(headers, signed)
    if span is not None and (destination is None or destination["propagate_trace"]) and not _names(extra, PROPAGATED):
        span.propagate(headers)  # the replay's span, unless the caller set its own context in `headers`
    await charge_send(ctx, principal)
    version = authenticated["auth_version"] if authenticated is not None else None
    outcome, auth = await _send(
        ctx, url, method, headers, body, span, destination_id=data.destination_id, version=version
    )
    if data.url is not None:  # the inbox's replay box starts with the URL last replayed to
        await remember_target(ctx, row["endpoint_id"], data.url)
    async with ctx.pool.acquire() as conn:
        return await recorded(conn, outcome, url=url, body=body, transform=transform, auth=auth)


async def test_destination(ctx: Context, principal: Principal, destination_id: str) -> SendOutcome:
    require_write(principal)
    async with ctx.pool.acquire() as conn:
        row = await require_owned(
            conn,
            principal,
            destination_id,
            kind="dst",
            noun="destination",
            get=delivery_records.destination_for_account,
        )
    event_id = ids.new_id("evt")
    body = _encode(
        {
            "id": event_id,
            "type": "hookyard.test",
            "created_at": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
            "data": {
                "endpoint_id": row["endpoint_id"],
                "destination_id": row["id"],
                "message": "A test event from hookyard: this destination is reachable.",
            },
        }
    )
    headers = merge(
        {"content-type": "application/json", "user-agent": "hookyard"},
        row["headers"],
        signature(event_id, body, sealing.open_destination_secret(ctx, row["id"], row["signing_secret"]))
        if row["sign_deliveries"]
        else None,
        {"x-hookyard-event-id": event_id, "x-hookyard-delivery-attempt": "1", "x-hookyard-test": "true"},
    )
    span = _span(ctx, "manual_test", {"id": event_id, "endpoint_id": row["endpoint_id"]}, row, "POST", row["url"])
    if span is not None and row["propagate_trace"]:
        span.propagate(headers)
    await charge_send(ctx, principal)
    outcome, auth = await _send(
        ctx, row["url"], "POST", headers, body, span, destination_id=row["id"], version=row["auth_version"]
    )
    async with ctx.pool.acquire() as conn:
        return await _record(
            conn,
            outcome,
            endpoint_id=row["endpoint_id"],
            event_id=event_id,
            source="manual_test",
            url=row["url"],
            body=body,
            destination=row,
            span=span,
            auth=auth,
        )
