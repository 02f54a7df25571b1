"""Label rules (``label_rules``): per endpoint, account-scoped reads, and what the flush reads to label.

Every write runs in a transaction that first locks the endpoint (``control.db.rules.lock_routing``), so the
per-endpoint limit and the unique key cannot race; the table's triggers bump the endpoint's
``config_version`` (migration 0005), which is how the flush learns that its labels changed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import asyncpg

from control.db.connection import Connection, returned

__all__ = ("count_for_endpoint", "delete", "for_endpoints", "get", "insert", "list_for_endpoint", "lock", "update")

_COLUMNS = "l.id, l.endpoint_id, l.source, l.path, l.output_key, l.color, l.created_at"
_UPDATABLE = frozenset({"source", "path", "output_key", "color"})


async def list_for_endpoint(conn: Connection, endpoint_id: str) -> list[asyncpg.Record]:
    return await conn.fetch(
        f"SELECT {_COLUMNS} FROM label_rules l WHERE l.endpoint_id = $1 ORDER BY l.created_at, l.id", endpoint_id
    )


async def get(conn: Connection, account_id: str, label_id: str) -> asyncpg.Record | None:
    return await conn.fetchrow(
        f"""SELECT {_COLUMNS} FROM label_rules l JOIN endpoints e ON e.id = l.endpoint_id
             WHERE l.id = $1 AND e.account_id = $2""",
        label_id,
        account_id,
    )


async def lock(conn: Connection, account_id: str, label_id: str) -> asyncpg.Record | None:
    """The label rule, its endpoint locked for changes until the transaction ends; None when unknown or
    another account's (or deleted while this waited for the lock)."""
    endpoint_id = await conn.fetchval(
        "SELECT l.endpoint_id FROM label_rules l JOIN endpoints e ON e.id = l.endpoint_id"
        " WHERE l.id = $1 AND e.account_id = $2",
        label_id,
        account_id,
    )
    if endpoint_id is None:
        return None
    await conn.execute("SELECT 1 FROM endpoints WHERE id = $1 FOR NO KEY UPDATE", endpoint_id)
    return await get(conn, account_id, label_id)


async def count_for_endpoint(conn: Connection, endpoint_id: str) -> int:
    found: int = await conn.fetchval("SELECT count(*) FROM label_rules WHERE endpoint_id = $1", endpoint_id)
    return found


async def insert(
    conn: Connection, *, label_id: str, endpoint_id: str, source: str, path: str, output_key: str, color: str
) -> asyncpg.Record:
    return returned(
        await conn.fetchrow(
            f"""WITH l AS (
                INSERT INTO label_rules (id, endpoint_id, source, path, output_key, color)
                VALUES ($1, $2, $3, $4, $5, $6) RETURNING *
            ) SELECT {_COLUMNS} FROM l""",
            label_id,
            endpoint_id,
            source,
            path,
            output_key,
            color,
        )
    )


async def update(conn: Connection, label_id: str, changes: Mapping[str, Any]) -> asyncpg.Record | None:
    """Sets the given columns (names from ``_UPDATABLE`` only); the caller holds the endpoint's lock."""
    names = [name for name in changes if name in _UPDATABLE]
    if not names:
        return await conn.fetchrow(f"SELECT {_COLUMNS} FROM label_rules l WHERE l.id = $1", label_id)
    assignments = ", ".join(f"{name} = ${i}" for i, name in enumerate(names, start=2))
    return await conn.fetchrow(
        f"WITH l AS (UPDATE label_rules SET {assignments} WHERE id = $1 RETURNING *) SELECT {_COLUMNS} FROM l",
        label_id,
        *(changes[name] for name in names),
    )


async def delete(conn: Connection, label_id: str) -> bool:
    return await conn.fetchval("DELETE FROM label_rules WHERE id = $1 RETURNING true", label_id) is not None


async def for_endpoints(conn: Connection, endpoint_ids: Sequence[str]) -> list[asyncpg.Record]:
    """What the flush labels with: ``(endpoint_id, source, path, output_key, color)`` of these endpoints,
    in creation order (the order labels appear on an event)."""
    return await conn.fetch(
        """SELECT endpoint_id, source, path, output_key, color FROM label_rules
            WHERE endpoint_id = ANY($1::text[]) ORDER BY endpoint_id, created_at, id""",
        list(endpoint_ids),
    )
