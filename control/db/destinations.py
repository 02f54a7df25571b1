"""Destinations: the outbound URLs of an endpoint.

Reads and writes by destination id are scoped by account (through the endpoint) here; functions taking an
endpoint id expect one already known to be the caller's (``require_endpoint`` / ``rules.lock_routing``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import asyncpg

__all__ = (
    "count_for_endpoint",
    "delete",
    "existing_ids",
    "get",
    "insert",
    "list_for_endpoint",
    "lock",
    "rotate_secret",
    "transform_source",
    "update",
)

_SHAPING = ("rate_limit_per_s", "ordering", "ordering_key", "deduplicate_window_s")
"""How deliveries to the destination are shaped (migration 0020)."""
_COLUMNS = (
    "d.id, d.endpoint_id, d.name, d.url, d.headers, d.sign_deliveries, "
    + ", ".join(f"d.{c}" for c in _SHAPING)
    + ", d.created_at, d.updated_at, d.transform"
)
_RETURNING = _COLUMNS.replace("d.", "")
_UPDATABLE = frozenset({"url", "name", "headers", "sign_deliveries", "transform", *_SHAPING})


async def insert(
    conn: asyncpg.Connection,
    *,
    destination_id: str,
    endpoint_id: str,
    name: str | None,
    url: str,
    headers: Mapping[str, str] | None,
    signing_secret: str,
    sign_deliveries: bool = True,
    shaping: Mapping[str, object] | None = None,
    transform: str | None = None,
) -> asyncpg.Record:
    """The new row (``_RETURNING``); the signing secret is written, never read back here. ``shaping``: values
    of ``rate_limit_per_s``, ``ordering``, ``ordering_key`` and ``deduplicate_window_s`` (the defaults when
    left out)."""
    shaping = shaping or {}
    return await conn.fetchrow(
        f"""INSERT INTO destinations (id, endpoint_id, name, url, headers, signing_secret, sign_deliveries,
                                      {", ".join(_SHAPING)}, transform)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, coalesce($9, 'none'), $10, $11, $12)
            RETURNING {_RETURNING}""",
        destination_id,
        endpoint_id,
        name,
        url,
        headers,
        signing_secret,
        sign_deliveries,
        *(shaping.get(c) for c in _SHAPING),
        transform,
    )


async def transform_source(conn: asyncpg.Connection, destination_id: str) -> asyncpg.Record | None:
    """The destination's transform and its digest (``transform_digest``), for a deliver worker that has not
    compiled this version yet; None when the destination is gone."""
    return await conn.fetchrow("SELECT transform, transform_digest FROM destinations WHERE id = $1", destination_id)


async def list_for_endpoint(conn: asyncpg.Connection, endpoint_id: str) -> list[asyncpg.Record]:
    """Oldest first."""
    return await conn.fetch(
        f"SELECT {_COLUMNS} FROM destinations d WHERE d.endpoint_id = $1 ORDER BY d.created_at, d.id", endpoint_id
    )


async def count_for_endpoint(conn: asyncpg.Connection, endpoint_id: str) -> int:
    return await conn.fetchval("SELECT count(*) FROM destinations WHERE endpoint_id = $1", endpoint_id)


async def existing_ids(conn: asyncpg.Connection, endpoint_id: str, destination_ids: Iterable[str]) -> set[str]:
    """Those of ``destination_ids`` that are destinations of this endpoint."""
    rows = await conn.fetch(
        "SELECT id FROM destinations WHERE endpoint_id = $1 AND id = any($2::text[])",
        endpoint_id,
        list(destination_ids),
    )
    return {r["id"] for r in rows}


async def get(conn: asyncpg.Connection, account_id: str, destination_id: str) -> asyncpg.Record | None:
    return await conn.fetchrow(
        f"""SELECT {_COLUMNS} FROM destinations d JOIN endpoints e ON e.id = d.endpoint_id
             WHERE d.id = $1 AND e.account_id = $2""",
        destination_id,
        account_id,
    )


async def rotate_secret(
    conn: asyncpg.Connection, account_id: str, destination_id: str, signing_secret: str
) -> asyncpg.Record | None:
    """Replaces the signing secret; the destination's row, or None when it is not the account's."""
    return await conn.fetchrow(
        f"""UPDATE destinations d SET signing_secret = $3, updated_at = now()
              FROM endpoints e
             WHERE d.id = $1 AND e.id = d.endpoint_id AND e.account_id = $2
         RETURNING {_COLUMNS}""",
        destination_id,
        account_id,
        signing_secret,
    )


async def lock(conn: asyncpg.Connection, account_id: str, destination_id: str) -> str | None:
    """Locks the destination's endpoint for routing changes (``rules.lock_routing``) and returns its id;
    None for an unknown destination, one of another account, or one deleted while this waited."""
    endpoint_id = await conn.fetchval(
        """SELECT d.endpoint_id FROM destinations d JOIN endpoints e ON e.id = d.endpoint_id
            WHERE d.id = $1 AND e.account_id = $2""",
        destination_id,
        account_id,
    )
    if endpoint_id is None:
        return None
    locked = await conn.fetchval(
        "SELECT true FROM endpoints WHERE id = $1 AND account_id = $2 FOR NO KEY UPDATE", endpoint_id, account_id
    )
    # A new statement (READ COMMITTED) sees a delete that committed while the lock was awaited.
    if not locked or not await conn.fetchval("SELECT true FROM destinations WHERE id = $1", destination_id):
        return None
    return endpoint_id


async def update(
    conn: asyncpg.Connection, account_id: str, destination_id: str, changes: Mapping[str, object]
) -> asyncpg.Record | None:
    """Sets the given columns (url, name, headers, sign_deliveries, transform and the shaping ones) and bumps
    updated_at when there are any."""
    unknown = set(changes) - _UPDATABLE
    if unknown:
        raise ValueError(f"not updatable: {sorted(unknown)}")
    if not changes:
        return await get(conn, account_id, destination_id)
    names = sorted(changes)
    sets = ", ".join(f"{name} = ${i}" for i, name in enumerate(names, start=3))
    return await conn.fetchrow(
        f"""UPDATE destinations d SET {sets}, updated_at = now()
              FROM endpoints e
             WHERE d.id = $1 AND e.id = d.endpoint_id AND e.account_id = $2
         RETURNING {_COLUMNS}""",
        destination_id,
        account_id,
        *(changes[name] for name in names),
    )


async def delete(conn: asyncpg.Connection, destination_id: str) -> list[str]:
    """Deletes the destination (its rule links and pending delivery tasks cascade) together with the rules
    that forwarded to it alone; the other rules that forwarded to it get a new ``updated_at``.

    Run it in a transaction, after ``lock``. Returns the ids of the deleted rules.
    """
    orphans = await conn.fetch(
        """DELETE FROM rules r
            WHERE r.id IN (SELECT rd.rule_id FROM rule_destinations rd WHERE rd.destination_id = $1)
              AND NOT EXISTS (SELECT 1 FROM rule_destinations o WHERE o.rule_id = r.id AND o.destination_id <> $1)
        RETURNING r.id""",
        destination_id,
    )
    await conn.execute(
        """UPDATE rules SET updated_at = now()
            WHERE id IN (SELECT rule_id FROM rule_destinations WHERE destination_id = $1)""",
        destination_id,
    )
    await conn.execute("DELETE FROM destinations WHERE id = $1", destination_id)
    return sorted(r["id"] for r in orphans)
