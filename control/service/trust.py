"""Trust settings of an endpoint: inbound signature verification (auth config), the platform signing
secret's rotation, and the source-IP allowlist.

Every change is committed first and then pushed to the edge (``edge_config.sync``), which returns once every
edge applied it: a request sent after the 2xx is checked under the change. The verification secret is
write-only: no answer here ever contains it.
"""

from __future__ import annotations

import ipaddress

import asyncpg
import msgspec

from control.db import endpoints as db_endpoints
from control.db import trust as db_trust
from control.db.context import Context, Principal
from control.records.endpoints import EndpointCreated
from control.records.storable import check_text
from control.records.trust import AllowlistEntry, AllowlistList, AuthConfig, AuthConfigUpdate
from control.service.endpoints import _endpoint as endpoint_record
from control.service.endpoints import require_endpoint, require_write
from control.support import edge_config, sealing
from control.support.provider_checks import check_public_key, provider_name
from control.support.text_checks import check_secret
from shared import ids
from shared.errors import NotFoundError, ValidationError

__all__ = (
    "MAX_ALLOWLIST_ENTRIES",
    "add_allowlist_entry",
    "delete_allowlist_entry",
    "get_auth_config",
    "list_allowlist",
    "parse_cidr",
    "rotate_secret",
    "update_auth_config",
)

MAX_ALLOWLIST_ENTRIES = 256
"""Per endpoint. The edge tests every entry on each request, and real providers publish a few dozen ranges."""

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
_MAPPED_PREFIX = 96  # ::ffff:0:0/96, the IPv4-mapped IPv6 addresses


def _auth_config(row: asyncpg.Record) -> AuthConfig:
    return AuthConfig(
        hmac_enabled=row["hmac_enabled"],
        header_name=row["header_name"],
        tolerance_seconds=row["tolerance_seconds"],
        on_failure=row["on_failure"],
        log_blocked_ips=row["log_blocked_ips"],
        secret_set=row["secret_set"],
        provider=row["provider"],
        verify_token_set=row["verify_token_set"],
    )


def _entry(row: asyncpg.Record) -> AllowlistEntry:
    return AllowlistEntry(
        id=row["id"], endpoint_id=row["endpoint_id"], cidr=str(row["cidr"]), created_at=row["created_at"]
    )


# -- auth config ------------------------------------------------------------------------------------


async def get_auth_config(ctx: Context, principal: Principal, endpoint_id: str) -> AuthConfig:
    async with ctx.pool.acquire() as conn:
        await require_endpoint(conn, principal, endpoint_id)
        row = await db_trust.get_auth_config(conn, endpoint_id)
    if row is None:  # deleted between the two reads
        raise NotFoundError(f"endpoint {endpoint_id!r} not found")
    return _auth_config(row)


async def update_auth_config(
    ctx: Context, principal: Principal, endpoint_id: str, data: AuthConfigUpdate
) -> AuthConfig:
    require_write(principal)
    changes = {f: v for f in data.__struct_fields__ if (v := getattr(data, f)) is not msgspec.UNSET}
    check_secret(changes.get("secret"))
    check_secret(changes.get("verify_token"), "verify_token")
    if isinstance(changes.get("header_name"), str):
        changes["header_name"] = changes["header_name"].lower()
    if isinstance(changes.get("provider"), str):
        changes["provider"] = provider_name(changes["provider"])
    async with ctx.pool.acquire() as conn:
        await require_endpoint(conn, principal, endpoint_id)
        if isinstance(changes.get("secret"), str):
            provider = changes["provider"] if "provider" in changes else await db_trust.provider_of(conn, endpoint_id)
            check_public_key(provider, changes["secret"])
        if "secret" in changes:
            changes["secret"] = sealing.seal_provider_secret(ctx, endpoint_id, changes["secret"])
        row = await db_trust.update_auth_config(conn, endpoint_id, changes)
        if row is None:
            raise NotFoundError(f"endpoint {endpoint_id!r} not found")
        if changes:
            await edge_config.sync(ctx, conn, [endpoint_id])
    return _auth_config(row)


