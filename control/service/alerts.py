"""Alert destinations (per account) and the record of alerts: what fired, when, for what, and each attempt.

Alert destinations are checked as destinations are (``check_outbound_url``): shape and internal literals
here, what a name resolves to by the egress policy when an alert is sent. Each has its own Standard Webhooks
signing secret, sealed at rest and shown only on create and rotation. /v1 and the MCP tools call these same
functions.
"""

from __future__ import annotations

from collections.abc import Sequence

import asyncpg
import msgspec

from control.db import alert_destinations as db_destinations
from control.db import alerts as db_alerts
from control.db.connection import Connection
from control.db.context import Context, Principal
from control.records.alerts import (
    ALERT_TYPES,
    Alert,
    AlertAttempt,
    AlertDestination,
    AlertDestinationCreate,
    AlertDestinationCreated,
    AlertDestinationDeleted,
    AlertDestinationList,
    AlertDestinationUpdate,
    AlertList,
    AlertSend,
)
from control.records.storable import check_text
from control.service.endpoints import require_endpoint, require_write
from control.support import sealing
from control.support.page_cursors import decode_cursor, encode_cursor
from control.support.parameter_messages import check_limit
from control.support.text_checks import check_name
from control.support.url_checks import check_outbound_url
from shared import ids
from shared.errors import NotFoundError, QuotaExceededError, ValidationError

__all__ = (
    "MAX_ALERT_DESTINATIONS",
    "create_alert_destination",
    "delete_alert_destination",
    "get_alert_destination",
    "list_alert_destinations",
    "list_alerts",
    "open_alerts_for_endpoint",
    "rotate_alert_destination_secret",
    "update_alert_destination",
)

MAX_ALERT_DESTINATIONS = 20
"""Per account."""
_CURSOR = "alerts"


