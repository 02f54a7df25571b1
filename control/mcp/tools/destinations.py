"""Destination tools: where an endpoint's rules forward events (``destinations``)."""

from __future__ import annotations

from control.mcp.registry import Call, tool
from control.records.destinations import (
    Destination,
    DestinationCreate,
    DestinationCreated,
    DestinationDeleted,
    DestinationDetail,
    DestinationList,
    DestinationUpdate,
)
from control.service import destinations as service


@tool("ListDestinations", read_only=True)
async def list_destinations(call: Call, endpoint_id: str) -> DestinationList:
    """List an endpoint's destinations (outbound URLs), oldest first."""
    return await service.list_destinations(call.ctx, call.principal, endpoint_id)


@tool("CreateDestination")
async def create_destination(call: Call, endpoint_id: str, data: DestinationCreate) -> DestinationCreated:
    """Add a destination URL to an endpoint; `forward_all` or `condition_tree` also creates its routing rule."""
    return await service.create_destination(call.ctx, call.principal, endpoint_id, data)


@tool("GetDestination", read_only=True)
async def get_destination(call: Call, destination_id: str) -> DestinationDetail:
    """Read one destination: its URL, name, extra headers and delivery health (success rate, circuit)."""
    return await service.get_destination(call.ctx, call.principal, destination_id)


@tool("UpdateDestination", idempotent=True)
async def update_destination(call: Call, destination_id: str, data: DestinationUpdate) -> Destination:
    """Change a destination's `url`, `name` or `headers` (null clears); omitted fields stay."""
    return await service.update_destination(call.ctx, call.principal, destination_id, data)


@tool("DeleteDestination", destructive=True, idempotent=True)
async def delete_destination(call: Call, destination_id: str) -> DestinationDeleted:
    """Delete a destination and its pending deliveries; rules forwarding only to it go with it."""
    return await service.delete_destination(call.ctx, call.principal, destination_id)


@tool("RotateDestinationSecret")
async def rotate_destination_secret(call: Call, destination_id: str) -> DestinationCreated:
    """Issue a new signing secret for hookyard's signature on a destination's deliveries (returned once)."""
    return await service.rotate_destination_secret(call.ctx, call.principal, destination_id)
