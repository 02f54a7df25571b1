"""Alert destinations: the URLs an account's operational alerts are sent to (migration 0022).

Every function is scoped by account; the signing secret is written (sealed by the service) and read back only
by ``secret`` for the sender.
"""

from __future__ import annotations

from collections.abc import Mapping

import asyncpg

from control.db.assignments import assignments
from control.db.connection import Connection, returned

__all__ = (
    "count_for_account",
    "delete",
    "get",
    "insert",
    "list_for_account",
    "lock_creates",
    "rotate_secret",
    "secret",
    "update",
)

_COLUMNS = "id, account_id, name, url, events, format, created_at, updated_at"
_UPDATABLE = frozenset({"url", "name", "events", "format"})


async def insert(
    conn: Connection,
    *,
    alert_destination_id: str,
    account_id: str,
    name: str | None,
    url: str,
    events: list[str],
    format: str,
    signing_secret: str,
) -> asyncpg.Record:
    return returned(
        await conn.fetchrow(
            f"""INSERT INTO alert_destinations (id, account_id, name, url, events, format, signing_secret)
            VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING {_COLUMNS}""",
            alert_destination_id,
            account_id,
            name,
            url,
            events,
            format,
            signing_secret,
        )
    )


async def list_for_account(conn: Connection, account_id: str) -> list[asyncpg.Record]:
    """Oldest first."""
    return await conn.fetch(
        f"SELECT {_COLUMNS} FROM alert_destinations WHERE account_id = $1 ORDER BY created_at, id", account_id
    )


async def lock_creates(conn: Connection, account_id: str) -> None:
    """Serialises the account's creates until the transaction ends, so a cap counted under it holds under
    concurrent requests."""
    await conn.execute("SELECT pg_advisory_xact_lock(hashtext('alert_destinations:' || $1::text))", account_id)


async def count_for_account(conn: Connection, account_id: str) -> int:
    return int(await conn.fetchval("SELECT count(*) FROM alert_destinations WHERE account_id = $1", account_id))


async def get(conn: Connection, account_id: str, alert_destination_id: str) -> asyncpg.Record | None:
    return await conn.fetchrow(
        f"SELECT {_COLUMNS} FROM alert_destinations WHERE id = $1 AND account_id = $2",
        alert_destination_id,
        account_id,
    )


async def update(
    conn: Connection, account_id: str, alert_destination_id: str, changes: Mapping[str, object]
) -> asyncpg.Record | None:
    sets = assignments(changes, _UPDATABLE, first=3)
    if not changes:
        return await get(conn, account_id, alert_destination_id)
    return await conn.fetchrow(
        f"""UPDATE alert_destinations SET {sets.sql}, updated_at = now()
             WHERE id = $1 AND account_id = $2 RETURNING {_COLUMNS}""",
        alert_destination_id,
        account_id,
        *sets.values,
    )


async def rotate_secret(
    conn: Connection, account_id: str, alert_destination_id: str, signing_secret: str
) -> asyncpg.Record | None:
    return await conn.fetchrow(
        f"""UPDATE alert_destinations SET signing_secret = $3, updated_at = now()
             WHERE id = $1 AND account_id = $2 RETURNING {_COLUMNS}""",
        alert_destination_id,
        account_id,
        signing_secret,
    )


async def delete(conn: Connection, account_id: str, alert_destination_id: str) -> bool:
    """Its alerts' sends stay (the record of what was sent); pending ones fail at their next attempt."""
    status = await conn.execute(
        "DELETE FROM alert_destinations WHERE id = $1 AND account_id = $2", alert_destination_id, account_id
    )
    return status.endswith(" 1")


async def secret(conn: Connection, alert_destination_id: str) -> str | None:
    """The stored (sealed) signing secret; None when the destination was deleted."""
    found: str | None = await conn.fetchval(
        "SELECT signing_secret FROM alert_destinations WHERE id = $1", alert_destination_id
    )
    return found
