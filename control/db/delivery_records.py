"""Writes of delivery attempts (one ``deliveries`` row per outbound try) and the destination look-ups that
replay and the destination test need.

Inserts are idempotent on the row's id: a group commit whose COMMIT went through but whose answer was lost
(the connection died) is written again by the recorder, and must neither fail nor duplicate its rows. The
rule attempts among the rows an insert actually stored (its RETURNING) are added to the stats counters in
the same transaction (``control.db.stats``), so a batch written twice is counted once."""

from __future__ import annotations

from collections.abc import Sequence

import asyncpg

from control.db import circuit as db_circuit
from control.db import stats
from control.db import tasks as db_tasks
from control.db.connection import Connection

__all__ = (
    "COLUMNS",
    "destination_for_account",
    "destination_with_url",
    "insert",
    "insert_for_event",
    "insert_many",
    "reduced",
    "write",
)

COLUMNS = (
    "id",
    "endpoint_id",
    "event_id",
    "task_id",
    "destination_id",
    "destination_name",
    "destination_url",
    "rule_id",
    "source",
    "attempt_number",
    "request_headers",
    "request_body",
    "response_status",
    "response_body",
    "latency_ms",
    "success",
    "error",
    "created_at",
    "transform",
    "trace_id",
    "span_id",
    "auth",
)
_TYPES = (
    "text",
    "text",
    "text",
    "text",
    "text",
    "text",
    "text",
    "text",
    "text",
    "int4",
    "jsonb",
    "bytea",
    "int4",
    "bytea",
    "int4",
    "bool",
    "text",
    "timestamptz",
    "jsonb",
    "text",
    "text",
    "jsonb",
)
"""Each column's type in the composite ``delivery_record`` (migration 0038) the recorder's rows are sent as;
``tests/delivery/test_delivery_record_type.py`` holds the type to these two lists."""
_INSERTED = f"""
ins AS (
    INSERT INTO deliveries ({", ".join(COLUMNS)})
    SELECT u.* FROM unnest($1::delivery_record[]) AS u
     WHERE u.task_id IS NULL
        OR EXISTS (SELECT 1 FROM delivery_tasks t WHERE t.id = u.task_id FOR KEY SHARE)
    ON CONFLICT (id) DO NOTHING
    RETURNING id, endpoint_id, destination_id, created_at, success, latency_ms, source, transform
), rule_attempts AS (
    SELECT endpoint_id, destination_id, created_at, success, latency_ms FROM ins
     WHERE source = 'rule' AND destination_id IS NOT NULL
       AND (transform IS NULL OR transform ->> 'outcome' IS DISTINCT FROM 'skipped')
), counted AS ({stats.deliveries_counted("rule_attempts")})"""
"""The insert and its counting, as common table expressions; parameter $1, the rows as one array of the
composite type ``delivery_record`` (migration 0038: ``COLUMNS`` with ``_TYPES``).
Counted: the rule attempts among the rows actually inserted (a row already stored, or whose task is gone,
is not), except those a transform skipped (nothing was sent, so no attempt for the destination's stats).

A batch in one statement: one parse, bind and plan for the whole batch, where a pipelined ``executemany``
ran the insert once per row (issue 27, docs/adr/0042-delivery-cpu-per-send.md). One array of rows, not an
array per column: asyncpg checks every element of an array parameter against ``collections.abc`` (two or
three Python-level ``isinstance`` calls each), and a row of 22 columns made 44 of them where a row of the
composite type makes 4; the recorder's client CPU fell from 10-11.6 to 5.6-6.4 µs per record (ADR 0064).

An attempt of a task is written only while its task exists, and the task is locked (KEY SHARE) until the
record commits. A worker that outlived its lease records late: its task was due again meanwhile, so an
erasure did not wait for it and deleted the event, its records and its tasks; the late record then finds no
task and is not written. One that commits while an erasure runs holds the erasure's ``busy`` lock until its
commit, and is then erased with the event's other records (``control.db.erasures.erase``). Replays, which
have no task, lock their event instead (``insert_for_event``), destination tests their endpoint (``insert``).

The same locks keep a record from outliving its endpoint: ``deliveries`` has no foreign key (migration 0026,
its per-row check was a fifth of this insert), and an endpoint's deletion deletes its records after the
deletions of its tasks and events, which wait for these locks. Rows without a task go through ``insert`` or
``insert_for_event``."""
_INSERT = f"WITH {_INSERTED}\nSELECT count(*) FROM ins"
_WRITE = f"""WITH {_INSERTED},
fin AS ({db_tasks.finish_statement(2, also=" AND (SELECT count(*) FROM counted) >= 0")}
        RETURNING 1),
closed AS ({db_circuit.close_statement(7)} AND (SELECT count(*) FROM fin) >= 0 RETURNING 1)
SELECT count(*) FROM fin"""
"""The recorder's batch in one statement: the records and their counts, the task results, the circuits the
successes close, in that order, the order of the transaction it replaces (so rows shared with other writers,
counters and destinations, are locked in the same order by both). Each part waits for the one before: its
condition reads it, so Postgres runs that first. That order matters beyond locks: the insert locks each
record's task (KEY SHARE) and must find it as the statement began, so the results' update of the same rows
must come after it. One statement is one transaction, and one round trip instead of six (BEGIN, insert,
counts, results, circuits, COMMIT): ADR 0042, amendment of session 10."""

