"""Endpoint tools: the ingest URLs of the account (``/v1/endpoints``)."""

from __future__ import annotations

import msgspec

from control.mcp.registry import Call, tool
from control.records.endpoints import Endpoint, EndpointCreate, EndpointCreated, EndpointList, EndpointUpdate
from control.service import endpoints as service


@tool("ListEndpoints", read_only=True)
async def list_endpoints(call: Call, external_ref: str | None = None) -> EndpointList:
    """List the account's endpoints (ingest URLs), newest first; `external_ref` finds one by its stable name."""
    return await service.list_endpoints(call.ctx, call.principal, external_ref=external_ref)


@tool("CreateEndpoint")
async def create_endpoint(call: Call, data: EndpointCreate) -> EndpointCreated:
    """Create an endpoint: its `ingest_url` for the provider and its platform `signing_secret` (shown once)."""
    return await service.create_endpoint(call.ctx, call.principal, data)


@tool("GetEndpoint", read_only=True)
async def get_endpoint(call: Call, endpoint_id: str) -> Endpoint:
    """Read one endpoint: name, environment, ingest URL, expiry of a temporary one."""
    return await service.get_endpoint(call.ctx, call.principal, endpoint_id)


@tool("UpdateEndpoint", idempotent=True)
async def update_endpoint(call: Call, endpoint_id: str, data: EndpointUpdate) -> Endpoint:
    """Change an endpoint's `name`, `environment` or `external_ref` (null clears it); omitted fields stay."""
    return await service.update_endpoint(call.ctx, call.principal, endpoint_id, data)


class EndpointDeleted(msgspec.Struct, kw_only=True):
    """/v1's ``Deleted``, and for a temporary token whose account has no endpoint left, a ``note`` saying so."""

    id: str
    deleted: bool = True
    note: str | msgspec.UnsetType = msgspec.UNSET


@tool("DeleteEndpoint", destructive=True, idempotent=True)
async def delete_endpoint(call: Call, endpoint_id: str) -> EndpointDeleted:
    """Delete an endpoint with all its events, deliveries, destinations, rules and settings.

    A temporary token (`hy_tmp_`) cannot create endpoints: deleting its account's last one leaves the token
    nothing to work on (the answer's `note` says so; `POST /api/start` gives a new token and endpoint)."""
    deleted = await service.delete_endpoint(call.ctx, call.principal, endpoint_id)
    note = await service.none_left(call.ctx, call.principal)
    return EndpointDeleted(id=deleted, note=msgspec.UNSET if note is None else note)
