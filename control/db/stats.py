"""The stats counters (migration 0009): added to by the flush and the delivery recorder, read by the stats route.

Writers count only rows they actually inserted, so counting is as idempotent as the inserts themselves: the
flush's statement counts the RETURNING of its events insert (``events_counted``), the deliveries insert the
rows it returned (``deliveries_counted``), each in the inserting statement. Each count goes to a minute row,
a ten-minute row and an hour row (``SPANS``), so a coarser row is always the exact sum of the finer ones; a
window starting on a minute reads minutes up to its first whole ten minutes, ten minutes up to its first
whole hour, and whole hours after (``Window``: at most 9 + 5 + 24 rows per key and slot, where minutes and
hours alone read up to 59 + 24).

Rows are upserted in key order (no deadlock between writers) into the slot of the writing backend
(``pg_backend_pid() % SLOTS``): concurrent writers rarely share a row, so they rarely wait for each other's
commit; readers sum the slots.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import asyncpg
import msgspec

from control.db.connection import Connection
from control.db.histogram import BOUNDS_MS, SIZE
from control.records.stats import Circuit

__all__ = (
    "EVENT_TYPE_CHARS",
    "LATENCY_COLUMNS",
    "SLOTS",
    "DeliveryCounts",
    "DestinationState",
    "Window",
    "count_deliveries",
    "deliveries_counted",
    "delivery_counts",
    "destination_states",
    "event_counts",
    "events_counted",
    "prune",
)

SLOTS = 4
EVENT_TYPE_CHARS = 200
"""Event types are counted by their first 200 characters (a key column, not a copy of the value)."""
_SLOT = f"(pg_backend_pid() % {SLOTS})::smallint"
_ORIGIN = "'2000-01-01 00:00:00+00'::timestamptz"
"""Minutes, ten minutes and hours are binned from a UTC midnight."""
_SPANS = (
    "(VALUES (1::smallint, interval '1 minute'), (10::smallint, interval '10 minutes'),"
    " (60::smallint, interval '1 hour')) AS s(span, width)"
)
"""The rows each count goes to: its minute, its ten minutes and its hour (``span`` in minutes, migrations 0009
and 0037)."""


@dataclass(frozen=True, slots=True)
class Window:
    """``since`` (a whole minute) to ``until``: minute rows of ``[since, first_ten)``, ten-minute rows of
    ``[first_ten, first_hour)``, hour rows from ``first_hour`` on (the first ten minutes and the first hour
    starting at or after ``since``)."""

    since: datetime
    until: datetime

    @classmethod
    def last(cls, hours: int, now: datetime) -> Window:
        """The last ``hours`` hours before ``now``, from the start of their first minute."""
        return cls(now.astimezone(UTC).replace(second=0, microsecond=0) - timedelta(hours=hours), now)

    @property
    def first_hour(self) -> datetime:
        start = self.since.replace(minute=0)
        return start if start == self.since else start + timedelta(hours=1)

    @property
    def first_ten(self) -> datetime:
        start = self.since.replace(minute=self.since.minute - self.since.minute % 10)
        return start if start == self.since else start + timedelta(minutes=10)


def events_counted(source: str) -> str:
    """The INSERT adding to ``stats_events`` the events of the CTE ``source`` (rows with endpoint_id,
    received_at, provider, event_type, signature_failure_reason): a CTE of the flush's statement.

    The events are grouped per minute first, then each group goes to its minute, ten minutes and hour. ``date_bin``
    from a UTC origin is arithmetic on the timestamp; ``date_trunc(..., 'UTC')`` looks the zone up for every
    row and cost the flush about 5 ms per 3,000 events."""
    return f"""
    INSERT INTO stats_events AS c (endpoint_id, span, start, provider, event_type, failure, slot, count)
    SELECT m.endpoint_id, s.span, date_bin(s.width, m.minute, {_ORIGIN}), m.provider, m.event_type, m.failure,
           {_SLOT}, sum(m.n)
      FROM (SELECT endpoint_id, date_bin('1 minute', received_at, {_ORIGIN}) AS minute, provider,
                   left(event_type, {EVENT_TYPE_CHARS}) AS event_type, signature_failure_reason AS failure,
                   count(*) AS n
              FROM {source} GROUP BY 1, 2, 3, 4, 5) m
     CROSS JOIN {_SPANS}
     GROUP BY 1, 2, 3, 4, 5, 6
     ORDER BY 1, 2, 3, 4, 5, 6
    ON CONFLICT ON CONSTRAINT stats_events_key DO UPDATE SET count = c.count + excluded.count
    RETURNING 1"""


LATENCY_COLUMNS = (*(f"ms_le_{b}" for b in BOUNDS_MS), "ms_over")
"""The histogram's buckets as columns of ``stats_deliveries`` (migration 0009), in bucket order."""

_BUCKET = f"width_bucket(latency_ms - 1, '{{{','.join(map(str, BOUNDS_MS))}}}'::int[])"
"""A latency's histogram bucket (``histogram.bucket``): the bounds below it, found by binary search in C; an
integer ``v`` is above a bound exactly when ``v - 1`` is at or above it. Null without a latency."""