async def rotate_secret(ctx: Context, principal: Principal, endpoint_id: str) -> EndpointCreated:
    """A new platform signing secret, returned this once. A secret set through PATCH auth-config (the
    provider's own) is not touched; the platform secret verifies only while none is set."""
    require_write(principal)
    if not ids.is_id(endpoint_id, "ep"):
        raise NotFoundError(f"endpoint {endpoint_id!r} not found")
    secret = ids.signing_secret()
    async with ctx.pool.acquire() as conn:
        await require_endpoint(conn, principal, endpoint_id)
        stored = sealing.seal_endpoint_secret(ctx, endpoint_id, secret)
        row = await db_endpoints.set_signing_secret(conn, principal.account_id, endpoint_id, stored)
        if row is None:
            raise NotFoundError(f"endpoint {endpoint_id!r} not found")
        await edge_config.sync(ctx, conn, [endpoint_id])
    return EndpointCreated(**msgspec.structs.asdict(endpoint_record(ctx, row)), signing_secret=secret)


# -- allowlist --------------------------------------------------------------------------------------


def parse_cidr(text: str) -> IPNetwork:
    """An IPv4/IPv6 address or CIDR range in canonical form; a bare address is a /32 or /128, and an
    IPv4-mapped IPv6 range (``::ffff:1.2.3.4``) becomes the IPv4 range it covers.

    Host bits set (``10.0.0.1/8``) are refused rather than cleared: clearing would silently widen a rule
    meant for one host to the whole network.
    """
    value = check_text(text, "cidr").strip()
    if "%" in value:
        raise ValidationError(f"cidr: {text!r} has an IPv6 zone index; zones mean nothing to a remote sender")
    try:
        network = ipaddress.ip_network(value, strict=True)
    except ValueError:
        try:
            widened = ipaddress.ip_network(value, strict=False)
        except ValueError:
            raise ValidationError(
                f"cidr: {text!r} is not an IP address or CIDR range (e.g. 203.0.113.7, 203.0.113.0/24, 2001:db8::/32)"
            ) from None
        host = value.split("/", 1)[0]
        raise ValidationError(
            f"cidr: {text!r} has host bits set; the range is {widened.with_prefixlen}, the single host {host}"
        ) from None
    mapped = network.network_address.ipv4_mapped if isinstance(network, ipaddress.IPv6Network) else None
    if mapped is not None and network.prefixlen >= _MAPPED_PREFIX:  # wholly inside ::ffff:0:0/96
        return ipaddress.IPv4Network(f"{mapped}/{network.prefixlen - _MAPPED_PREFIX}")
    return network


async def list_allowlist(ctx: Context, principal: Principal, endpoint_id: str) -> AllowlistList:
    async with ctx.pool.acquire() as conn:
        await require_endpoint(conn, principal, endpoint_id)
        rows = await db_trust.list_allowlist(conn, endpoint_id)
    return AllowlistList(allowlist=[_entry(r) for r in rows])


async def add_allowlist_entry(
    ctx: Context, principal: Principal, endpoint_id: str, cidr: str
) -> tuple[AllowlistEntry, bool]:
    """(the entry, whether it is new). Adding a range the endpoint already has returns the existing entry."""
    require_write(principal)
    network = parse_cidr(cidr)
    async with ctx.pool.acquire() as conn:
        await require_endpoint(conn, principal, endpoint_id)
        async with conn.transaction():
            if not await db_trust.lock_auth_config(conn, endpoint_id):
                raise NotFoundError(f"endpoint {endpoint_id!r} not found")
            row = await db_trust.find_allowlist_entry(conn, endpoint_id, network)
            created = False
            if row is None:
                if await db_trust.count_allowlist(conn, endpoint_id) >= MAX_ALLOWLIST_ENTRIES:
                    raise ValidationError(
                        f"cidr: this endpoint already has {MAX_ALLOWLIST_ENTRIES} allowlist entries, the most "
                        "it can have"
                    )
                row, created = await db_trust.insert_allowlist_entry(
                    conn, entry_id=ids.new_id("al"), endpoint_id=endpoint_id, cidr=network
                )
        if created:
            await edge_config.sync(ctx, conn, [endpoint_id])
    return _entry(row), created


async def delete_allowlist_entry(ctx: Context, principal: Principal, entry_id: str) -> str:
    require_write(principal)
    async with ctx.pool.acquire() as conn:
        async with conn.transaction():
            known = ids.is_id(entry_id, "al")
            endpoint_id = await db_trust.delete_allowlist_entry(conn, principal.account_id, entry_id) if known else None
            if endpoint_id is None:
                raise NotFoundError(f"allowlist entry {entry_id!r} not found")
            await require_endpoint(conn, principal, endpoint_id)  # expired: 410, and the delete rolls back
        await edge_config.sync(ctx, conn, [endpoint_id])
    return entry_id
