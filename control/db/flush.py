"""The flush worker's writes: COPY into per-connection staging tables, then one idempotent INSERT.

COPY has no ON CONFLICT, so records land in a temporary table first and move with
``INSERT ... SELECT ... ON CONFLICT DO NOTHING``: re-processing a stream entry never duplicates an event.
The join on endpoints drops events of an endpoint deleted between ingest and flush (its events are gone
by definition). The batch's endpoints are locked first, each once (KEY SHARE, the lock the foreign key took
per row before migration 0027; ADR 0070): an endpoint's deletion waits for the batch's commit and then
deletes its events with the rest, and a batch that meets an endpoint being deleted waits and drops that
endpoint's events.

A routed batch also COPYs the delivery tasks that ``control.routing.route`` decided for its events into a
second staging table, and the same statement that inserts the events inserts the tasks of the events that
are actually new: a re-processed entry creates neither again, without a round trip to learn which events
were new in between. COPY rather than array parameters: asyncpg checks every array element against
abstract base classes, which cost more than the rest of the tasks' encoding.

Both statements also note the new events for schema learning when asked (``control.db.learn_queue``: one
row per batch, in the same transaction, so a re-processed entry is never noted twice), and add the new
events to the stats counters (``control.db.stats``): counted from the
RETURNING of the insert, in the same transaction, a re-processed entry is never counted twice.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from control.db.connection import Connection
from control.db.stats import events_counted
from control.db.tasks import NOTIFY_CHANNEL
from control.records.storable import EventRow

__all__ = ("COLUMNS", "TASK_COLUMNS", "Stored", "store_batch")

COLUMNS = EventRow._fields
"""The events columns the flush writes, in the order of an ``EventRow``'s fields (which are these columns)."""
# Each column's staging type; source_ip is text in staging because Postgres parses addresses in C while
# asyncpg's inet codec does it in Python (a third of the worker's CPU in the flush bench).
_STAGING_TYPES = {
    "id": "text",
    "endpoint_id": "text",
    "received_at": "int8",
    "method": "text",
    "path": "text",
    "query": "text",
    "headers": "jsonb",
    "headers_base64": "text[]",
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
    "traceparent": "text",
    "handshake": "boolean",
    "labels": "jsonb",
    "search_text": "text",
}
TASK_COLUMNS = (
    "task_id",
    "event_id",
    "rule_id",
    "destination_id",
    "order_key",
    "order_pos",
    "dedup_key",
    "traceparent",
)
"""A task to create when its event turns out to be new; endpoint and received_at come from the event. The
next three are the keys of a destination that shapes its deliveries (``control.routing.shaping``), the last
the routing span its attempts are children of (``control.workers.flush_tracing``): a batch without either
stages only the first four (the rest stay null), one with shaping and no tracing the first seven."""

_STAGING = "hy_flush_staging"
_TASK_STAGING = "hy_flush_task_staging"
_PREPARE = (
    f"CREATE TEMP TABLE IF NOT EXISTS {_STAGING} ("
    + ", ".join(f"{c} {_STAGING_TYPES[c]}" for c in COLUMNS)
    + ") ON COMMIT DELETE ROWS;"
    f" CREATE TEMP TABLE IF NOT EXISTS {_TASK_STAGING} ("
    + ", ".join(f"{c} text" for c in TASK_COLUMNS)
    + ") ON COMMIT DELETE ROWS;"
    # Tuning note: staging tables have no statistics, so the planner guesses thousands of rows per page and,
    # on the routed statement, costs enough to JIT-compile it: ~25 ms of compilation for a ~100 ms statement
    # (it overestimated and JIT-compiled every routed insert, about 24 ms per batch). JIT is off here only.
    " SET LOCAL jit = off"
)
_CONVERTED = {
    "received_at": "timestamptz '1970-01-01 00:00:00+00' + s.received_at * interval '1 microsecond'",
    "source_ip": "s.source_ip::inet",
    "labels": "coalesce(s.labels, '[]')",
}
"""What a staged column becomes in ``events``: the edge's microseconds a timestamptz (exact: an integer below
2^53 times one microsecond, in float8 as the operator takes it), the address parsed, no labels an empty array."""
_LOCKED = f"locked AS (SELECT id FROM endpoints WHERE id IN (SELECT endpoint_id FROM {_STAGING}) FOR KEY SHARE)"
"""The batch's endpoints, each locked once (``FOR KEY SHARE OF`` the join locked one for every event: 4 of a
400-event statement's 27 ms in its plan, ADR 0070)."""
_INSERT_EVENTS = f"""
INSERT INTO events ({", ".join(COLUMNS)})
SELECT {", ".join(_CONVERTED.get(c, "s." + c) for c in COLUMNS)}
  FROM {_STAGING} s JOIN locked e ON e.id = s.endpoint_id
ON CONFLICT (id, received_at) DO NOTHING
RETURNING id, endpoint_id, received_at, ip_allowed, provider, event_type, signature_failure_reason,
          signature_valid, handshake
"""


