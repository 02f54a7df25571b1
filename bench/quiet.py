"""When a bench's run is over: nothing left that can still reach Postgres or the sink.

The load has stopped; then the flush has stored (or dead-lettered) every entry the ingest streams got, and no
delivery task is pending or in flight. A send reaches the sink before its task is recorded (``bench.sink``
writes its line before it answers), and a task is sent again (an extra delivery) only while it is unfinished:
a lease that ran out, a retry due later. So once this holds, a count is final.

``bench.ledger`` (the fault scenarios) and ``bench.pipeline`` waited instead for their count to hold still
for a second: a fixed wait at the end of every run, and a guess where the workers' own state says it.
"""

from __future__ import annotations

import asyncio
import time

import asyncpg
import redis.asyncio as aioredis

from control.support.ingest_marks import marks, stored_through
from shared.keys import Keys

__all__ = ("POLL_S", "UNFINISHED", "wait_quiet")

POLL_S = 0.2
"""How often it looks: two cheap reads (an index probe, a stream range of one entry) on open connections."""
UNFINISHED = """SELECT (SELECT count(*) FROM delivery_tasks WHERE status = 'pending' AND order_key IS NULL)
                + (SELECT count(*) FROM delivery_tasks WHERE status = 'in_flight')"""
"""The delivery tasks not finished yet (the benches' databases have no FIFO destination), through the
partial indexes of exactly these states (``delivery_tasks_due``, ``delivery_tasks_leased``: index-only
scans), so a look costs less as the backlog shrinks. Counting the succeeded ones instead scanned the whole
table twenty times a second on the cores the measured worker and Postgres share (``bench delivery``; at
50 ms this still took 3 ms a time with a backlog of 25,000); and ``EXISTS (... status IN ('pending',
'in_flight'))`` was a sequential scan whenever the statistics still saw many pending: 60 ms at 180,000
tasks none of which was."""


async def wait_quiet(database_url: str, redis_url: str, keys: Keys, *, timeout_s: float) -> bool:
    """Waits until the flush stored every entry of the ingest streams and no delivery task is unfinished;
    False when ``timeout_s`` passed first. The streams' marks are taken again once that holds: a write the
    edge finished after the load's end (its answer never read) is waited for too."""
    deadline = time.monotonic() + timeout_s
    redis = aioredis.Redis.from_url(redis_url)
    conn: asyncpg.Connection | None = None
    try:
        stream_marks = await marks(redis, keys)
        while True:
            if await stored_through(redis, keys, stream_marks) is None:
                conn = conn or await asyncpg.connect(database_url)
                if await conn.fetchval(UNFINISHED) == 0:
                    again = await marks(redis, keys)
                    if again == stream_marks:
                        return True
                    stream_marks = again
                    continue
            if time.monotonic() > deadline:
                return False
            await asyncio.sleep(POLL_S)
    finally:
        await redis.aclose()
        if conn is not None:
            await conn.close()
