"""Retries of deliveries: the delivery a single retry names, and the bulk retry jobs with their pages.

A job pages through its endpoint's tasks whose latest attempt failed (``delivery_tasks_retryable``, in id
order), one statement per page: it re-queues those whose event matches the job's filters (the very SQL of
the event list, ``control.db.events``) and records them as the job's items. The outcome of each item is read back later
from its task (``check_items``), a bounded chunk at a time. See migration 0010. A re-queued task loses its
``dedup_key``: a retry by hand is never deduplicated (migration 0020).
"""

from __future__ import annotations

from dataclasses import dataclass

import asyncpg

from control.db.connection import Connection, returned
from control.db.events import EventFilters
from control.db.events import _Where as EventWhere  # the very SQL of the shared event filters
from control.db.tasks import NOTIFY_CHANNEL

__all__ = (
    "FILTER_COLUMNS",
    "JOB_COLUMNS",
    "Checked",
    "Page",
    "check_items",
    "create_job",
    "delivery_for_account",
    "filter_values",
    "get_job",
    "running_job",
    "save_progress",
    "scan_page",
    "take_job",
)

JOB_COLUMNS = """j.id, j.endpoint_id, j.state, j.since, j.received_before, j.provider, j.event_type, j.method,
    j.signature_valid, j.q, j.destination_id, j.scanned_to, j.check_after, j.matched, j.queued, j.done,
    j.failed, j.created_at, j.updated_at, j.completed_at"""

FILTER_COLUMNS = (
    "since",
    "received_before",
    "provider",
    "event_type",
    "method",
    "signature_valid",
    "q",
    "destination_id",
)
"""A job's filters as its columns, in the order :func:`filter_values` gives their values."""


def filter_values(filters: EventFilters, destination_id: str | None) -> tuple[object, ...]:
    """The values of :data:`FILTER_COLUMNS` for a job's event filters and destination: what ``create_job``
    writes, and (as one JSON list) the key that finds a running job asked for again."""
    return (
        filters.since,
        filters.before,
        filters.provider,
        filters.event_type,
        filters.method,
        filters.signature_valid,
        filters.q,
        destination_id,
    )


_RETRYABLE = "(t.status = 'failed' OR (t.status = 'pending' AND t.attempts > 0))"
"""A task whose latest attempt did not succeed: failed for good, or waiting for its next scheduled attempt.
The predicate of the partial index ``delivery_tasks_retryable``, written exactly as there."""


async def delivery_for_account(conn: Connection, account_id: str, delivery_id: str) -> asyncpg.Record | None:
    """The attempt, if one of the account's endpoints made it."""
    return await conn.fetchrow(
        """SELECT d.id, d.endpoint_id, d.event_id, d.task_id, d.source, d.destination_id
             FROM deliveries d JOIN endpoints p ON p.id = d.endpoint_id
            WHERE d.id = $1 AND p.account_id = $2""",
        delivery_id,
        account_id,
    )


async def create_job(
    conn: Connection,
    *,
    job_id: str,
    endpoint_id: str,
    filters: EventFilters,
    destination_id: str | None,
    key: str,
) -> asyncpg.Record | None:
    """A new job, or None when the endpoint has an unfinished one with the same ``key``. ``q`` is kept as
    the caller's text: its SQL form (``filters.search``) is the service's to derive for each page."""
    return await conn.fetchrow(
        f"""WITH j AS (
                INSERT INTO delivery_retry_jobs (id, endpoint_id, filters_key, {", ".join(FILTER_COLUMNS)})
                VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
                ON CONFLICT (endpoint_id, filters_key) WHERE state <> 'completed' DO NOTHING
                RETURNING *
            )
            SELECT {JOB_COLUMNS} FROM j""",
        job_id,
        endpoint_id,
        key,
        *filter_values(filters, destination_id),
    )


async def running_job(conn: Connection, endpoint_id: str, key: str) -> asyncpg.Record | None:
    """The endpoint's unfinished job with this ``key``."""
    return await conn.fetchrow(
        f"""SELECT {JOB_COLUMNS} FROM delivery_retry_jobs j
             WHERE j.endpoint_id = $1 AND j.filters_key = $2 AND j.state <> 'completed'""",
        endpoint_id,
        key,
    )


async def get_job(conn: Connection, account_id: str, job_id: str) -> asyncpg.Record | None:
    return await conn.fetchrow(
        f"""SELECT {JOB_COLUMNS} FROM delivery_retry_jobs j JOIN endpoints p ON p.id = j.endpoint_id
             WHERE j.id = $1 AND p.account_id = $2""",
        job_id,
        account_id,
    )


async def take_job(conn: Connection, *, exclude: list[str]) -> asyncpg.Record | None:
    """The unfinished job advanced least recently (none taken by another worker: SKIP LOCKED), locked until
    the caller's transaction ends."""
    return await conn.fetchrow(
        f"""SELECT {JOB_COLUMNS} FROM delivery_retry_jobs j
             WHERE j.state <> 'completed' AND j.id <> ALL($1::text[])
             ORDER BY j.checked_at NULLS FIRST, j.id
             LIMIT 1
               FOR UPDATE SKIP LOCKED""",
        exclude,
    )


@dataclass(frozen=True, slots=True)
class Page:
    visited: int
    """Tasks whose latest attempt failed, looked at (a page is full when this is the page size)."""
    last_id: str | None
    matched: int
    """Of those, the ones the job's filters select."""
    queued: int
    """Of those, the ones re-queued (the others changed meanwhile: in flight, or succeeded)."""


