"""Erasure on the bench database (``bench.list``'s fill: 10 endpoints, 7 days of partitions, a body
``{"type", "customer": "cus_<g % 50000>", "word", "amount"}``): one customer's events are erased out of it.

``cus_123`` is on one endpoint (50,000 is a multiple of 10), in 1/50,000 of the events; the erasure job runs
through the ``erasures`` loop's own step (``control.workers.erasures.step.advance``) to its end, while a
probe inserts an event into the same endpoint every 20 ms and times it. Printed last: the duration, matched
and erased, events looked at per second, the longest step (the longest any row lock of the job is held) and
the probe's longest insert (the longest a writer waited meanwhile). Run: ``python -m bench erasure``; the
size with ``BENCH_ERASURE_EVENTS`` (default 1,000,000).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time

import asyncpg

from bench import results
from bench.infra import bench_env
from bench.list import fill_events
from bench.setup import create_endpoint
from control.db.context import Principal
from control.records.erasures import EraseRequest
from control.service import erasures as erasures_service
from control.workers.erasures.step import PAGE, advance
from control.workers.main import worker_context
from shared import ids

__all__ = ("run",)

TARGETS = (
    results.Target(
        figure="erasure of one customer from 1M events: events looked at per second",
        key="events_per_s",
        beside=("matched", "erased", "duration_s", "longest_step_ms", "probe_insert_max_ms"),
    ),
)


_PROBE = """INSERT INTO events (id, endpoint_id, received_at, method, headers, body, body_is_utf8)
            VALUES ($1, $2, now(), 'POST', '{}'::jsonb, '{"customer": "cus_probe"}'::bytea, true)"""


async def _fill(dsn: str, endpoint_ids: list[str], total: int) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        await fill_events(conn, endpoint_ids, total)
    finally:
        await conn.close()


async def _probe(dsn: str, endpoint_id: str, stop: asyncio.Event, waits: list[float]) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        while not stop.is_set():
            started = time.perf_counter()
            await conn.execute(_PROBE, ids.new_id("evt"), endpoint_id)
            waits.append(time.perf_counter() - started)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 0.02)
    finally:
        await conn.close()


async def _erase(settings, account_id: str, endpoint_id: str) -> dict[str, object]:
    async with worker_context(settings) as ctx:
        principal = Principal(account_id=account_id, key_id="bench", kind="live")
        job = await erasures_service.erase_events(
            ctx, principal, endpoint_id, EraseRequest(field="body.customer", value="cus_123")
        )
        stop, waits = asyncio.Event(), []
        probe = asyncio.create_task(_probe(settings.database_url, endpoint_id, stop, waits))
        longest = 0.0
        steps = 0
        started = time.perf_counter()
        while True:
            t = time.perf_counter()
            job_id, _ = await advance(ctx)
            longest = max(longest, time.perf_counter() - t)
            if job_id is None:
                break
            steps += 1
        total_s = time.perf_counter() - started
        stop.set()
        await probe
        done = await erasures_service.get_erasure(ctx, principal, job.id)
    return {
        "state": done.state,
        "matched": done.matched,
        "erased": done.erased,
        "deliveries_erased": done.deliveries_erased,
        "scanned": done.scanned,
        "steps": steps,
        "duration_s": round(total_s, 2),
        "events_per_s": round(done.scanned / total_s),
        "longest_step_ms": round(longest * 1000, 1),
        "probe_insert_max_ms": round(max(waits, default=0) * 1000, 1),
    }


def run(seconds: float = 0) -> dict[str, object]:
    total = int(os.environ.get("BENCH_ERASURE_EVENTS", "1000000"))
    with bench_env() as bench:
        endpoints = [asyncio.run(create_endpoint(bench.settings)) for _ in range(10)]
        target = endpoints[123 % 10]
        conn_account = asyncio.run(_account_of(bench.settings.database_url, target.id))
        started = time.perf_counter()
        asyncio.run(_fill(bench.settings.database_url, [e.id for e in endpoints], total))
        fill_s = time.perf_counter() - started
        figures = asyncio.run(_erase(bench.settings, conn_account, target.id))
        return {"events": total, "fill_s": round(fill_s, 1), "page": PAGE, **figures}


async def _account_of(dsn: str, endpoint_id: str) -> str:
    conn = await asyncpg.connect(dsn)
    try:
        return await conn.fetchval("SELECT account_id FROM endpoints WHERE id = $1", endpoint_id)
    finally:
        await conn.close()


if __name__ == "__main__":
    print(run())
