"""Writes of delivery attempts (one ``deliveries`` row per outbound try) and the destination look-ups that
replay and the destination test need."""

from __future__ import annotations

from collections.abc import Sequence

import asyncpg

__all__ = ("COLUMNS", "destination_for_account", "destination_with_url", "insert", "insert_many")

COLUMNS = (
    "id",
    "endpoint_id",
    "event_id",
    "task_id",
    "destination_id",
    "destination_name",
    "destination_url",
    "rule_id",
    "source",
    "attempt_number",
    "request_headers",
    "request_body",
    "response_status",
    "response_body",
    "latency_ms",
    "success",
    "error",
    "created_at",
)
_INSERT = f"""INSERT INTO deliveries ({", ".join(COLUMNS)})
    VALUES ({", ".join(f"${i}" for i in range(1, len(COLUMNS) + 1))})"""


async def insert(conn: asyncpg.Connection, row: Sequence[object]) -> None:
    """One attempt, values in ``COLUMNS`` order."""
    await conn.execute(_INSERT, *row)


async def insert_many(conn: asyncpg.Connection, rows: Sequence[Sequence[object]]) -> None:
    """Attempts in ``COLUMNS`` order, pipelined (atomic within the caller's transaction)."""
    if rows:
        await conn.executemany(_INSERT, rows)


async def destination_for_account(
    conn: asyncpg.Connection, account_id: str, destination_id: str
) -> asyncpg.Record | None:
    """The destination with its endpoint's platform signing secret, if it belongs to the account."""
    return await conn.fetchrow(
        """SELECT d.id, d.endpoint_id, d.name, d.url, d.headers, p.signing_secret
             FROM destinations d JOIN endpoints p ON p.id = d.endpoint_id
            WHERE d.id = $1 AND p.account_id = $2""",
        destination_id,
        account_id,
    )


async def destination_with_url(conn: asyncpg.Connection, endpoint_id: str, url: str) -> asyncpg.Record | None:
    """The endpoint's (oldest) destination whose URL is exactly ``url``, to attribute a replay to it."""
    return await conn.fetchrow(
        "SELECT id, name FROM destinations WHERE endpoint_id = $1 AND url = $2 ORDER BY created_at, id LIMIT 1",
        endpoint_id,
        url,
    )
