"""Delivery attempts: an endpoint's newest-first list, and the record shape shared with the event reads."""

from __future__ import annotations

import asyncpg
import msgspec

from control.db import deliveries as db_deliveries
from control.db.context import Context, Principal
from control.records.deliveries import AuthRecord, Delivery, DeliveryList
from control.records.transforms import TransformRecord
from control.service.endpoints import require_endpoint
from control.support.body_encoding import shown_body
from control.support.page_cursors import decode_cursor, encode_cursor
from control.support.parameter_messages import check_limit, not_one_of
from shared import ids
from shared.errors import ValidationError

__all__ = ("SOURCES", "delivery_record", "list_deliveries")

SOURCES = ("rule", "replay", "manual_test", "listen")


def delivery_record(row: asyncpg.Record) -> Delivery:
    """The public shape of a deliveries row: bodies are bytes, shown as text or base64 (``shown_body``)."""
    fields = dict(row)
    fields["request_body"], fields["request_body_encoding"] = shown_body(fields["request_body"])
    fields["response_body"], fields["response_body_encoding"] = shown_body(fields["response_body"])
    if fields.get("transform") is not None:
        fields["transform"] = msgspec.convert(fields["transform"], TransformRecord)
    if fields.get("auth") is not None:
        fields["auth"] = msgspec.convert(fields["auth"], AuthRecord)
    return Delivery(**fields)


async def list_deliveries(
    ctx: Context,
    principal: Principal,
    endpoint_id: str,
    *,
    success: bool | None = None,
    source: str | None = None,
    limit: int = 20,
    cursor: str | None = None,
    destination_id: str | None = None,
) -> DeliveryList:
    """Newest first; ``success=False`` lists the failures, ``source`` one kind of attempt, ``destination_id``
    the attempts to one destination (also one deleted since: its attempts stay in the endpoint's list)."""
    if source is not None and source not in SOURCES:
        raise ValidationError(not_one_of("source", SOURCES, source))
    if destination_id is not None and not ids.is_id(destination_id, "dst"):
        raise ValidationError(f"destination_id: {destination_id[:100]!r} is not a destination id (dst_ and a ULID)")
    check_limit(limit, 100)
    after = decode_cursor("dlv", cursor, endpoint_id) if cursor else None
    async with ctx.pool.acquire() as conn:
        await require_endpoint(conn, principal, endpoint_id)
        rows = await db_deliveries.page(
            conn,
            endpoint_id,
            success=success,
            source=source,
            limit=limit + 1,
            after=after,
            destination_id=destination_id,
        )
    more, rows = len(rows) > limit, rows[:limit]
    next_cursor = encode_cursor("dlv", rows[-1]["created_at"], rows[-1]["id"], endpoint_id) if more else None
    return DeliveryList(deliveries=[delivery_record(r) for r in rows], next_cursor=next_cursor)
