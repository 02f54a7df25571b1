"""What the delivery-shaping tests share: a sink that answers each request by what it carries, tasks
written in bulk, and the busiest one-second window of a list of arrival times."""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from control.db.context import Context
from shared import ids
from tests.destination import Destination, Received, Reply, add_destination, add_endpoint, add_rule
from tests.events_support import Ev, store

__all__ = ("Judging", "busiest_second", "limited_tasks", "set_shaping")


class Judging(Destination):
    """A sink whose answer to each request is ``judge(request)``: the request being answered is the last one
    recorded (``Destination`` records it and asks for its reply with no await in between)."""

    def __init__(self, judge: Callable[[Received], Reply]) -> None:
        super().__init__()
        self.judge = judge

    def _next_reply(self) -> Reply:
        with self._lock:
            request = self.requests[-1]
        return self.judge(request)


def busiest_second(times: Sequence[float]) -> int:
    """The most arrivals within any one-second window ``[t, t + 1)``."""
    ordered = sorted(times)
    return max((bisect.bisect_left(ordered, t + 1.0) - i for i, t in enumerate(ordered)), default=0)


async def starts(ctx: Context, destination_id: str) -> list[float]:
    """When each recorded attempt to the destination started (its record's ``created_at``: the send's start,
    as the worker took it), in seconds since the epoch."""
    async with ctx.pool.acquire() as conn:
        rows = await conn.fetch(
            "SELECT extract(epoch FROM created_at)::float8 AS t FROM deliveries WHERE destination_id = $1",
            destination_id,
        )
    return [r["t"] for r in rows]


async def set_shaping(ctx: Context, destination_id: str, **columns: Any) -> None:
    """Sets a destination's shaping columns directly (the API's own tests are in test_fields.py)."""
    names = sorted(columns)
    sets = ", ".join(f"{name} = ${i}" for i, name in enumerate(names, start=2))
    async with ctx.pool.acquire() as conn:
        await conn.execute(
            f"UPDATE destinations SET {sets} WHERE id = $1", destination_id, *(columns[n] for n in names)
        )


async def limited_tasks(ctx: Context, url: str, count: int, **shaping: Any) -> dict[str, Any]:
    """An endpoint and a destination at ``url`` with ``shaping``, and ``count`` events each with a pending
    task for it (written as the flush writes them, in bulk); their event ids in order."""
    async with ctx.pool.acquire() as conn:
        endpoint_id = await add_endpoint(conn)
        destination_id = await add_destination(conn, endpoint_id, url)
        rule_id = await add_rule(conn, endpoint_id, [destination_id])
    if shaping:
        await set_shaping(ctx, destination_id, **shaping)
    start = datetime.now(UTC)
    events = [
        Ev(endpoint_id=endpoint_id, received_at=start + timedelta(microseconds=i), body=b'{"n": %d}' % i)
        for i in range(count)
    ]
    async with ctx.pool.acquire() as conn:
        await store(conn, None, None, events)
        await conn.executemany(
            """INSERT INTO delivery_tasks (id, endpoint_id, event_id, event_received_at, rule_id, destination_id)
               VALUES ($1, $2, $3, $4, $5, $6)""",
            [(ids.new_id("task"), endpoint_id, e.id, e.received_at, rule_id, destination_id) for e in events],
        )
    return {"endpoint": endpoint_id, "destination": destination_id, "events": [e.id for e in events]}
