"""Rows and loops for the retry tests: failed deliveries written as the deliver worker leaves them, and the
deliver and retries loops run in the test's event loop."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import asyncpg

from control.db.context import Context
from control.workers.deliver import Deliver
from control.workers.loop import run_loops
from control.workers.retries import RetryJobs
from shared import ids
from tests.events_support import Ev, store

__all__ = ("Failed", "fail_deliveries", "new_tasks", "workers")


@dataclass(frozen=True)
class Failed:
    event_id: str
    task_id: str
    delivery_id: str


async def fail_deliveries(
    conn: asyncpg.Connection,
    events: list[Ev],
    *,
    destination_id: str,
    rule_id: str,
    url: str,
    attempts: int = 2,
    status: str = "failed",
) -> list[Failed]:
    """The events stored, each with a task to the destination whose last attempt (``attempts``) answered 500:
    ``failed`` (the schedule gave up) or ``pending`` (a retry scheduled an hour on); and that attempt's
    delivery record. What the deliver worker leaves behind, written in a few statements."""
    await store(conn, None, None, events)
    now = datetime.now(UTC)
    rows: list[Failed] = []
    tasks: list[tuple[Any, ...]] = []
    deliveries: list[tuple[Any, ...]] = []
    for ev in events:
        made = Failed(event_id=ev.id, task_id=ids.new_id("task"), delivery_id=ids.new_id("dlv"))
        rows.append(made)
        tasks.append((made.task_id, ev.endpoint_id, ev.id, ev.received_at, rule_id, destination_id, status, attempts))
        deliveries.append(
            (made.delivery_id, ev.endpoint_id, ev.id, made.task_id, destination_id, url, rule_id, attempts, now)
        )
    async with conn.transaction():
        await conn.executemany(
            """INSERT INTO delivery_tasks (id, endpoint_id, event_id, event_received_at, rule_id, destination_id,
                                           status, attempts, last_error, next_attempt_at)
               VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'HTTP 500', now() + interval '1 hour')""",
            tasks,
        )
        await conn.executemany(
            """INSERT INTO deliveries (id, endpoint_id, event_id, task_id, destination_id, destination_name,
                                       destination_url, rule_id, source, attempt_number, response_status,
                                       response_body, latency_ms, success, error, created_at)
               VALUES ($1, $2, $3, $4, $5, 'sink', $6, $7, 'rule', $8, 500, 'boom'::bytea, 3, false, NULL, $9)""",
            deliveries,
        )
    return rows


async def new_tasks(conn: asyncpg.Connection, events: list[Ev], *, destination_id: str, rule_id: str) -> list[str]:
    """The events stored, each with a pending task to the destination, as the flush routes them."""
    await store(conn, None, None, events)
    task_ids = [ids.new_id("task") for _ in events]
    await conn.executemany(
        """INSERT INTO delivery_tasks (id, endpoint_id, event_id, event_received_at, rule_id, destination_id)
           VALUES ($1, $2, $3, $4, $5, $6)""",
        [
            (t, ev.endpoint_id, ev.id, ev.received_at, rule_id, destination_id)
            for t, ev in zip(task_ids, events, strict=True)
        ],
    )
    return task_ids


@contextlib.asynccontextmanager
async def workers(ctx: Context, *, page: int = 1000, deliver: bool = True) -> AsyncIterator[RetryJobs]:
    """The retries loop (and the deliver loop) in this event loop until the block ends; then stopped and
    drained like on SIGTERM."""
    jobs = RetryJobs(ctx, page=page, idle_s=0.05)
    loops: list[Any] = [jobs]
    sender = Deliver(ctx) if deliver else None
    if sender is not None:
        loops.append(sender)
    stop = asyncio.Event()
    running = asyncio.create_task(run_loops(loops, stop))
    try:
        yield jobs
    finally:
        stop.set()
        await running
        if sender is not None:
            await sender.close()
