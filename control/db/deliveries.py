"""Reads of delivery attempts: an endpoint's keyset pages and every attempt of one event, each with where its
task's retries stand (``retry``, ``next_attempt_at``).

The task is read in the same statement, joined on its primary key after the page is cut (``_WITH_TASK``): one
index probe per returned row, never per stored row, and no second round trip. A record is its task's latest
attempt when the task's ``attempts`` is its ``attempt_number`` (a claim adds one: ``in_flight`` with one more
is the next attempt being made, ``retried`` when another attempt was made since)."""

from __future__ import annotations

from datetime import datetime

import asyncpg

from control.db.connection import Connection

__all__ = ("for_event", "one", "page")

_COLUMNS = """id, event_id, destination_id, destination_name, destination_url, rule_id, source, attempt_number,
    request_headers, request_body, response_status, response_body, latency_ms, success, error, duplicate_of,
    created_at, transform, trace_id, span_id, auth"""
_OUTER = ", ".join(f"d.{name.strip()}" for name in _COLUMNS.split(","))
_RETRY = """CASE WHEN t.id IS NULL THEN 'none'
                 WHEN t.status = 'in_flight' AND t.attempts = d.attempt_number + 1 THEN 'in_flight'
                 WHEN t.attempts <> d.attempt_number THEN 'retried'
                 WHEN t.status = 'pending' THEN 'scheduled'
                 WHEN t.status = 'held' THEN 'held'
                 WHEN t.status = 'failed' THEN 'gave_up'
                 ELSE 'none' END AS retry,
            CASE WHEN t.status = 'pending' AND t.attempts = d.attempt_number THEN t.next_attempt_at END
                 AS next_attempt_at"""
"""``retry`` and ``next_attempt_at`` of a record ``d`` from its task ``t`` (no task: a replay, a test, a forward,
or a task gone with its event): ``control.records.deliveries.RetryState`` says what each value means."""


def _with_task(inner: str, order: str = "") -> str:
    """``inner`` (a select of ``_COLUMNS`` and ``task_id`` from ``deliveries``), each row with its task's state,
    in ``order``: the join is on ``delivery_tasks``' primary key, made for the rows ``inner`` returns only."""
    return f"""SELECT {_OUTER}, {_RETRY}
                 FROM ({inner}) d LEFT JOIN delivery_tasks t ON t.id = d.task_id{order}"""


async def page(
    conn: Connection,
    endpoint_id: str,
    *,
    success: bool | None,
    source: str | None,
    limit: int,
    after: tuple[datetime, str] | None = None,
    destination_id: str | None = None,
) -> list[asyncpg.Record]:
    """Up to ``limit`` attempts, newest first, strictly older than the ``after`` (created_at, id) key;
    walks ``deliveries_endpoint_created`` (``deliveries_destination_created`` for one destination)."""
    args: list[object] = [endpoint_id]
    parts = ["endpoint_id = $1"]
    if destination_id is not None:
        args.append(destination_id)
        parts.append(f"destination_id = ${len(args)}")
    if success is not None:
        args.append(success)
        parts.append(f"success = ${len(args)}")
    if source is not None:
        args.append(source)
        parts.append(f"source = ${len(args)}")
    if after is not None:
        args.extend(after)
        parts.append(f"(created_at, id) < (${len(args) - 1}, ${len(args)})")
    args.append(limit)
    inner = f"""SELECT {_COLUMNS}, task_id FROM deliveries WHERE {" AND ".join(parts)}
                 ORDER BY created_at DESC, id DESC LIMIT ${len(args)}"""
    return await conn.fetch(_with_task(inner, " ORDER BY d.created_at DESC, d.id DESC"), *args)


async def for_event(conn: Connection, endpoint_id: str, event_id: str) -> list[asyncpg.Record]:
    """Every attempt made for the event, oldest first (``deliveries_event`` index)."""
    inner = f"SELECT {_COLUMNS}, task_id FROM deliveries WHERE event_id = $1 AND endpoint_id = $2"
    return await conn.fetch(_with_task(inner, " ORDER BY d.created_at, d.id"), event_id, endpoint_id)


async def one(conn: Connection, endpoint_id: str, delivery_id: str) -> asyncpg.Record | None:
    """One attempt of the endpoint, by id (its primary key)."""
    inner = f"SELECT {_COLUMNS}, task_id FROM deliveries WHERE id = $1 AND endpoint_id = $2"
    return await conn.fetchrow(_with_task(inner), delivery_id, endpoint_id)
