"""Destination tools: where an endpoint's rules forward events (``destinations``)."""

from __future__ import annotations

from control.mcp.registry import Call, tool
from control.records.destinations import (
    Destination,
    DestinationCreate,
    DestinationCreated,
    DestinationDeleted,
    DestinationDetail,
    DestinationDisable,
    DestinationList,
    DestinationUpdate,
    SecretRotation,
)
from control.service.destinations import crud as service
from control.service.destinations import disable_enable as state
from control.service.destinations import signing


@tool("ListDestinations", read_only=True)
async def list_destinations(call: Call, endpoint_id: str) -> DestinationList:
    """List an endpoint's destinations (outbound URLs), oldest first."""
    return await service.list_destinations(call.ctx, call.principal, endpoint_id)


@tool("CreateDestination")
async def create_destination(call: Call, endpoint_id: str, data: DestinationCreate) -> DestinationCreated:
    """Add a destination URL to an endpoint; `forward_all` or `condition_tree` also creates its routing rule.
    With neither, it has no rule and receives nothing until a rule (CreateRule) names it."""
    return await service.create_destination(call.ctx, call.principal, endpoint_id, data)


@tool("GetDestination", read_only=True)
async def get_destination(call: Call, destination_id: str) -> DestinationDetail:
    """Read one destination: its URL, name, headers, auth (type and non-secret fields), signing scheme and
    public key, state and delivery health (success rate, circuit)."""
    return await service.get_destination(call.ctx, call.principal, destination_id)


@tool("UpdateDestination", idempotent=True)
async def update_destination(call: Call, destination_id: str, data: DestinationUpdate) -> Destination:
    """Change a destination (`url`, `name`, `headers`, `auth`, `tls_ca`, shaping...): null clears, omitted stay."""
    return await service.update_destination(call.ctx, call.principal, destination_id, data)


@tool("DeleteDestination", destructive=True, idempotent=True)
async def delete_destination(call: Call, destination_id: str) -> DestinationDeleted:
    """Delete a destination and its pending deliveries; rules forwarding only to it go with it."""
    return await service.delete_destination(call.ctx, call.principal, destination_id)


@tool("RotateDestinationSecret")
async def rotate_destination_secret(call: Call, destination_id: str, data: SecretRotation) -> DestinationCreated:
    """Issue a new signing secret (hmac: returned once; ed25519: read `signing_public_key`); the previous one
    keeps signing beside it for `overlap_s` (default 24 h)."""
    return await signing.rotate_destination_secret(call.ctx, call.principal, destination_id, data)


@tool("DisableDestination", idempotent=True)
async def disable_destination(call: Call, destination_id: str, data: DestinationDisable) -> Destination:
    """Stop deliveries to a destination: its due deliveries are held (no attempt spent) until it is enabled."""
    return await state.disable_destination(call.ctx, call.principal, destination_id, data)


@tool("EnableDestination", idempotent=True)
async def enable_destination(call: Call, destination_id: str) -> Destination:
    """Resume deliveries to a disabled destination: its held deliveries go out at once, in order when FIFO."""
    return await state.enable_destination(call.ctx, call.principal, destination_id)