_KEPT = frozenset(
    {
        "id",
        "endpoint_id",
        "event_id",
        "task_id",
        "destination_id",
        "rule_id",
        "source",
        "attempt_number",
        "response_status",
        "latency_ms",
        "success",
        "created_at",
        "trace_id",
        "span_id",
    }
)
"""What a reduced row keeps: the attempt's identity and outcome, all of it values hookyard made itself."""
_ERROR = COLUMNS.index("error")
_MAX_REASON = 300


def reduced(row: Sequence[object], reason: str) -> tuple[object, ...]:
    """The row of an attempt whose full row could not be stored: its ids and outcome, no headers, bodies,
    destination name or URL, and ``error`` saying why (``reason``, ASCII-escaped, so it is storable too)."""
    note = "delivery record reduced: the full record could not be stored"
    detail = reason.encode("ascii", "backslashreplace").decode("ascii")
    out = [value if name in _KEPT else None for name, value in zip(COLUMNS, row, strict=True)]
    out[_ERROR] = f"{note} ({detail[:_MAX_REASON]})"
    return tuple(out)


async def insert(conn: Connection, row: Sequence[object]) -> bool:
    """One attempt of no stored event (a destination test), values in ``COLUMNS`` order, written only while its
    endpoint exists; False when the endpoint was deleted while the attempt was out. The endpoint row is locked
    (KEY SHARE) until the insert commits, as the foreign key did before migration 0026: a deletion waits for
    that commit and then removes the record with the endpoint's others."""
    async with conn.transaction():
        found = await conn.fetchval(
            "SELECT true FROM endpoints WHERE id = $1 FOR KEY SHARE", row[COLUMNS.index("endpoint_id")]
        )
        if not found:
            return False
        await insert_many(conn, [row])
        return True


async def insert_for_event(conn: Connection, row: Sequence[object], received_at: object) -> bool:
    """One attempt of a stored event (a replay), written only if the event is still stored; False when it was
    erased (or expired) while the attempt was out. The event row is locked (KEY SHARE) until the insert
    commits: an erasure deleting it meanwhile waits for that commit, and then removes this record with the
    event's others (``control.db.erasures.erase``), or it deleted the event first and this finds none."""
    async with conn.transaction():
        found = await conn.fetchval(
            "SELECT true FROM events WHERE id = $1 AND received_at = $2 FOR KEY SHARE",
            row[COLUMNS.index("event_id")],
            received_at,
        )
        if not found:
            return False
        await insert_many(conn, [row])
        return True


async def insert_many(conn: Connection, rows: Sequence[Sequence[object]]) -> None:
    """Attempts in ``COLUMNS`` order, and their count, in one statement (atomic on its own, or part of the
    caller's transaction)."""
    if rows:
        await conn.fetchval(_INSERT, _records(rows))


async def write(
    conn: Connection,
    rows: Sequence[Sequence[object]],
    results: Sequence[tuple[str, int, str, float | None, str | None]],
    closed: Sequence[str],
) -> int:
    """A batch of attempts in one statement: their rows (``COLUMNS`` order, counted as ``insert_many`` counts),
    their tasks' results (``tasks.finish``: ``(id, attempts, status, retry_in_s, error)``) and the circuits of
    ``closed``, destinations whose last outcome in the batch was a success. For a batch without a failure that
    counts against a circuit and without a ``Retry-After`` pause: those take ``circuit.record_outcomes``'s
    locks, in a transaction of several statements. Returns how many tasks were updated."""
    found: int = await conn.fetchval(_WRITE, _records(rows), *db_tasks.results_columns(results), sorted(closed))
    return found


def _records(rows: Sequence[Sequence[object]]) -> list[tuple[object, ...]]:
    """The rows as ``delivery_record`` values: tuples (asyncpg reads a tuple as a composite value, a list as
    a nested array), each of ``COLUMNS``' length (a row of another length is refused here, by name, rather
    than by Postgres' "wrong number of columns")."""
    out = [row if row.__class__ is tuple else tuple(row) for row in rows]
    for row in out:
        if len(row) != len(COLUMNS):
            raise ValueError(f"a delivery row has {len(row)} values, COLUMNS has {len(COLUMNS)}")
    return out


async def destination_for_account(conn: Connection, account_id: str, destination_id: str) -> asyncpg.Record | None:
    """The destination with its own signing secret, ``sign_deliveries`` and ``auth_version``, if it belongs to the
    account."""
    return await conn.fetchrow(
        """SELECT d.id, d.endpoint_id, d.name, d.url, d.headers, d.signing_secret, d.sign_deliveries, d.propagate_trace,
                  d.auth_version
             FROM destinations d JOIN endpoints p ON p.id = d.endpoint_id
            WHERE d.id = $1 AND p.account_id = $2""",
        destination_id,
        account_id,
    )


async def destination_with_url(conn: Connection, endpoint_id: str, url: str) -> asyncpg.Record | None:
    """The endpoint's (oldest) destination whose URL is exactly ``url``, to attribute a replay to it."""
    return await conn.fetchrow(
        """SELECT id, name, propagate_trace FROM destinations WHERE endpoint_id = $1 AND url = $2
            ORDER BY created_at, id LIMIT 1""",
        endpoint_id,
        url,
    )
