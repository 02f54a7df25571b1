"""Erasure jobs (migrations 0018 and 0019): the job rows, one page of an endpoint's events with the candidates marked,
and the erasure of matched events with everything that holds their data.

A page is the next ``size`` events of the endpoint after the job's cursor, in ``events_endpoint_received``
order, over every day partition (the default one included). Its candidates are marked by a condition that
every match satisfies (``Candidates``): for a body field and a text value, the value's bytes in the raw body
or an escape (``\\``) anywhere in it; for a header, its stored value; for a label, the label. Only candidates
carry their columns back, and the service decides each exactly, with the condition trees' own ``equals``.

An erasure is two statements in the caller's transaction (``erase``): the events, then their deliveries
(records, bodies and all: the record of an attempt to send an erased event is data about it), their delivery
tasks and the deduplication keys they own. The tasks are locked first (``busy``), so an attempt in flight is seen: its
record would be written after the erasure, so its event waits (``erasure_deferred``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import NamedTuple

import asyncpg

from control.db.connection import Connection, returned

__all__ = (
    "JOB_COLUMNS",
    "Candidates",
    "Erased",
    "Page",
    "busy",
    "create_job",
    "defer",
    "deferred",
    "erase",
    "fail_step",
    "finish",
    "get_job",
    "list_jobs",
    "page",
    "save_progress",
    "schema_states",
    "schema_versions",
    "store_schema_states",
    "store_version_fields",
    "take_job",
    "undefer",
)

JOB_COLUMNS = """j.id, j.account_id, j.endpoint_id, j.field, j.value, j.value_sha256, j.state, j.stage, j.scanned_at,
    j.scanned_id, j.scanned, j.matched, j.erased, j.deliveries_erased, j.dead_letters_erased, j.schemas_scrubbed,
    j.error, j.created_at, j.started_at, j.finished_at, j.ingest_marks, j.failures"""


async def create_job(
    conn: Connection,
    *,
    job_id: str,
    account_id: str,
    endpoint_id: str,
    field: str,
    value: object,
    sha256: str,
    ingest_marks: list[str | None],
) -> asyncpg.Record:
    """``value`` is kept as jsonb (so its type stays), encoded by the pool's codec (``control.db``). The job
    starts at the ``ingest`` stage, waiting for the flush to pass ``ingest_marks``."""
    return returned(
        await conn.fetchrow(
            f"""WITH j AS (
                INSERT INTO erasure_jobs (id, account_id, endpoint_id, field, value, value_sha256, ingest_marks, stage)
                VALUES ($1, $2, $3, $4, $5::jsonb, $6, $7::text[], 'ingest') RETURNING *
            )
            SELECT {JOB_COLUMNS} FROM j""",
            job_id,
            account_id,
            endpoint_id,
            field,
            value,
            sha256,
            ingest_marks,
        )
    )


async def get_job(conn: Connection, account_id: str, job_id: str) -> asyncpg.Record | None:
    return await conn.fetchrow(
        f"SELECT {JOB_COLUMNS} FROM erasure_jobs j WHERE j.id = $1 AND j.account_id = $2", job_id, account_id
    )


async def list_jobs(
    conn: Connection, account_id: str, *, endpoint_id: str | None, before: str | None, limit: int
) -> list[asyncpg.Record]:
    """Newest first; ``before``: the last id of the previous page. Jobs of expired endpoints are left out."""
    return await conn.fetch(
        f"""SELECT {JOB_COLUMNS} FROM erasure_jobs j
             WHERE j.account_id = $1 AND ($2::text IS NULL OR j.endpoint_id = $2) AND ($3::text IS NULL OR j.id < $3)
               AND NOT EXISTS (SELECT 1 FROM endpoints p WHERE p.id = j.endpoint_id AND p.expires_at <= now())
             ORDER BY j.id DESC LIMIT $4""",
        account_id,
        endpoint_id,
        before,
        limit,
    )


async def take_job(conn: Connection, *, exclude: list[str], retry_s: float) -> asyncpg.Record | None:
    """An unfinished job that no other worker holds (SKIP LOCKED), locked until the caller's transaction ends,
    with its endpoint's environment (null: the endpoint is gone): of the account whose unfinished jobs were
    advanced least recently, the one advanced least recently. Per account first, so an account with many
    jobs (or one that keeps failing: a failed step counts as advanced) takes one step in turn with every
    other account, never all of them. A job whose last step failed waits ``retry_s`` times its failures."""
    return await conn.fetchrow(
        f"""WITH served AS (
                SELECT account_id, max(checked_at) AS last FROM erasure_jobs
                 WHERE state IN ('pending', 'running') GROUP BY account_id
            )
            SELECT {JOB_COLUMNS}, p.environment
              FROM erasure_jobs j JOIN served s ON s.account_id = j.account_id
              LEFT JOIN endpoints p ON p.id = j.endpoint_id
             WHERE j.state IN ('pending', 'running') AND j.id <> ALL($1::text[])
               AND (j.failures = 0 OR j.checked_at <= clock_timestamp() - make_interval(secs => $2 * j.failures))
             ORDER BY s.last NULLS FIRST, j.checked_at NULLS FIRST, j.id
             LIMIT 1
               FOR UPDATE OF j SKIP LOCKED""",
        exclude,
        retry_s,
    )


@dataclass(frozen=True, slots=True)
class Candidates:
    """The SQL condition a page marks candidates by (``{}`` placeholders take ``args`` in order)."""

    sql: str
    args: tuple[object, ...] = ()


class Page(NamedTuple):
    visited: int
    last_at: datetime | None
    last_id: str | None
    rows: list[asyncpg.Record]
    """The candidates, with the columns an event view needs."""


async def page(
    conn: Connection,
    endpoint_id: str,
    *,
    after_at: datetime | None,
    after_id: str | None,
    size: int,
    candidates: Candidates,
) -> Page:
    args: list[object] = [endpoint_id, after_at, after_id or "", size]
    marks = []
    for arg in candidates.args:
        args.append(arg)
        marks.append(f"${len(args)}")
    condition = candidates.sql.format(*marks)
    rows = await conn.fetch(
        f"""WITH visited AS (
                SELECT id, received_at FROM events
                 WHERE endpoint_id = $1 AND ($2::timestamptz IS NULL OR (received_at, id) > ($2, $3))
                 ORDER BY received_at, id
                 LIMIT $4
            ), marked AS (
                SELECT e.id, e.received_at, ({condition}) AS candidate, e.body, e.headers, e.labels, e.provider,
                       e.event_type, e.method, e.path, e.content_type, host(e.source_ip) AS source_ip,
                       e.signature_valid, e.ip_allowed
                  FROM visited v JOIN events e ON e.id = v.id AND e.received_at = v.received_at
                 WHERE e.endpoint_id = $1
            )
            SELECT (SELECT count(*) FROM visited) AS visited, (SELECT max(received_at) FROM visited) AS last_at,
                   (SELECT max(id) FROM visited WHERE received_at = (SELECT max(received_at) FROM visited)) AS last_id,
                   m.* FROM (SELECT 1) one LEFT JOIN marked m ON m.candidate""",
        *args,
    )
    head = rows[0]
    found = [r for r in rows if r["id"] is not None]
    return Page(head["visited"], head["last_at"], head["last_id"], found)


_TASKS_OF = """destination_id IN (SELECT id FROM destinations WHERE endpoint_id = $1)
                   AND event_id = any($2::text[]) AND endpoint_id = $1"""
"""The endpoint's tasks of the events ``$2``. Their key leads with the destination (migration 0029), and an
endpoint's tasks are all to its own destinations (a deleted destination's tasks go with it)."""


async def busy(conn: Connection, endpoint_id: str, event_ids: list[str]) -> set[str]:
    """Locks the events' delivery tasks (a claim in progress finishes first) and answers the events with an
    attempt in flight."""
    rows = await conn.fetch(
        f"""SELECT event_id, status FROM delivery_tasks
            WHERE {_TASKS_OF} ORDER BY id FOR UPDATE""",
        endpoint_id,
        event_ids,
    )
    return {r["event_id"] for r in rows if r["status"] == "in_flight"}


class Erased(NamedTuple):
    events: int
    deliveries: int


# The events are locked in (received_at, id) order before they are deleted: the order the learn worker
# locks the events it reads (``control.db.learn_queue.events``), so an erasure and a learner sharing events
# wait for each other, never in a cycle (a DELETE alone locks in whatever order its join plan visits).
_ERASE_EVENTS = """
WITH locked AS (
    SELECT e.id, e.received_at FROM events e JOIN unnest($2::text[], $3::timestamptz[]) AS m(id, received_at)
        ON e.id = m.id AND e.received_at = m.received_at
     WHERE e.endpoint_id = $1
     ORDER BY e.received_at, e.id
       FOR UPDATE OF e
)
DELETE FROM events e USING locked l
 WHERE e.endpoint_id = $1 AND e.id = l.id AND e.received_at = l.received_at
