"""Trust tools: inbound signature verification (``auth-config``, secret rotation) and the source-IP
allowlist."""

from __future__ import annotations

from control.mcp.registry import Call, tool
from control.records import Deleted
from control.records.endpoints import EndpointCreated
from control.records.trust import AllowlistCreate, AllowlistEntry, AllowlistList, AuthConfig, AuthConfigUpdate
from control.service import trust as service


@tool("GetAuthConfig", read_only=True)
async def get_auth_config(call: Call, endpoint_id: str) -> AuthConfig:
    """Read how an endpoint verifies inbound signatures (never the secret itself)."""
    return await service.get_auth_config(call.ctx, call.principal, endpoint_id)


@tool("UpdateAuthConfig", idempotent=True)
async def update_auth_config(call: Call, endpoint_id: str, data: AuthConfigUpdate) -> AuthConfig:
    """Change signature verification: on/off, the provider's own `secret`, tolerance, reject or accept_log."""
    return await service.update_auth_config(call.ctx, call.principal, endpoint_id, data)


@tool("RotateSigningSecret", destructive=True)
async def rotate_signing_secret(call: Call, endpoint_id: str) -> EndpointCreated:
    """Replace an endpoint's platform signing secret and return the new one, once."""
    return await service.rotate_secret(call.ctx, call.principal, endpoint_id)


@tool("ListAllowlist", read_only=True)
async def list_allowlist(call: Call, endpoint_id: str) -> AllowlistList:
    """List the source IP ranges an endpoint accepts (empty: every source)."""
    return await service.list_allowlist(call.ctx, call.principal, endpoint_id)


@tool("AddAllowlistEntry", idempotent=True)
async def add_allowlist_entry(call: Call, endpoint_id: str, data: AllowlistCreate) -> AllowlistEntry:
    """Allow an IP or CIDR range; the first entry makes the endpoint refuse every other source."""
    entry, _created = await service.add_allowlist_entry(call.ctx, call.principal, endpoint_id, data.cidr)
    return entry


@tool("DeleteAllowlistEntry", destructive=True, idempotent=True)
async def delete_allowlist_entry(call: Call, entry_id: str) -> Deleted:
    """Remove an allowlist entry; removing the last one accepts every source again."""
    return Deleted(id=await service.delete_allowlist_entry(call.ctx, call.principal, entry_id))
