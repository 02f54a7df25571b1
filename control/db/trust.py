"""Auth configs (one row per endpoint, created with it) and allowlist entries.

Callers check that the endpoint belongs to the account first (``require_endpoint``); these functions take
an endpoint id that is known to be the caller's, except :func:`delete_allowlist_entry`, which scopes the
entry id by account itself.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping

import asyncpg

from control.db.assignments import assignments
from control.db.connection import Connection

__all__ = (
    "count_allowlist",
    "delete_allowlist_entry",
    "find_allowlist_entry",
    "get_auth_config",
    "insert_allowlist_entry",
    "list_allowlist",
    "lock_auth_config",
    "provider_of",
    "update_auth_config",
)

_AUTH_COLUMNS = (
    "endpoint_id, hmac_enabled, secret IS NOT NULL AS secret_set, header_name, tolerance_seconds, on_failure, "
    "log_blocked_ips, provider, verify_token IS NOT NULL AS verify_token_set, updated_at"
)
_AUTH_UPDATABLE = frozenset(
    {"hmac_enabled", "secret", "header_name", "tolerance_seconds", "on_failure", "log_blocked_ips", "provider"}
    | {"verify_token"}
)
_ENTRY_COLUMNS = "id, endpoint_id, cidr, created_at"

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


async def get_auth_config(conn: Connection, endpoint_id: str) -> asyncpg.Record | None:
    """The endpoint's auth config without the secret itself (only ``secret_set``)."""
    return await conn.fetchrow(f"SELECT {_AUTH_COLUMNS} FROM auth_configs WHERE endpoint_id = $1", endpoint_id)


async def provider_of(conn: Connection, endpoint_id: str) -> str | None:
    """The catalog provider the endpoint's auth config names (None: recognised per request)."""
    provider: str | None = await conn.fetchval("SELECT provider FROM auth_configs WHERE endpoint_id = $1", endpoint_id)
    return provider


async def lock_auth_config(conn: Connection, endpoint_id: str) -> bool:
    """Locks the endpoint's auth config row until the transaction ends, serialising trust changes of one
    endpoint (e.g. the allowlist size check and the insert). False when the endpoint is gone."""
    found = await conn.fetchval("SELECT true FROM auth_configs WHERE endpoint_id = $1 FOR UPDATE", endpoint_id)
    return bool(found)


async def update_auth_config(
    conn: Connection, endpoint_id: str, changes: Mapping[str, object]
) -> asyncpg.Record | None:
    """Sets the given columns and bumps ``updated_at`` (when anything is set); returns the new config."""
    sets = assignments(changes, _AUTH_UPDATABLE, first=2)
    if not changes:
        return await get_auth_config(conn, endpoint_id)
    return await conn.fetchrow(
        f"UPDATE auth_configs SET {sets.sql}, updated_at = now() WHERE endpoint_id = $1 RETURNING {_AUTH_COLUMNS}",
        endpoint_id,
        *sets.values,
    )


async def list_allowlist(conn: Connection, endpoint_id: str) -> list[asyncpg.Record]:
    return await conn.fetch(
        f"SELECT {_ENTRY_COLUMNS} FROM allowlist_entries WHERE endpoint_id = $1 ORDER BY created_at, id",
        endpoint_id,
    )


async def count_allowlist(conn: Connection, endpoint_id: str) -> int:
    found: int = await conn.fetchval("SELECT count(*) FROM allowlist_entries WHERE endpoint_id = $1", endpoint_id)
    return found


async def find_allowlist_entry(conn: Connection, endpoint_id: str, cidr: IPNetwork) -> asyncpg.Record | None:
    return await conn.fetchrow(
        f"SELECT {_ENTRY_COLUMNS} FROM allowlist_entries WHERE endpoint_id = $1 AND cidr = $2", endpoint_id, cidr
    )


async def insert_allowlist_entry(
    conn: Connection, *, entry_id: str, endpoint_id: str, cidr: IPNetwork
) -> tuple[asyncpg.Record, bool]:
    """Adds the range unless the endpoint already has it: (the entry, whether it was created now)."""
    while True:  # the existing entry may be deleted between the conflict and the read: then insert again
        row = await conn.fetchrow(
            f"""INSERT INTO allowlist_entries (id, endpoint_id, cidr) VALUES ($1, $2, $3)
                ON CONFLICT (endpoint_id, cidr) DO NOTHING RETURNING {_ENTRY_COLUMNS}""",
            entry_id,
            endpoint_id,
            cidr,
        )
        if row is not None:
            return row, True
        existing = await find_allowlist_entry(conn, endpoint_id, cidr)
        if existing is not None:
            return existing, False


async def delete_allowlist_entry(conn: Connection, account_id: str, entry_id: str) -> str | None:
    """Deletes the entry if it belongs to an endpoint of the account; returns that endpoint's id."""
    found: str | None = await conn.fetchval(
        """DELETE FROM allowlist_entries l USING endpoints e
            WHERE l.id = $1 AND e.id = l.endpoint_id AND e.account_id = $2
        RETURNING l.endpoint_id""",
        entry_id,
        account_id,
    )
    return found
