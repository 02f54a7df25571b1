"""Routing rules and their ordered destination lists (``rule_destinations.position``).

Every routing change of an endpoint runs in a transaction that first takes :func:`lock_routing`, so
count limits and "this destination belongs to the endpoint" checks cannot race a concurrent change.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import asyncpg

from control.db.assignments import assignments
from control.db.connection import Connection, returned

__all__ = (
    "count_for_endpoint",
    "delete",
    "get",
    "insert",
    "list_for_endpoint",
    "lock",
    "lock_routing",
    "set_destinations",
    "trees_for_endpoint",
    "update",
)

_COLUMNS = """r.id, r.endpoint_id, r.name, r.condition_tree, r.active, r.created_at, r.updated_at,
    coalesce((SELECT array_agg(rd.destination_id ORDER BY rd.position, rd.destination_id)
                FROM rule_destinations rd WHERE rd.rule_id = r.id), '{}'::text[]) AS destination_ids"""
_UPDATABLE = frozenset({"name", "active", "condition_tree"})


async def lock_routing(conn: Connection, account_id: str, endpoint_id: str) -> bool:
    """Locks the caller's endpoint row against other routing changes until the transaction ends.

    ``FOR NO KEY UPDATE`` does not conflict with the key-share lock the flush takes on the endpoint of the
    events it inserts (``control.db.flush``), so ingest never waits on it. False for an unknown endpoint.
    """
    found = await conn.fetchval(
        "SELECT true FROM endpoints WHERE id = $1 AND account_id = $2 FOR NO KEY UPDATE", endpoint_id, account_id
    )
    return bool(found)


async def lock(conn: Connection, account_id: str, rule_id: str) -> str | None:
    """Locks the rule's endpoint for routing changes and returns its id; None when the rule is unknown,
    another account's, or was deleted while this waited for the lock."""
    endpoint_id = await conn.fetchval(
        """SELECT r.endpoint_id FROM rules r JOIN endpoints e ON e.id = r.endpoint_id
            WHERE r.id = $1 AND e.account_id = $2""",
        rule_id,
        account_id,
    )
    if endpoint_id is None or not await lock_routing(conn, account_id, endpoint_id):
        return None
    # Under READ COMMITTED a new statement sees what committed while the lock was awaited; a locking join
    # would re-check only the locked endpoint row and still see a rule deleted meanwhile.
    return endpoint_id if await conn.fetchval("SELECT true FROM rules WHERE id = $1", rule_id) else None


async def insert(
    conn: Connection,
    *,
    rule_id: str,
    endpoint_id: str,
    name: str,
    condition_tree: Mapping[str, Any],
    active: bool,
    destination_ids: Sequence[str],
) -> asyncpg.Record:
    await conn.execute(
        "INSERT INTO rules (id, endpoint_id, name, condition_tree, active) VALUES ($1, $2, $3, $4, $5)",
        rule_id,
        endpoint_id,
        name,
        condition_tree,
        active,
    )
    await set_destinations(conn, rule_id, destination_ids)
    return returned(await conn.fetchrow(f"SELECT {_COLUMNS} FROM rules r WHERE r.id = $1", rule_id))


async def set_destinations(conn: Connection, rule_id: str, destination_ids: Sequence[str]) -> None:
    """Replaces the rule's destination list, keeping the given order."""
    await conn.execute("DELETE FROM rule_destinations WHERE rule_id = $1", rule_id)
    await conn.execute(
        """INSERT INTO rule_destinations (rule_id, destination_id, position)
           SELECT $1, t.destination_id, t.position - 1
             FROM unnest($2::text[]) WITH ORDINALITY AS t(destination_id, position)""",
        rule_id,
        list(destination_ids),
    )


async def list_for_endpoint(conn: Connection, endpoint_id: str) -> list[asyncpg.Record]:
    """Oldest first."""
    return await conn.fetch(
        f"SELECT {_COLUMNS} FROM rules r WHERE r.endpoint_id = $1 ORDER BY r.created_at, r.id", endpoint_id
    )


async def trees_for_endpoint(conn: Connection, endpoint_id: str, *, excluding: str | None = None) -> list[Any]:
    """The condition trees of the endpoint's rules, active or not, but ``excluding`` (a rule being replaced)."""
    rows = await conn.fetch(
        "SELECT condition_tree FROM rules WHERE endpoint_id = $1 AND id IS DISTINCT FROM $2", endpoint_id, excluding
    )
    return [row["condition_tree"] for row in rows]


async def count_for_endpoint(conn: Connection, endpoint_id: str) -> int:
    found: int = await conn.fetchval("SELECT count(*) FROM rules WHERE endpoint_id = $1", endpoint_id)
    return found


async def get(conn: Connection, account_id: str, rule_id: str) -> asyncpg.Record | None:
    return await conn.fetchrow(
        f"""SELECT {_COLUMNS} FROM rules r JOIN endpoints e ON e.id = r.endpoint_id
             WHERE r.id = $1 AND e.account_id = $2""",
        rule_id,
        account_id,
    )


async def update(
    conn: Connection,
    account_id: str,
    rule_id: str,
    changes: Mapping[str, object],
    *,
    touch: bool = False,
) -> asyncpg.Record | None:
    """Sets the given columns (a subset of name, active, condition_tree); bumps ``updated_at`` when there are
    any, or when ``touch`` (the destination list changed)."""
    sets = assignments(changes, _UPDATABLE, first=3)
    if changes or touch:
        touched = f"{sets.sql}, updated_at = now()" if sets.sql else "updated_at = now()"
        await conn.execute(
            f"""UPDATE rules r SET {touched}
                  FROM endpoints e
                 WHERE r.id = $1 AND e.id = r.endpoint_id AND e.account_id = $2""",
            rule_id,
            account_id,
            *sets.values,
        )
    return await get(conn, account_id, rule_id)


async def delete(conn: Connection, account_id: str, rule_id: str) -> str | None:
    """Deletes the rule (its destination links cascade); returns its endpoint id, None when unknown."""
    found: str | None = await conn.fetchval(
        """DELETE FROM rules r USING endpoints e
            WHERE r.id = $1 AND e.id = r.endpoint_id AND e.account_id = $2
        RETURNING r.endpoint_id""",
        rule_id,
        account_id,
    )
    return found