"""
_ERASE_HOLDERS = f"""
WITH d AS (
    DELETE FROM deliveries WHERE event_id = any($2::text[]) AND endpoint_id = $1 RETURNING 1
), t AS (
    DELETE FROM delivery_tasks WHERE {_TASKS_OF} RETURNING 1
), k AS (
    DELETE FROM delivery_dedup WHERE event_id = any($2::text[])
       AND destination_id IN (SELECT id FROM destinations WHERE endpoint_id = $1)
    RETURNING 1
)
SELECT (SELECT count(*) FROM d) AS deliveries, (SELECT count(*) FROM t) AS tasks, (SELECT count(*) FROM k) AS keys
"""


async def erase(conn: Connection, endpoint_id: str, events: list[tuple[str, datetime]]) -> Erased:
    """Removes the events (id, received_at) of the endpoint and what holds their data; counts what it removed.

    Two statements, the events first, locked in arrival order (the order the learn worker locks the events
    it reads, ``control.db.learn_queue.events``; the deletion waits for that worker's commit): a replay that
    records its delivery locks its event first (``control.db.delivery_records.insert_for_event``), so the
    events' deletion waits for a replay's commit, and the second statement, with a snapshot taken after it,
    sees that replay's record too; a replay that comes later finds no event and records nothing."""
    if not events:
        return Erased(0, 0)
    ids, received = [e[0] for e in events], [e[1] for e in events]
    done = await conn.execute(_ERASE_EVENTS, endpoint_id, ids, received)
    row = await conn.fetchrow(_ERASE_HOLDERS, endpoint_id, ids)
    return Erased(int(done.rsplit(" ", 1)[-1]), returned(row)["deliveries"])


async def defer(conn: Connection, job_id: str, events: list[tuple[str, datetime]]) -> None:
    await conn.execute(
        """INSERT INTO erasure_deferred (job_id, event_id, received_at)
           SELECT $1, * FROM unnest($2::text[], $3::timestamptz[]) ON CONFLICT DO NOTHING""",
        job_id,
        [e[0] for e in events],
        [e[1] for e in events],
    )


async def deferred(conn: Connection, job_id: str, limit: int) -> list[tuple[str, datetime]]:
    rows = await conn.fetch(
        "SELECT event_id, received_at FROM erasure_deferred WHERE job_id = $1 ORDER BY event_id LIMIT $2",
        job_id,
        limit,
    )
    return [(r["event_id"], r["received_at"]) for r in rows]


async def undefer(conn: Connection, job_id: str, event_ids: list[str]) -> None:
    await conn.execute(
        "DELETE FROM erasure_deferred WHERE job_id = $1 AND event_id = any($2::text[])", job_id, event_ids
    )


async def save_progress(
    conn: Connection,
    job_id: str,
    *,
    stage: str,
    scanned_at: datetime | None,
    scanned_id: str | None,
    scanned: int = 0,
    matched: int = 0,
    erased: int = 0,
    deliveries: int = 0,
) -> None:
    """A step's result: the stage, the cursor, and the counts the step adds; the job is running from its
    first step on, and a step that moved clears the failures before it."""
    await conn.execute(
        """UPDATE erasure_jobs
              SET state = 'running', stage = $2, scanned_at = $3, scanned_id = $4, scanned = scanned + $5,
                  matched = matched + $6, erased = erased + $7, deliveries_erased = deliveries_erased + $8,
                  failures = 0, error = NULL, started_at = coalesce(started_at, now()), checked_at = clock_timestamp()
            WHERE id = $1""",
        job_id,
        stage,
        scanned_at,
        scanned_id,
        scanned,
        matched,
        erased,
        deliveries,
    )


async def finish(
    conn: Connection, job_id: str, *, state: str, dead_letters: int, schemas: int, error: str | None
) -> asyncpg.Record:
    """Done or failed: the value is dropped (its hash stays), the last counts written."""
    return returned(
        await conn.fetchrow(
            f"""WITH j AS (
                UPDATE erasure_jobs
                   SET state = $2, value = NULL, dead_letters_erased = dead_letters_erased + $3,
                       schemas_scrubbed = schemas_scrubbed + $4, error = $5, finished_at = now(),
                       started_at = coalesce(started_at, now()), checked_at = clock_timestamp()
                 WHERE id = $1 RETURNING *
            )
            SELECT {JOB_COLUMNS} FROM j""",
            job_id,
            state,
            dead_letters,
            schemas,
            error,
        )
    )


async def fail_step(conn: Connection, job_id: str, *, error: str, limit: int) -> asyncpg.Record | None:
    """Counts a step that failed for the job's data and says why (``error``); the ``limit``-th in a row makes
    the job ``failed``, its value dropped as a finished job's is. None: the job was no longer unfinished."""
    return await conn.fetchrow(
        f"""WITH j AS (
                UPDATE erasure_jobs
                   SET failures = failures + 1, error = $2, checked_at = clock_timestamp(),
                       state = CASE WHEN failures + 1 >= $3 THEN 'failed' ELSE state END,
                       value = CASE WHEN failures + 1 >= $3 THEN NULL ELSE value END,
                       finished_at = CASE WHEN failures + 1 >= $3 THEN now() END
                 WHERE id = $1 AND state IN ('pending', 'running') RETURNING *
            )
            SELECT {JOB_COLUMNS} FROM j""",
        job_id,
        error,
        limit,
    )


async def schema_states(conn: Connection, endpoint_id: str) -> list[tuple[str, bytes | None]]:
    """The states of the schemas learned on the endpoint, locked (id order, as the flush locks them) until the
    caller's transaction ends."""
    rows = await conn.fetch(
        """SELECT s.id, s.state FROM schemas s
            WHERE s.id IN (SELECT schema_id FROM schema_endpoints WHERE endpoint_id = $1)
            ORDER BY s.id FOR UPDATE""",
        endpoint_id,
    )
    return [(r["id"], r["state"]) for r in rows]


async def store_schema_states(conn: Connection, updates: list[tuple[str, bytes, int]]) -> None:
    """(schema id, state, new revision): a flush worker's cached copy of the state is stale from now on."""
    if updates:
        await conn.executemany("UPDATE schemas SET state = $2, revision = $3 WHERE id = $1", updates)


async def schema_versions(conn: Connection, schema_ids: list[str]) -> list[tuple[str, int, str]]:
    """(schema id, version, fields JSON) of every version of the schemas (whose rows the caller locked)."""
    rows = await conn.fetch(
        """SELECT schema_id, version, fields::text AS fields FROM schema_versions
            WHERE schema_id = any($1::text[]) ORDER BY schema_id, version""",
        schema_ids,
    )
    return [(r["schema_id"], r["version"], r["fields"]) for r in rows]


async def store_version_fields(conn: Connection, updates: list[tuple[str, int, str]]) -> None:
    """(schema id, version, fields JSON): a version's fields rewritten without what an erasure named."""
    if updates:
        await conn.executemany(
            "UPDATE schema_versions SET fields = $3::jsonb WHERE schema_id = $1 AND version = $2", updates
        )
