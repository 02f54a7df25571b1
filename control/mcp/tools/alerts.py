"""Alert tools: an account's alert destinations and the record of alerts (``alert-destinations``, ``alerts``)."""

from __future__ import annotations

from control.mcp.registry import Call, tool
from control.records.alerts import (
    AlertDestination,
    AlertDestinationCreate,
    AlertDestinationCreated,
    AlertDestinationDeleted,
    AlertDestinationList,
    AlertDestinationUpdate,
    AlertList,
)
from control.service import alerts as service


@tool("ListAlertDestinations", read_only=True)
async def list_alert_destinations(call: Call) -> AlertDestinationList:
    """List the account's alert destinations (where operational alerts are sent), oldest first."""
    return await service.list_alert_destinations(call.ctx, call.principal)


@tool("CreateAlertDestination")
async def create_alert_destination(call: Call, data: AlertDestinationCreate) -> AlertDestinationCreated:
    """Add a URL that operational alerts are sent to, signed with its own secret (returned once)."""
    return await service.create_alert_destination(call.ctx, call.principal, data)


@tool("GetAlertDestination", read_only=True)
async def get_alert_destination(call: Call, alert_destination_id: str) -> AlertDestination:
    """Read one alert destination: its URL, alert types and format."""
    return await service.get_alert_destination(call.ctx, call.principal, alert_destination_id)


@tool("UpdateAlertDestination", idempotent=True)
async def update_alert_destination(
    call: Call, alert_destination_id: str, data: AlertDestinationUpdate
) -> AlertDestination:
    """Change an alert destination's `url`, `name`, `events` or `format`; omitted fields stay."""
    return await service.update_alert_destination(call.ctx, call.principal, alert_destination_id, data)


@tool("DeleteAlertDestination", destructive=True, idempotent=True)
async def delete_alert_destination(call: Call, alert_destination_id: str) -> AlertDestinationDeleted:
    """Delete an alert destination; the record of alerts sent to it stays."""
    return await service.delete_alert_destination(call.ctx, call.principal, alert_destination_id)


@tool("RotateAlertDestinationSecret")
async def rotate_alert_destination_secret(call: Call, alert_destination_id: str) -> AlertDestinationCreated:
    """Issue a new signing secret for the alerts sent to an alert destination (returned once)."""
    return await service.rotate_alert_destination_secret(call.ctx, call.principal, alert_destination_id)


@tool("ListAlerts", read_only=True)
async def list_alerts(
    call: Call, endpoint_id: str | None = None, open: bool | None = None, limit: int = 50, cursor: str | None = None
) -> AlertList:
    """List what fired, newest first, with each send and attempt; `open: true` lists what still holds."""
    return await service.list_alerts(
        call.ctx, call.principal, endpoint_id=endpoint_id, open_only=bool(open), limit=limit, cursor=cursor
    )
