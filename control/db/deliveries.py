"""Reads of delivery attempts: an endpoint's keyset pages and every attempt of one event."""

from __future__ import annotations

from datetime import datetime

import asyncpg

from control.db.connection import Connection

__all__ = ("for_event", "one", "page")

_COLUMNS = """id, event_id, destination_id, destination_name, destination_url, rule_id, source, attempt_number,
    request_headers, request_body, response_status, response_body, latency_ms, success, error, duplicate_of,
    created_at, transform, trace_id, span_id, auth"""


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
    return await conn.fetch(
        f"""SELECT {_COLUMNS} FROM deliveries WHERE {" AND ".join(parts)}
            ORDER BY created_at DESC, id DESC LIMIT ${len(args)}""",
        *args,
    )


async def for_event(conn: Connection, endpoint_id: str, event_id: str) -> list[asyncpg.Record]:
    """Every attempt made for the event, oldest first (``deliveries_event`` index)."""
    return await conn.fetch(
        f"""SELECT {_COLUMNS} FROM deliveries WHERE event_id = $1 AND endpoint_id = $2
            ORDER BY created_at, id""",
        event_id,
        endpoint_id,
    )


async def one(conn: Connection, endpoint_id: str, delivery_id: str) -> asyncpg.Record | None:
    """One attempt of the endpoint, by id (its primary key)."""
    return await conn.fetchrow(
        f"SELECT {_COLUMNS} FROM deliveries WHERE id = $1 AND endpoint_id = $2", delivery_id, endpoint_id
    )