def deliveries_counted(source: str) -> str:
    """The INSERT adding to ``stats_deliveries`` the rule attempts of the CTE ``source`` (rows with endpoint_id,
    destination_id, created_at, success, latency_ms): a CTE of the statement that inserts them, so only rows
    actually inserted are counted and a batch written twice is counted once.

    Each attempt goes to its minute, ten minutes and hour, its latency to a histogram column; rows are grouped
    per minute first, then each group goes to every span, in key order (no deadlock between writers). Counting here, not
    in Python before the insert, keeps the recorder's batch one statement (ADR 0042, session 10)."""
    return f"""
    INSERT INTO stats_deliveries AS c
           (endpoint_id, span, start, destination_id, slot, attempts, succeeded, {", ".join(LATENCY_COLUMNS)})
    SELECT m.endpoint_id, s.span, date_bin(s.width, m.minute, {_ORIGIN}), m.destination_id, {_SLOT},
           sum(m.attempts), sum(m.succeeded), {", ".join(f"sum(m.h{i})" for i in range(SIZE))}
      FROM (SELECT endpoint_id, destination_id, date_bin('1 minute', created_at, {_ORIGIN}) AS minute,
                   count(*) AS attempts, count(*) FILTER (WHERE success) AS succeeded,
                   {", ".join(f"count(*) FILTER (WHERE b = {i}) AS h{i}" for i in range(SIZE))}
              FROM (SELECT *, {_BUCKET} AS b FROM {source}) r
             GROUP BY 1, 2, 3) m
     CROSS JOIN {_SPANS}
     GROUP BY 1, 2, 3, 4
     ORDER BY 1, 2, 3, 4
    ON CONFLICT (endpoint_id, span, start, destination_id, slot) DO UPDATE
       SET attempts = c.attempts + excluded.attempts, succeeded = c.succeeded + excluded.succeeded,
           {", ".join(f"{col} = c.{col} + excluded.{col}" for col in LATENCY_COLUMNS)}
    RETURNING 1"""


_COUNT_DELIVERIES = f"""
WITH attempts AS (
    SELECT * FROM unnest($1::text[], $2::text[], $3::timestamptz[], $4::boolean[], $5::int[])
                  AS a(endpoint_id, destination_id, created_at, success, latency_ms)
), counted AS ({deliveries_counted("attempts")})
SELECT count(*) FROM counted"""


async def count_deliveries(conn: Connection, attempts: Sequence[tuple[str, str, datetime, bool, int | None]]) -> None:
    """Adds rule attempts ``(endpoint_id, destination_id, created_at, success, latency_ms)`` to their minute and
    hour, in the caller's transaction: for counts of rows not inserted by ``delivery_records`` (the stats
    bench's fill), with the same statement as the inserts' own counting."""
    if attempts:
        await conn.fetchval(_COUNT_DELIVERIES, *(list(column) for column in zip(*attempts, strict=True)))


def _window_rows(columns: str, table: str, where: str = "") -> str:
    """The rows of ``table`` in the window ($1 endpoint, $2 since, $3 first ten minutes, $4 first hour,
    $5 until)."""
    return f"""
        SELECT {columns} FROM {table}
         WHERE endpoint_id = $1 AND span = 1 AND start >= $2 AND start < $3 AND start <= $5{where}
        UNION ALL
        SELECT {columns} FROM {table}
         WHERE endpoint_id = $1 AND span = 10 AND start >= $3 AND start < $4 AND start <= $5{where}
        UNION ALL
        SELECT {columns} FROM {table}
         WHERE endpoint_id = $1 AND span = 60 AND start >= $4 AND start <= $5{where}"""


_EVENT_ROWS = _window_rows(
    f"date_bin('1 hour', start, {_ORIGIN}) AS hour, provider, event_type, failure, count", "stats_events"
)
_EVENT_COUNTS = f"""
SELECT grouping(hour, provider, event_type, failure) AS grouped, hour, provider, event_type, failure,
       sum(count)::bigint AS count
  FROM ({_EVENT_ROWS}) w
 GROUP BY GROUPING SETS ((hour), (provider, event_type, failure))
"""
EVENTS_BY_HOUR, EVENTS_BY_KEY = 0b0111, 0b1000
"""``grouped`` of each grouping set (a bit per column left out: hour 8, provider 4, event_type 2, failure 1).
The totals by provider, by type and by failure are sums of the key rows, added up by the caller: two grouping
sets hash each counter row twice where four hashed it four times (15 % of the statement on the bench's data)."""

_DELIVERY_ROWS = _window_rows(
    f"destination_id, attempts, succeeded, {', '.join(LATENCY_COLUMNS)}",
    "stats_deliveries",
    " AND ($6::text IS NULL OR destination_id = $6)",
)
_DELIVERY_COUNTS = f"""
SELECT destination_id, sum(attempts)::bigint AS attempts, sum(succeeded)::bigint AS succeeded,
       ARRAY[{", ".join(f"sum({col})::bigint" for col in LATENCY_COLUMNS)}] AS latency
  FROM ({_DELIVERY_ROWS}) w
 GROUP BY destination_id
"""


