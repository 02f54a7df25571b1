"""Daily partitions: finished days get the `q` trigram index (on every server: ADR 0057), today never does."""

from __future__ import annotations

import asyncpg

from control.db import partitions
from control.db.context import Context


async def test_finished_days_are_search_indexed_once_and_today_never(ctx: Context) -> None:
    async with ctx.pool.acquire() as conn:
        await partitions.ensure_ahead(conn, days_back=3, days_ahead=2)
        first = await partitions.index_finished_days(conn)
        again = await partitions.index_finished_days(conn)
        indexed = await _indexed(conn)
        today = await conn.fetchval("SELECT 'events_' || to_char((now() AT TIME ZONE 'utc')::date, 'YYYYMMDD')")
    assert len(first) >= 3  # at least the three finished days just prepared
    assert all(name < today for name in first)
    assert set(first) <= indexed
    assert today not in indexed
    assert again == []


async def _indexed(conn: asyncpg.Connection) -> set[str]:
    rows = await conn.fetch(
        """SELECT c.relname FROM pg_index x JOIN pg_class ic ON ic.oid = x.indexrelid
             JOIN pg_class c ON c.oid = x.indrelid WHERE ic.relname = c.relname || '_keys' AND x.indisvalid"""
    )
    return {r["relname"] for r in rows}
