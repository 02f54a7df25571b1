"""Event partitions: prepare days ahead, drop days past retention, index finished days for ``q``."""

from __future__ import annotations

import asyncpg

__all__ = ("drop_expired", "ensure_ahead", "index_finished_days")


async def ensure_ahead(conn: asyncpg.Connection, *, days_back: int = 1, days_ahead: int = 7) -> int:
    return await conn.fetchval("SELECT hy_ensure_event_partitions($1, $2)", days_back, days_ahead)


async def drop_expired(conn: asyncpg.Connection, *, retention_days: int) -> int:
    return await conn.fetchval("SELECT hy_drop_event_partitions($1)", retention_days)


async def index_finished_days(conn: asyncpg.Connection) -> list[str]:
    """Builds the ``q`` trigram index of every finished day's partition that lacks one.

    CONCURRENTLY, so late events of that day are never blocked; it cannot run inside a transaction, so
    ``conn`` must not be in one. A build that failed half way leaves an invalid index, dropped first.
    """
    built = []
    for partition in await conn.fetch("SELECT hy_unindexed_search_partitions() AS name"):
        name = partition["name"]
        await conn.execute(f'DROP INDEX CONCURRENTLY IF EXISTS "{name}_search"')
        await conn.execute(
            f'CREATE INDEX CONCURRENTLY "{name}_search" ON "{name}" USING gin (search_text gin_trgm_ops)'
        )
        built.append(name)
    return built
