"""Retention's writes: which endpoints keep bodies shorter than events and one batch of body expiry; one batch
of the delivery records and finished delivery tasks past the instance's retention.

A batch is one statement and one short transaction: it picks the endpoint's oldest events past the
endpoint's watermark (``endpoints.bodies_expired_before``) that are older than the cutoff, in
``events_endpoint_received`` index order, clears their body and headers (keeping the body's size and a
search text rebuilt without the body), clears their deliveries' bodies and request headers (through the
``deliveries_event`` index), and moves the watermark to the last event it expired. Row locks are held only
for that batch, so the flush and the delivery workers never wait long on it.
"""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple

import asyncpg

from control.db.connection import Connection, returned

__all__ = ("Batch", "Removed", "body_retention", "due_endpoints", "expire_batch", "remove_records", "remove_tasks")


class Batch(NamedTuple):
    events: int
    deliveries: int
    last: datetime | None
    """received_at of the last event expired (the new watermark); None when none was due."""


async def due_endpoints(conn: Connection, *, retention_days: int) -> list[asyncpg.Record]:
    """(id, cutoff, watermark) of endpoints whose bodies expire before their events do."""
    return await conn.fetch(
        """SELECT id, now() - make_interval(days => body_retention_days) AS cutoff,
                  bodies_expired_before AS watermark
             FROM endpoints
            WHERE body_retention_days IS NOT NULL AND body_retention_days < $1
              AND (bodies_expired_before IS NULL
                   OR bodies_expired_before < now() - make_interval(days => body_retention_days))
            ORDER BY id""",
        retention_days,
    )


# The search text keeps what stays searchable (content type, method, event type, path, query, labels: the body
# and headers are gone), lowercased as the flush builds it (``control.records.storable.event_row``), so `q`
# still finds the event by its metadata.
_SEARCH = r"""lower(concat_ws(E'\n', nullif(e.content_type, ''), e.method, nullif(e.event_type, ''), e.path,
    nullif(e.query, ''), (SELECT string_agg(l->>'value', E'\n') FROM jsonb_array_elements(e.labels) l)))"""

_EXPIRE = f"""
WITH batch AS (
    SELECT id, received_at FROM events
     WHERE endpoint_id = $1 AND received_at >= coalesce($2::timestamptz, '-infinity') AND received_at < $3
       AND body_expired_at IS NULL
     ORDER BY received_at, id LIMIT $4
), ev AS (
    UPDATE events e SET body = ''::bytea, headers = '{{}}'::jsonb, headers_base64 = NULL,
                        body_size = octet_length(e.body), body_expired_at = now(), search_text = {_SEARCH}
      FROM batch b
     WHERE e.id = b.id AND e.received_at = b.received_at AND e.endpoint_id = $1
    RETURNING e.id, e.received_at
), d AS (
    UPDATE deliveries SET request_body = NULL, response_body = NULL, request_headers = NULL
     WHERE event_id IN (SELECT id FROM ev) AND endpoint_id = $1
       AND (request_body IS NOT NULL OR response_body IS NOT NULL OR request_headers IS NOT NULL)
    RETURNING 1
), w AS (
    UPDATE endpoints SET bodies_expired_before = CASE WHEN (SELECT count(*) FROM batch) < $4 THEN $3
                         ELSE coalesce((SELECT max(received_at) FROM ev), bodies_expired_before) END
     WHERE id = $1
    RETURNING 1
)
SELECT (SELECT count(*) FROM ev) AS events, (SELECT count(*) FROM d) AS deliveries,
       (SELECT max(received_at) FROM ev) AS last, (SELECT count(*) FROM w) AS moved
"""


async def expire_batch(
    conn: Connection, endpoint_id: str, *, since: datetime | None, cutoff: datetime, limit: int
) -> Batch:
    """Expires up to ``limit`` of the endpoint's events received in [since, cutoff), oldest first. A batch
    shorter than ``limit`` finished the range, so the watermark moves to ``cutoff``; otherwise to the last
    event expired (events at that same instant are found again next batch, their expiry filter skips the
    done ones)."""
    row = returned(await conn.fetchrow(_EXPIRE, endpoint_id, since, cutoff, limit))
    return Batch(row["events"], row["deliveries"], row["last"])


async def body_retention(conn: Connection, endpoint_ids: list[str]) -> dict[str, int | None]:
    """endpoint id -> its ``body_retention_days`` (None: the instance's), for the endpoints that exist."""
    rows = await conn.fetch("SELECT id, body_retention_days FROM endpoints WHERE id = ANY($1::text[])", endpoint_ids)
    return {r["id"]: r["body_retention_days"] for r in rows}


class Removed(NamedTuple):
    removed: int
    scanned: int
    """Rows the batch took (a batch shorter than its limit reached the end of the range)."""
    last: str | None
    """The greatest id taken: the next batch starts after it."""


# Records and tasks are not partitioned: they go by id range, oldest first. Ids are ULIDs (time first), so
# ``id < below`` walks the primary key from its oldest end; ``created_at`` is checked too, so a row is never
# removed before its time even if an id and its row disagreed. Each batch starts after the last id the one
# before it took, so the dead entries a batch leaves in the index are not walked again. SKIP LOCKED: a
# row someone holds (an erasure deleting it too) is left for a later round.
_RECORDS = """
WITH batch AS (
    SELECT id FROM deliveries WHERE id > $1 AND id < $2 AND created_at < $3 ORDER BY id LIMIT $4
       FOR UPDATE SKIP LOCKED
), gone AS (
    DELETE FROM deliveries d USING batch b WHERE d.id = b.id RETURNING 1
)
SELECT (SELECT count(*) FROM gone) AS removed, (SELECT count(*) FROM batch) AS scanned,
       (SELECT max(id) FROM batch) AS last
"""
# Only finished tasks, and only they are locked: a pending or in-flight one (its destination down for longer
# than the retention) is neither held from a claim nor from its result, and goes once it has finished (as
# failed when its event is no longer stored). A finished task also stays until ``$5``: it may own a
# deduplication key (``control.db.dedup``), whose window runs from its first attempt, which ``updated_at``
# (its finish) cannot precede.
_TASKS = """
WITH batch AS (
    SELECT id FROM delivery_tasks
     WHERE id > $1 AND id < $2 AND created_at < $3 AND status IN ('succeeded', 'failed') AND updated_at < $5
     ORDER BY id LIMIT $4
       FOR UPDATE SKIP LOCKED
), gone AS (
    DELETE FROM delivery_tasks t USING batch b WHERE t.id = b.id RETURNING 1
)
SELECT (SELECT count(*) FROM gone) AS removed, (SELECT count(*) FROM batch) AS scanned,
       (SELECT max(id) FROM batch) AS last
"""


async def remove_records(conn: Connection, *, after: str, below: str, cutoff: datetime, limit: int) -> Removed:
    """Deletes up to ``limit`` delivery records with ``after < id < below`` created before ``cutoff``."""
    row = returned(await conn.fetchrow(_RECORDS, after, below, cutoff, limit))
    return Removed(row["removed"], row["scanned"], row["last"])


async def remove_tasks(
    conn: Connection, *, after: str, below: str, cutoff: datetime, limit: int, finished_before: datetime
) -> Removed:
    """Deletes up to ``limit`` finished delivery tasks with ``after < id < below`` created before ``cutoff``
    and finished before ``finished_before``."""
    row = returned(await conn.fetchrow(_TASKS, after, below, cutoff, limit, finished_before))
    return Removed(row["removed"], row["scanned"], row["last"])