def _record(row: asyncpg.Record) -> AlertDestination:
    return AlertDestination(
        id=row["id"],
        name=row["name"],
        url=row["url"],
        events=list(row["events"]),
        format=row["format"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )


def _not_found(alert_destination_id: str) -> NotFoundError:
    return NotFoundError(f"alert destination {alert_destination_id!r} not found")


def _events(events: Sequence[str] | None) -> list[str]:
    """All types when none are given; duplicates refused, kept in the order of ``ALERT_TYPES``."""
    if events is None:
        return list(ALERT_TYPES)
    if len(set(events)) != len(events):
        raise ValidationError("events: an alert type is given twice")
    unknown = [e for e in events if e not in ALERT_TYPES]
    if unknown:  # the decoder refuses these first; kept for callers that build the record in code
        raise ValidationError(f"events: unknown alert type {unknown[0]!r}; one of {', '.join(ALERT_TYPES)}")
    return [t for t in ALERT_TYPES if t in events]


async def list_alert_destinations(ctx: Context, principal: Principal) -> AlertDestinationList:
    async with ctx.pool.acquire() as conn:
        rows = await db_destinations.list_for_account(conn, principal.account_id)
    return AlertDestinationList(alert_destinations=[_record(r) for r in rows])


async def get_alert_destination(ctx: Context, principal: Principal, alert_destination_id: str) -> AlertDestination:
    if not ids.is_id(alert_destination_id, "adst"):
        raise _not_found(alert_destination_id)
    async with ctx.pool.acquire() as conn:
        row = await db_destinations.get(conn, principal.account_id, alert_destination_id)
    if row is None:
        raise _not_found(alert_destination_id)
    return _record(row)


async def create_alert_destination(
    ctx: Context, principal: Principal, data: AlertDestinationCreate
) -> AlertDestinationCreated:
    require_write(principal)
    url = check_outbound_url(data.url, ctx.settings.egress)
    check_name(data.name, "name")
    events = _events(data.events)
    secret = ids.signing_secret()
    alert_destination_id = ids.new_id("adst")
    async with ctx.pool.acquire() as conn, conn.transaction():
        await db_destinations.lock_creates(conn, principal.account_id)
        if await db_destinations.count_for_account(conn, principal.account_id) >= MAX_ALERT_DESTINATIONS:
            raise QuotaExceededError(
                f"this account has reached its quota of {MAX_ALERT_DESTINATIONS} alert destinations"
            )
        row = await db_destinations.insert(
            conn,
            alert_destination_id=alert_destination_id,
            account_id=principal.account_id,
            name=data.name,
            url=url,
            events=events,
            format=data.format,
            signing_secret=sealing.seal_alert_destination_secret(ctx, alert_destination_id, secret),
        )
    return AlertDestinationCreated(**msgspec.structs.asdict(_record(row)), signing_secret=secret)


async def update_alert_destination(
    ctx: Context, principal: Principal, alert_destination_id: str, data: AlertDestinationUpdate
) -> AlertDestination:
    require_write(principal)
    changes = {f: v for f in data.__struct_fields__ if (v := getattr(data, f)) is not msgspec.UNSET}
    if "url" in changes:
        changes["url"] = check_outbound_url(changes["url"], ctx.settings.egress)
    check_name(changes.get("name"), "name")
    if "events" in changes:
        changes["events"] = _events(changes["events"])
    if not ids.is_id(alert_destination_id, "adst"):
        raise _not_found(alert_destination_id)
    async with ctx.pool.acquire() as conn:
        row = await db_destinations.update(conn, principal.account_id, alert_destination_id, changes)
    if row is None:
        raise _not_found(alert_destination_id)
    return _record(row)


async def rotate_alert_destination_secret(
    ctx: Context, principal: Principal, alert_destination_id: str
) -> AlertDestinationCreated:
    """A new signing secret, effective for the next attempt of every send; returned once."""
    require_write(principal)
    if not ids.is_id(alert_destination_id, "adst"):
        raise _not_found(alert_destination_id)
    secret = ids.signing_secret()
    stored = sealing.seal_alert_destination_secret(ctx, alert_destination_id, secret)
    async with ctx.pool.acquire() as conn:
        row = await db_destinations.rotate_secret(conn, principal.account_id, alert_destination_id, stored)
    if row is None:
        raise _not_found(alert_destination_id)
    return AlertDestinationCreated(**msgspec.structs.asdict(_record(row)), signing_secret=secret)


async def delete_alert_destination(
    ctx: Context, principal: Principal, alert_destination_id: str
) -> AlertDestinationDeleted:
    require_write(principal)
    if not ids.is_id(alert_destination_id, "adst"):
        raise _not_found(alert_destination_id)
    async with ctx.pool.acquire() as conn:
        if not await db_destinations.delete(conn, principal.account_id, alert_destination_id):
            raise _not_found(alert_destination_id)
    return AlertDestinationDeleted(id=alert_destination_id)


async def _alerts(conn: Connection, rows: list[asyncpg.Record]) -> list[Alert]:
    sends: dict[str, list[AlertSend]] = {r["id"]: [] for r in rows}
    for s in await db_alerts.sends_of(conn, list(sends)):
        attempts = msgspec.convert(s["attempts"], list[AlertAttempt], strict=False)
        sends[s["alert_id"]].append(
            AlertSend(
                alert_destination_id=s["alert_destination_id"],
                status=s["status"],
                next_attempt_at=s["next_attempt_at"] if s["status"] == "pending" else None,
                attempts=attempts,
            )
        )
    return [
        Alert(
            id=r["id"],
            type=r["type"],
            endpoint_id=r["endpoint_id"],
            destination_id=r["destination_id"],
            count=r["count"],
            data=r["data"],
            fired_at=r["fired_at"],
            resolved_at=r["resolved_at"],
            sends=sends[r["id"]],
        )
        for r in rows
    ]


async def list_alerts(
    ctx: Context,
    principal: Principal,
    *,
    endpoint_id: str | None = None,
    open_only: bool = False,
    limit: int = 50,
    cursor: str | None = None,
) -> AlertList:
    """The account's alerts, newest first, each with its sends and their attempts."""
    check_limit(limit, 200)
    before = decode_cursor(_CURSOR, cursor)[1] if cursor else None
    async with ctx.pool.acquire() as conn:
        if endpoint_id is not None:
            await require_endpoint(conn, principal, check_text(endpoint_id, "endpoint_id"))
        rows = await db_alerts.list_for_account(
            conn, principal.account_id, limit=limit + 1, before=before, endpoint_id=endpoint_id, open_only=open_only
        )
        page = await _alerts(conn, rows[:limit])
    next_cursor = encode_cursor(_CURSOR, page[-1].fired_at, page[-1].id) if len(rows) > limit else None
    return AlertList(alerts=page, next_cursor=next_cursor)


async def open_alerts_for_endpoint(ctx: Context, conn: Connection, endpoint_id: str) -> list[Alert]:
    """The inbox's banner: what is wrong with this endpoint now (the caller has checked the endpoint)."""
    return await _alerts(conn, await db_alerts.open_for_endpoint(conn, endpoint_id))
