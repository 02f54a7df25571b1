"""The inbox page's destinations: the endpoint's list, and disabling or enabling one of them.

The /v1 service functions, narrowed to the page's endpoint (``control.service.inbox.page`` authorised the
caller for it): a destination of another endpoint is a 404 here, even of the same account.
"""

from __future__ import annotations

from control.db import destinations as db_destinations
from control.db.context import Context, Principal
from control.records.destinations import Destination, DestinationDisable, DestinationList
from control.service.destinations.crud import list_destinations
from control.service.destinations.disable_enable import disable_destination, enable_destination
from control.service.destinations.view import not_found

__all__ = ("inbox_destination_state", "inbox_destinations")

BY_INBOX = "disabled on the inbox page"


async def inbox_destinations(ctx: Context, principal: Principal, endpoint_id: str) -> DestinationList:
    return await list_destinations(ctx, principal, endpoint_id)


async def inbox_destination_state(
    ctx: Context, principal: Principal, endpoint_id: str, destination_id: str, *, enabled: bool
) -> Destination:
    async with ctx.pool.acquire() as conn:
        row = await db_destinations.get(conn, principal.account_id, destination_id)
    if row is None or row["endpoint_id"] != endpoint_id:
        raise not_found(destination_id)
    if enabled:
        return await enable_destination(ctx, principal, destination_id)
    return await disable_destination(ctx, principal, destination_id, DestinationDisable(reason=BY_INBOX))
