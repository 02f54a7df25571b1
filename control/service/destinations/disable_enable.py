"""Disabling and enabling a destination by hand: the same as a 410 does, and its undoing.

Disabled, a destination is sent nothing: its due deliveries are held (no attempt spent, nothing counted
against its circuit), those routed meanwhile too, and a ``destination.disabled`` alert is open while it lasts
(``control.workers.alerts.evaluator``). Enabled again, every held delivery goes out as it stood (in order for
a FIFO destination), with its circuit closed, and the alert is resolved in the same transaction: a user who
enables and then lists open alerts does not see one the evaluator has not yet caught up with. How the
workers take it: ``control.db.destination_state``.
"""

from __future__ import annotations

from control.db import alert_conditions, destination_state
from control.db import alerts as db_alerts
from control.db import destinations as db_destinations
from control.db.connection import returned
from control.db.context import Context, Principal
from control.records.destinations import Destination, DestinationDisable
from control.records.storable import check_text
from control.service.destinations.view import destination_record, not_found
from control.service.endpoints import require_owned, require_write
from shared import ids

__all__ = ("BY_API", "disable_destination", "enable_destination")

BY_API = "disabled through the API"


async def disable_destination(
    ctx: Context, principal: Principal, destination_id: str, data: DestinationDisable | None = None
) -> Destination:
    """Disables the destination (a disabled one keeps its first reason and time)."""
    require_write(principal)
    if not ids.is_id(destination_id, "dst"):
        raise not_found(destination_id)
    reason = (check_text(data.reason, "reason") if data is not None else None) or BY_API
    async with ctx.pool.acquire() as conn, conn.transaction():
        await require_owned(conn, principal, destination_id, kind="dst", noun="destination", get=db_destinations.get)
        await destination_state.disable(conn, [(destination_id, reason, "api")])
        row = returned(await db_destinations.get(conn, principal.account_id, destination_id))
    return destination_record(row)


async def enable_destination(ctx: Context, principal: Principal, destination_id: str) -> Destination:
    """Enables the destination; its held deliveries go out at once and its ``destination.disabled`` alert is
    resolved."""
    require_write(principal)
    async with ctx.pool.acquire() as conn, conn.transaction():
        await require_owned(conn, principal, destination_id, kind="dst", noun="destination", get=db_destinations.get)
        await alert_conditions.wait_for_evaluation(conn)
        await destination_state.enable(conn, destination_id)
        await db_alerts.resolve_condition(conn, "destination.disabled", destination_id)
        row = returned(await db_destinations.get(conn, principal.account_id, destination_id))
    return destination_record(row)