class DeliveryCounts(msgspec.Struct, kw_only=True, frozen=True):
    """Rule attempts in a window, of one destination or of all of them (``destination_id`` None); ``latency``
    is the summed histogram (``histogram.SIZE`` counts)."""

    destination_id: str | None
    attempts: int
    succeeded: int
    latency: list[int]


# The latest rule attempt of each destination, found through deliveries_destination_created (a copy its
# deduplication skipped and a delivery its transform skipped sent nothing: recorded, not attempts, as in the
# counts); a pause that is still on; the FIFO tasks waiting behind the head of their queue
# (delivery_tasks_fifo: none for others); and the tasks a disabled destination holds (delivery_tasks_held).
_DESTINATION_STATES = """
SELECT d.id, d.name, d.url, d.consecutive_failures, d.circuit, d.circuit_opened_at,
       l.response_status AS last_status, l.created_at AS last_attempt_at,
       CASE WHEN d.paused_until > now() THEN d.paused_until END AS paused_until,
       (SELECT count(*) - count(DISTINCT q.order_key) FROM delivery_tasks q
         WHERE q.destination_id = d.id AND q.order_key IS NOT NULL AND q.status IN ('pending', 'in_flight'))
           AS fifo_waiting,
       (SELECT count(*) FROM delivery_tasks h WHERE h.destination_id = d.id AND h.status = 'held') AS held
  FROM destinations d
  LEFT JOIN LATERAL (SELECT x.response_status, x.created_at FROM deliveries x
                      WHERE x.destination_id = d.id AND x.source = 'rule' AND x.duplicate_of IS NULL
                        AND (x.transform IS NULL OR x.transform ->> 'outcome' IS DISTINCT FROM 'skipped')
                      ORDER BY x.created_at DESC LIMIT 1) l ON true
 WHERE d.endpoint_id = $1 AND ($2::text IS NULL OR d.id = $2)
 ORDER BY d.created_at, d.id
"""


def _bounds(window: Window) -> tuple[datetime, datetime, datetime, datetime]:
    return window.since, window.first_ten, window.first_hour, window.until


async def event_counts(conn: Connection, endpoint_id: str, window: Window) -> list[asyncpg.Record]:
    """The endpoint's event counts in the window, one row per group of each grouping set (``grouped``
    says which: ``EVENTS_BY_*``)."""
    return await conn.fetch(_EVENT_COUNTS, endpoint_id, *_bounds(window))


async def delivery_counts(
    conn: Connection, endpoint_id: str, window: Window, destination_id: str | None = None
) -> tuple[DeliveryCounts, dict[str, DeliveryCounts]]:
    """Rule attempts in the window over all destinations (zeros when nothing was counted) and per destination.
    The overall counts are the sums of the destinations' (deleted ones' too: their rows stay), added here
    rather than by a second grouping set that summed every row's 53 columns twice."""
    rows = await conn.fetch(_DELIVERY_COUNTS, endpoint_id, *_bounds(window), destination_id)
    by_destination = {
        row["destination_id"]: DeliveryCounts(
            destination_id=row["destination_id"],
            attempts=row["attempts"],
            succeeded=row["succeeded"],
            latency=list(row["latency"]),
        )
        for row in rows
    }
    counts = by_destination.values()
    overall = DeliveryCounts(
        destination_id=None,
        attempts=sum(c.attempts for c in counts),
        succeeded=sum(c.succeeded for c in counts),
        latency=[sum(column) for column in zip(*(c.latency for c in counts), strict=True)] or [0] * SIZE,
    )
    return overall, by_destination


class DestinationState(msgspec.Struct, kw_only=True, frozen=True):
    """A row of ``_DESTINATION_STATES``: a destination, its circuit, its latest rule attempt, its pause (None
    once over) and its FIFO backlog."""

    id: str
    name: str | None
    url: str
    consecutive_failures: int
    circuit: Circuit
    circuit_opened_at: datetime | None
    last_status: int | None
    last_attempt_at: datetime | None
    paused_until: datetime | None
    fifo_waiting: int
    held: int


async def destination_states(
    conn: Connection, endpoint_id: str, destination_id: str | None = None
) -> list[DestinationState]:
    """The endpoint's destinations (or the one), oldest first, with their circuit, latest rule attempt,
    pause and FIFO backlog."""
    rows = await conn.fetch(_DESTINATION_STATES, endpoint_id, destination_id)
    return [DestinationState(**dict(row.items())) for row in rows]


async def prune(conn: Connection, *, keep: timedelta) -> int:
    """Deletes the counters that start more than ``keep`` before now (a window of ``keep`` minus a minute
    and less reads none of them); returns how many rows went."""
    deleted = 0
    for table in ("stats_events", "stats_deliveries"):
        done = await conn.execute(f"DELETE FROM {table} WHERE start < now() - $1::interval", keep)
        deleted += int(done.rsplit(" ", 1)[-1])
    return deleted