async def scan_page(conn: Connection, job: asyncpg.Record, filters: EventFilters, *, size: int) -> Page:
    """The next ``size`` tasks of the job's endpoint whose latest attempt failed, after ``scanned_to``: those
    that match are made due now and become the job's items, in one statement. Their destinations' transform
    crash marks are cleared, as a single retry clears its destination's (``destinations.clear_transform_crash``):
    a retry asks for the transform to run again. Left marked, every retried delivery failed again at once,
    "not run: ... retry the delivery to run it again", its attempt spent and its transform never tried.

    A task matches when it existed when the job was created, its event matches the filters (the same SQL
    as the event list), it is of the job's destination (if any), and no other task of the same event and
    destination (another rule routing there) has succeeded: the destination already has the event."""
    args: list[object] = [job["id"], job["endpoint_id"], job["scanned_to"], size, job["created_at"]]
    where = EventWhere(job["endpoint_id"], args).filters(filters)
    if job["destination_id"] is not None:
        where.add("v.destination_id = {}", job["destination_id"])
    row = returned(
        await conn.fetchrow(
            f"""WITH visited AS (
                SELECT t.id, t.event_id, t.event_received_at, t.destination_id, t.created_at, t.last_error
                  FROM delivery_tasks t
                 WHERE t.endpoint_id = $2 AND t.id > $3 AND {_RETRYABLE}
                 ORDER BY t.id
                 LIMIT $4
            ), matched AS (
                SELECT v.id
                  FROM visited v JOIN events e ON e.id = v.event_id AND e.received_at = v.event_received_at
                 WHERE v.created_at <= $5 AND v.last_error IS NOT NULL AND {where.sql}
                   AND NOT EXISTS (SELECT 1 FROM delivery_tasks s
                                    WHERE s.event_id = v.event_id AND s.destination_id = v.destination_id
                                      AND s.id <> v.id AND s.status = 'succeeded')
            ), queued AS (
                UPDATE delivery_tasks t
                   SET status = 'pending', next_attempt_at = now(), lease_expires_at = NULL, dedup_key = NULL,
                       updated_at = now()
                  FROM matched m
                 WHERE t.id = m.id AND {_RETRYABLE}
                RETURNING t.id, t.attempts, t.destination_id
            ), asked AS (
                UPDATE destinations d SET transform_crashed_at = NULL, transform_crash = NULL
                 WHERE d.id IN (SELECT destination_id FROM queued) AND d.transform_crashed_at IS NOT NULL
            ), items AS (
                INSERT INTO delivery_retry_items (job_id, task_id, attempts)
                SELECT $1, id, attempts FROM queued
                ON CONFLICT DO NOTHING
            ), counts AS (
                SELECT (SELECT count(*) FROM visited) AS visited, (SELECT max(id) FROM visited) AS last_id,
                       (SELECT count(*) FROM matched) AS matched, (SELECT count(*) FROM queued) AS queued
            )
            SELECT visited, last_id, matched, queued,
                   CASE WHEN queued > 0 THEN pg_notify('{NOTIFY_CHANNEL}', '') END
              FROM counts""",
            *where.args,
        )
    )
    return Page(visited=row["visited"], last_id=row["last_id"], matched=row["matched"], queued=row["queued"])


@dataclass(frozen=True, slots=True)
class Checked:
    checked: int
    """Items looked at (a full chunk when this is the limit)."""
    last_task_id: str | None
    done: int
    """Items whose task's new attempt succeeded (removed)."""
    failed: int
    """Items whose task's new attempt failed, or whose task is gone (its destination deleted) (removed)."""


async def check_items(conn: Connection, job_id: str, *, after: str, limit: int) -> Checked:
    """Up to ``limit`` of the job's items after task id ``after``: those whose task made an attempt since it
    was re-queued, and is not in flight, are finished, counted by outcome and removed."""
    row = returned(
        await conn.fetchrow(
            """WITH checked AS (
               SELECT i.task_id, i.attempts, t.id IS NULL AS gone, t.status, t.attempts AS now_attempts
                 FROM delivery_retry_items i LEFT JOIN delivery_tasks t ON t.id = i.task_id
                WHERE i.job_id = $1 AND i.task_id > $2
                ORDER BY i.task_id
                LIMIT $3
           ), finished AS (
               SELECT task_id, status FROM checked
                WHERE gone OR (now_attempts > attempts AND status <> 'in_flight')
           ), removed AS (
               DELETE FROM delivery_retry_items i USING finished f WHERE i.job_id = $1 AND i.task_id = f.task_id
           )
           SELECT (SELECT count(*) FROM checked) AS checked, (SELECT max(task_id) FROM checked) AS last_task_id,
                  (SELECT count(*) FROM finished WHERE status = 'succeeded') AS done,
                  (SELECT count(*) FROM finished WHERE status IS DISTINCT FROM 'succeeded') AS failed""",
            job_id,
            after,
            limit,
        )
    )
    return Checked(checked=row["checked"], last_task_id=row["last_task_id"], done=row["done"], failed=row["failed"])


async def save_progress(
    conn: Connection,
    job_id: str,
    *,
    state: str,
    scanned_to: str,
    check_after: str,
    matched: int,
    queued: int,
    done: int,
    failed: int,
) -> None:
    """Writes a step's result: the state, both cursors, and the counts added by the step."""
    await conn.execute(
        """UPDATE delivery_retry_jobs
              SET state = $2, scanned_to = $3, check_after = $4, matched = matched + $5, queued = queued + $6,
                  done = done + $7, failed = failed + $8, checked_at = clock_timestamp(),
                  updated_at = CASE WHEN $5 + $6 + $7 + $8 > 0 OR state <> $2 THEN now() ELSE updated_at END,
                  completed_at = CASE WHEN $2 = 'completed' THEN now() ELSE completed_at END
            WHERE id = $1""",
        job_id,
        state,
        scanned_to,
        check_after,
        matched,
        queued,
        done,
        failed,
    )
