"""Test helpers for the event and delivery reads: rows written the way the flush and deliver workers write
them (and the wakeup the flush worker publishes), plus an in-loop HTTP client for concurrent requests.

The ``client`` fixture (Litestar's AsyncTestClient) runs each request to completion on another thread,
blocking the test's event loop; long polls racing inserts need the app in the test's own loop instead.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import httpx
import redis.asyncio as aioredis
from litestar import Litestar

from control.db import delivery_records
from control.db.events import endpoint_tag, query_grams
from control.db.flush import COLUMNS as EVENT_COLUMNS
from control.db.partitions import KEYS
from shared import ids
from shared.keys import Keys
from shared.settings import Settings
from tests.apps import control_app

EVENT_FIELDS = {
    "id",
    "endpoint_id",
    "method",
    "path",
    "query",
    "headers",
    "header_encodings",
    "body",
    "body_encoding",
    "body_size",
    "body_expired",
    "content_type",
    "source_ip",
    "provider",
    "event_type",
    "idempotency_key",
    "signature_valid",
    "signature_failure_reason",
    "ip_allowed",
    "received_at",
    "labels",
    "trace_id",
    "handshake",
}
DELIVERY_FIELDS = {
    "id",
    "event_id",
    "destination_id",
    "destination_name",
    "destination_url",
    "rule_id",
    "source",
    "attempt_number",
    "request_headers",
    "request_body",
    "request_body_encoding",
    "response_status",
    "response_body",
    "response_body_encoding",
    "latency_ms",
    "success",
    "error",
    "duplicate_of",
    "created_at",
    "transform",
    "trace_id",
    "span_id",
    "auth",
    "retry",
    "next_attempt_at",
}


@dataclass
class Ev:
    """One events row in the flush worker's shape; unset fields get plausible values."""

    endpoint_id: str
    received_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    method: str = "POST"
    path: str = "/"  # as the flush stores it: with its leading slash
    query: str = ""
    headers: dict[str, str] = field(default_factory=lambda: {"content-type": "application/json"})
    body: bytes = b'{"ok": true}'
    content_type: str | None = "application/json"
    source_ip: str | None = "203.0.113.7"
    provider: str | None = None
    event_type: str | None = None
    idempotency_key: str | None = None
    signature_valid: bool | None = None
    signature_failure_reason: str | None = None
    ip_allowed: bool | None = None
    labels: list[dict[str, str]] = field(default_factory=list)
    traceparent: str | None = None
    handshake: bool = False
    id: str = ""

    def row(self) -> tuple[Any, ...]:
        """The values in ``control.db.flush.COLUMNS`` order, as the flush writes them."""
        if not self.id:
            self.id = ids.new_id("evt", int(self.received_at.timestamp() * 1000))
        try:
            text, is_utf8 = self.body.decode().replace("\x00", ""), True  # as the flush: text cannot hold NUL
        except UnicodeDecodeError:
            text, is_utf8 = "", False
        parts = [text, self.content_type or "", self.method, self.event_type or ""]
        parts += [label["value"] for label in self.labels]
        values = {
            "id": self.id,
            "endpoint_id": self.endpoint_id,
            "received_at": self.received_at,
            "method": self.method,
            "path": self.path,
            "query": self.query,
            "headers": self.headers,
            "headers_base64": None,
            "body": self.body,
            "body_is_utf8": is_utf8,
            "content_type": self.content_type,
            "source_ip": self.source_ip,
            "provider": self.provider,
            "event_type": self.event_type,
            "idempotency_key": self.idempotency_key,
            "signature_valid": self.signature_valid,
            "signature_failure_reason": self.signature_failure_reason,
            "ip_allowed": self.ip_allowed,
            "traceparent": self.traceparent,
            "handshake": self.handshake,
            "labels": self.labels,
            "search_text": "\n".join(p for p in parts if p).lower(),
        }
        return tuple(values[column] for column in EVENT_COLUMNS)


def _insert(table: str, columns: tuple[str, ...]) -> str:
    """An INSERT of every column the workers write, in their order (the db modules own the lists)."""
    marks = ", ".join(f"${i}" + ("::inet" if column == "source_ip" else "") for i, column in enumerate(columns, 1))
    return f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})"


_INSERT = _insert("events", EVENT_COLUMNS)
_INSERT_DELIVERY = _insert("deliveries", delivery_records.COLUMNS)


async def store(
    conn: asyncpg.Connection, redis: aioredis.Redis | None, keys: Keys | None, events: Iterable[Ev]
) -> list[str]:
    """Commits the events in one transaction, then (like the flush worker) publishes their ids per endpoint."""
    events = list(events)
    async with conn.transaction():
        await conn.executemany(_INSERT, [e.row() for e in events])
    if redis is not None and keys is not None:
        by_endpoint: dict[str, list[str]] = {}
        for e in events:
            by_endpoint.setdefault(e.endpoint_id, []).append(e.id)
        for endpoint_id, event_ids in by_endpoint.items():
            await redis.publish(keys.event_channel(endpoint_id), ",".join(event_ids))
    return [e.id for e in events]


