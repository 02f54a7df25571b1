"""Event partitions: prepare days ahead, drop days past retention, index days for ``q``.

``q``'s index is a GIN index of the search text's trigrams, each prefixed by its endpoint's tag
(``hy_search_keys``, migration 0039: built-in functions and GIN's built-in array operator class, so it exists on
the embedded Postgres too, which has no pg_trgm; keyed by endpoint, so a page reads its endpoint's posting lists
alone: ADR 0057). It is
never on the insert path (it made every flush pay: 100k inserts in 13 s with it
against 0.2 s without). A finished day gets one full index. The day being written gets a *prefix* index,
``<partition>_keys_to_HHMMSS``: partial, ``WHERE received_at < B`` for the last whole hour B, rebuilt by
the sweep about once an hour. An insert only checks that predicate (a new event lies past B), so the flush
does not maintain it; a late event before B is indexed like any row of a partial index, so the index is
always complete for its range and ``q`` finds every stored event (``events.search_bounds`` plans around it).
"""

from __future__ import annotations

from datetime import datetime

from control.db.connection import Connection

__all__ = ("KEYS", "drop_expired", "ensure_ahead", "index_finished_days", "index_today")

# A boundary is made this long after its hour began, so events received just before it are mostly
# stored already (a late one is still indexed, at the cost of one index insert in the flush).
_GRACE = "2 minutes"

# The index's expression; a query must spell it the same way to use it (``control.db.events``).
KEYS = '(hy_search_keys(endpoint_id, search_text) COLLATE "C")'

# The partition and boundary due for a prefix index, or nothing: no partition, a boundary at
# midnight (an empty prefix), a finished day's full index already there, or a valid prefix reaching as far.
_DUE = f"""
WITH b AS (SELECT date_trunc('second', coalesce($1::timestamptz,
                  date_trunc('hour', (now() - interval '{_GRACE}') AT TIME ZONE 'utc') AT TIME ZONE 'utc')) AS at),
     p AS (SELECT at, 'events_' || to_char(at AT TIME ZONE 'utc', 'YYYYMMDD') AS name,
                  to_char(at AT TIME ZONE 'utc', 'HH24MISS') AS hhmmss FROM b)
SELECT p.name, p.hhmmss, p.at FROM p JOIN pg_class c ON c.relname = p.name AND c.relkind = 'r'
 WHERE p.hhmmss <> '000000'
   AND NOT EXISTS (SELECT 1 FROM pg_index x JOIN pg_class ic ON ic.oid = x.indexrelid
                    WHERE x.indrelid = c.oid AND x.indisvalid
                      AND (ic.relname = p.name || '_keys'
                           OR (ic.relname ~ ('^' || p.name || '_keys_to_[0-9]{{6}}$')
                               AND right(ic.relname, 6) >= p.hhmmss)))
"""

# Prefix indexes of a partition other than ``keep``: superseded, left invalid by a failed build, or of the kind
# before 0039 (``_search_to_``: trigrams without the endpoint, which no query asks for any more).
_PREFIXES = """
SELECT ic.relname::text AS name FROM pg_index x JOIN pg_class ic ON ic.oid = x.indexrelid
  JOIN pg_class c ON c.oid = x.indrelid
 WHERE c.relname = $1 AND ic.relname ~ ('^' || $1 || '_(keys|search)_to_[0-9]{6}$') AND ic.relname <> $2
"""


async def ensure_ahead(conn: Connection, *, days_back: int = 1, days_ahead: int = 7) -> int:
    found: int = await conn.fetchval("SELECT hy_ensure_event_partitions($1, $2)", days_back, days_ahead)
    return found


async def drop_expired(conn: Connection, *, retention_days: int) -> int:
    found: int = await conn.fetchval("SELECT hy_drop_event_partitions($1)", retention_days)
    return found


async def index_finished_days(conn: Connection) -> list[str]:
    """Builds the ``q`` index of every finished day's partition that lacks one, then drops the day's prefix
    indexes it supersedes and the day's index of the kind before 0039 (``_search``), if any.

    CONCURRENTLY, so late events of that day are never blocked; it cannot run inside a transaction, so
    ``conn`` must not be in one. A build that failed half way leaves an invalid index, dropped first.
    """
    built = []
    for partition in await conn.fetch("SELECT hy_unindexed_search_partitions() AS name"):
        name = partition["name"]
        await conn.execute(f'DROP INDEX CONCURRENTLY IF EXISTS "{name}_keys"')
        await conn.execute(f'CREATE INDEX CONCURRENTLY "{name}_keys" ON "{name}" USING gin ({KEYS})')
        await _drop_prefixes(conn, name, keep="")
        await conn.execute(f'DROP INDEX CONCURRENTLY IF EXISTS "{name}_search"')
        built.append(name)
    return built


async def index_today(conn: Connection, *, upto: datetime | None = None) -> str | None:
    """Builds the prefix index of the day being written up to ``upto`` (whole seconds; by default the
    last whole UTC hour that began over two minutes ago) when none reaches that far; returns its name.

    The previous prefix index stays usable until the new one is valid, then is dropped. Each build reads
    the day so far (measured: about 1.5 s per 100k events), so a day costs about twelve full builds.
    """
    due = await conn.fetchrow(_DUE, upto)
    if due is None:
        return None
    partition, at = due["name"], due["at"]
    name = f"{partition}_keys_to_{due['hhmmss']}"
    await conn.execute(f'DROP INDEX CONCURRENTLY IF EXISTS "{name}"')  # left invalid by a failed build
    await conn.execute(
        f'CREATE INDEX CONCURRENTLY "{name}" ON "{partition}" USING gin ({KEYS}) '
        f"WHERE received_at < '{at.isoformat()}'"
    )
    await _drop_prefixes(conn, partition, keep=name)
    return name


async def _drop_prefixes(conn: Connection, partition: str, *, keep: str) -> None:
    for row in await conn.fetch(_PREFIXES, partition, keep):
        await conn.execute(f'DROP INDEX CONCURRENTLY IF EXISTS "{row["name"]}"')
