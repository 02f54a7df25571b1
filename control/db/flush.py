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

# Column and staging type; source_ip is text in staging because Postgres parses addresses in C while
# asyncpg's inet codec does it in Python (a third of the worker's CPU in the flush bench).
_STAGING_TYPES = {
    "id": "text",
    "endpoint_id": "text",
    "received_at": "timestamptz",
    "method": "text",
    "path": "text",
    "query": "text",
    "headers": "jsonb",
    "body": "bytea",
    "body_is_utf8": "boolean",
    "content_type": "text",
    "source_ip": "text",
    "provider": "text",
    "event_type": "text",
    "idempotency_key": "text",
    "signature_valid": "boolean",
    "signature_failure_reason": "text",
    "ip_allowed": "boolean",
    "labels": "jsonb",
    "search_text": "text",
}
COLUMNS = tuple(_STAGING_TYPES)

_STAGING = "hy_flush_staging"
_CREATE_STAGING = (
    f"CREATE TEMP TABLE IF NOT EXISTS {_STAGING} ("
    + ", ".join(f"{c} {t}" for c, t in _STAGING_TYPES.items())
    + ") ON COMMIT DELETE ROWS"
)
_MOVE = f"""
INSERT INTO events ({", ".join(COLUMNS)})
SELECT {", ".join("s." + c + ("::inet" if c == "source_ip" else "") for c in COLUMNS)}
  FROM {_STAGING} s JOIN endpoints e ON e.id = s.endpoint_id
ON CONFLICT (id, received_at) DO NOTHING
RETURNING id, endpoint_id
"""


async def insert_events(conn: asyncpg.Connection, rows: Sequence[tuple]) -> list[asyncpg.Record]:
    """Inserts ``rows`` (tuples in ``COLUMNS`` order) inside the caller's transaction.

    Returns (id, endpoint_id) of the events that are new: already-stored ids and events of deleted
    endpoints are skipped.
    """
    await conn.execute(_CREATE_STAGING)  # a catalog lookup once the connection has it
    await conn.copy_records_to_table(_STAGING, records=rows, columns=COLUMNS)
    return await conn.fetch(_MOVE)
