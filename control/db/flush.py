"""The flush worker's writes: one COPY into a per-connection staging table, then one idempotent INSERT.

COPY has no ON CONFLICT, so records land in a temporary table first and move with
``INSERT ... SELECT ... ON CONFLICT DO NOTHING``: re-processing a stream entry never duplicates an event.
The join on endpoints drops events of an endpoint deleted between ingest and flush (its events are gone
by definition) instead of failing the batch on the foreign key.
"""

from __future__ import annotations

from collections.abc import Sequence

import asyncpg

__all__ = ("COLUMNS", "insert_events")

COLUMNS = (
    "id",
    "endpoint_id",
    "received_at",
    "method",
    "path",
    "query",
    "headers",
    "body",
    "body_is_utf8",
    "content_type",
    "source_ip",
    "provider",
    "event_type",
    "idempotency_key",
    "signature_valid",
    "signature_failure_reason",
    "ip_allowed",
    "labels",
    "search_text",
)

_STAGING = "hy_flush_staging"
_CREATE_STAGING = f"""
CREATE TEMP TABLE IF NOT EXISTS {_STAGING} (LIKE events INCLUDING DEFAULTS) ON COMMIT DELETE ROWS
"""
_MOVE = f"""
INSERT INTO events ({", ".join(COLUMNS)})
SELECT {", ".join("s." + c for c in COLUMNS)}
  FROM {_STAGING} s JOIN endpoints e ON e.id = s.endpoint_id
ON CONFLICT (id, received_at) DO NOTHING
RETURNING id, endpoint_id
"""


async def insert_events(conn: asyncpg.Connection, rows: Sequence[tuple]) -> list[asyncpg.Record]:
    """Inserts ``rows`` (tuples in ``COLUMNS`` order) inside the caller's transaction.

    Returns (id, endpoint_id) of the events that are new: already-stored ids and events of deleted
    endpoints are skipped.
    """
    await conn.execute(_CREATE_STAGING)
    await conn.copy_records_to_table(_STAGING, records=rows, columns=COLUMNS)
    return await conn.fetch(_MOVE)