def _noted(learn: str) -> str:
    """The CTE that notes the new events schema learning looks at, when ``learn`` (a boolean parameter) is
    true: one row for the batch (``control.db.learn_queue``), none when no event is new."""
    return f"""INSERT INTO schema_learn_queue (event_ids, first_at, last_at)
    SELECT array_agg(id), min(received_at), max(received_at) FROM ins
     WHERE {learn} AND ip_allowed IS NOT FALSE AND signature_valid IS NOT FALSE AND NOT handshake
    HAVING count(*) > 0"""


# The staged tasks are joined to the new events (RETURNING), so an event already stored gets no task, and
# an event from a blocked address never gets one. delivery_tasks has no foreign keys (migration 0003):
# the join with ``live`` is the check. The batch's destinations ($1, known to the
# caller: cheaper than collecting them from the tasks again) are locked FOR KEY SHARE: one deleted meanwhile
# is skipped instead of failing the batch, and one being deleted waits for this commit (its delete trigger
# then removes these tasks too); a task must name a destination of its own endpoint. The NOTIFY is queued
# only when a task went in; Postgres sends it at commit. One row per endpoint with its new event ids (the
# wakeup's payload) and, in every row, the number of new tasks.
_STORE = f"""
WITH {_LOCKED},
ins AS ({_INSERT_EVENTS}),
stats AS ({events_counted("ins")}),
noted AS ({_noted("$2::boolean")}),
routed AS (
    SELECT t.task_id, i.endpoint_id, i.id AS event_id, i.received_at, t.rule_id, t.destination_id, t.order_key,
           t.order_pos, t.dedup_key, t.traceparent
      FROM {_TASK_STAGING} t JOIN ins i ON i.id = t.event_id
     WHERE i.ip_allowed IS NOT FALSE AND NOT i.handshake
), live AS (
    SELECT id, endpoint_id FROM destinations WHERE id = ANY($1::text[]) FOR KEY SHARE
), tasks AS (
    INSERT INTO delivery_tasks (id, endpoint_id, event_id, event_received_at, rule_id, destination_id, order_key,
                                order_pos, dedup_key, traceparent)
    SELECT r.task_id, r.endpoint_id, r.event_id, r.received_at, r.rule_id, r.destination_id, r.order_key,
           r.order_pos, r.dedup_key, r.traceparent
      FROM routed r JOIN live l ON l.id = r.destination_id AND l.endpoint_id = r.endpoint_id
    ON CONFLICT (destination_id, event_id, rule_id) DO NOTHING
    RETURNING 1
), counted AS (
    SELECT count(*) AS n FROM tasks
), notified AS (
    SELECT n, CASE WHEN n > 0 THEN pg_notify('{NOTIFY_CHANNEL}', '') END FROM counted
)
SELECT endpoint_id, string_agg(id, ',') AS event_ids, (SELECT n FROM notified) AS tasks
  FROM ins GROUP BY endpoint_id
"""
_STORE_UNROUTED = f"""
WITH {_LOCKED},
ins AS ({_INSERT_EVENTS}),
stats AS ({events_counted("ins")}),
noted AS ({_noted("$1::boolean")})
SELECT endpoint_id, string_agg(id, ',') AS event_ids, 0::bigint AS tasks FROM ins GROUP BY endpoint_id
"""


class Stored(NamedTuple):
    by_endpoint: list[tuple[str, str]]
    """(endpoint id, its new event ids joined with commas) for every endpoint with a new event."""
    events: int
    tasks: int


async def store_batch(
    conn: Connection, rows: Sequence[EventRow], tasks: Sequence[tuple[Any, ...]] = (), *, learn: bool = False
) -> Stored:
    """Inserts the events of ``rows`` and those of ``tasks`` (tuples in
    ``TASK_COLUMNS`` order, all of one length: the first four columns, seven, or all) whose event is new, in the
    caller's transaction; with ``learn``, notes the new ones for schema learning (``control.db.learn_queue``).

    Tasks are unique per (event, rule, destination), so even a repeated call with fresh task ids creates
    nothing; a task whose destination is gone or belongs to another endpoint is skipped.
    """
    await conn.execute(_PREPARE)  # a catalog lookup once the connection has the tables
    await conn.copy_records_to_table(_STAGING, records=rows, columns=COLUMNS)
    if tasks:
        await conn.copy_records_to_table(_TASK_STAGING, records=tasks, columns=TASK_COLUMNS[: len(tasks[0])])
        by_endpoint = await conn.fetch(_STORE, list({t[3] for t in tasks}), learn)  # destinations to lock
    else:
        by_endpoint = await conn.fetch(_STORE_UNROUTED, learn)
    return Stored(
        [(r[0], r[1]) for r in by_endpoint],
        sum(r[1].count(",") + 1 for r in by_endpoint),
        by_endpoint[0][2] if by_endpoint else 0,
    )