async def store_task(
    conn: asyncpg.Connection,
    *,
    endpoint_id: str,
    event_id: str,
    received_at: datetime,
    rule_id: str,
    destination_id: str,
    created_at: datetime | None = None,
    status: str = "pending",
) -> str:
    """A delivery task for an event already stored (the flush creates tasks with their event): pending and
    created now, unless told otherwise (its id then carries ``created_at``'s time, as the flush's would; it
    was last updated then too)."""
    task_id = ids.new_id("task", None if created_at is None else int(created_at.timestamp() * 1000))
    await conn.execute(
        """INSERT INTO delivery_tasks (id, endpoint_id, event_id, event_received_at, rule_id, destination_id,
                                       created_at, updated_at, status)
            VALUES ($1, $2, $3, $4, $5, $6, coalesce($7, now()), coalesce($7, now()), $8)""",
        task_id,
        endpoint_id,
        event_id,
        received_at,
        rule_id,
        destination_id,
        created_at,
        status,
    )
    return task_id


async def store_delivery(
    conn: asyncpg.Connection,
    endpoint_id: str,
    event_id: str,
    *,
    created_at: datetime,
    success: bool = True,
    source: str = "rule",
    attempt_number: int = 1,
    **columns: Any,
) -> str:
    delivery_id = ids.new_id("dlv", int(created_at.timestamp() * 1000))
    row: dict[str, Any] = dict.fromkeys(delivery_records.COLUMNS)
    unknown = set(columns) - set(row)
    if unknown:
        raise TypeError(f"not columns of delivery_records.COLUMNS: {sorted(unknown)}")
    row |= {
        "id": delivery_id,
        "endpoint_id": endpoint_id,
        "event_id": event_id,
        "source": source,
        "attempt_number": attempt_number,
        "success": success,
        "created_at": created_at,
        "destination_id": None if source == "replay" else "dst_1",
        "destination_name": "sink",
        "destination_url": "http://127.0.0.1:9/hook",
        "rule_id": "rule_1" if source == "rule" else None,
        "request_headers": {"content-type": "application/json"},
        "request_body": '{"ok": true}',
        "response_status": 200 if success else 500,
        "response_body": "ok" if success else "boom",
        "latency_ms": 12,
        "error": None,
        **columns,
    }
    for body in ("request_body", "response_body"):  # bytea: text given here is stored as its UTF-8
        if isinstance(row[body], str):
            row[body] = row[body].encode()
    await conn.execute(_INSERT_DELIVERY, *row.values())
    return delivery_id


async def store_failed_attempt(
    conn: asyncpg.Connection, event: Ev, *, status: str, attempts: int, due: datetime
) -> str:
    """The stored ``event``'s failed attempt number ``attempts`` and its task, left ``status`` with that many
    attempts and due ``due``, as the deliver worker leaves them (the record's ``retry`` reads the task); the
    task's id."""
    await store(conn, None, None, [event])
    task = await store_task(
        conn,
        endpoint_id=event.endpoint_id,
        event_id=event.id,
        received_at=event.received_at,
        rule_id="rule_1",
        destination_id="dst_1",
        status=status,
    )
    await conn.execute(
        "UPDATE delivery_tasks SET attempts = $2, next_attempt_at = $3 WHERE id = $1", task, attempts, due
    )
    await store_delivery(
        conn,
        event.endpoint_id,
        event.id,
        created_at=datetime.now(UTC),
        success=False,
        attempt_number=attempts,
        task_id=task,
        error="HTTP 500",
    )
    return task


def at(text: str) -> datetime:
    """'2025-03-10T12:00:00' (UTC) as an aware datetime."""
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def series(start: datetime, count: int, step: timedelta = timedelta(seconds=1)) -> list[datetime]:
    return [start + i * step for i in range(count)]


@contextlib.asynccontextmanager
async def live_app(settings: Settings) -> AsyncIterator[tuple[httpx.AsyncClient, Litestar]]:
    """The control app with its lifespan, served in the test's event loop (requests run concurrently).

    The lifespan runs in a task of its own: pytest-asyncio may set a fixture up and tear it down in
    different tasks, and the lifespan's task group must be entered and left in the same one.
    """
    with control_app(settings) as app:
        started, stop = asyncio.Event(), asyncio.Event()

        async def serve() -> None:
            async with app.lifespan():
                started.set()
                await stop.wait()

        server = asyncio.create_task(serve())
        ready = asyncio.create_task(started.wait())
        await asyncio.wait({server, ready}, return_when=asyncio.FIRST_COMPLETED)
        if server.done():
            ready.cancel()
            server.result()  # raises what broke the startup
        try:
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://testserver.local", timeout=70) as client:
                yield client, app
        finally:
            stop.set()
            await server


def grams_of(endpoint_id: str, q: str) -> str:
    """The SQL condition a ``q`` page's indexed read puts on a row of ``endpoint_id`` for ``q``
    (``control.db.events``), with the tagged trigrams as a literal, for an EXPLAIN."""
    tag = endpoint_tag(endpoint_id)
    literal = ",".join("'" + (tag + g).replace("'", "''") + "'" for g in query_grams(q.lower()))
    return f"{KEYS} @> ARRAY[{literal}]::text[]"
