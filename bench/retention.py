"""Body-retention sweep on the 1,000,000-event bench database (``bench.list``'s fill: 10 endpoints, 7 days).

Every endpoint gets ``body_retention_days = 1``, so the events of the six days before yesterday's cutoff
(about 850,000) are due; then ``control.service.retention.expire_bodies`` runs to the end, batch by batch,
and prints the total time, events per second, and the longest single batch (the longest any row lock is
held). Run: ``python -m bench.retention`` (no pytest).
"""

from __future__ import annotations

import asyncio
import time

import asyncpg

from bench.infra import bench_env
from bench.list import _FILL
from bench.setup import create_endpoint
from control.db import retention as db_retention
from control.service.retention import BATCH
from control.workers import worker_context

__all__ = ("run",)


async def _fill(dsn: str, endpoint_ids: list[str], total: int) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute("SELECT hy_ensure_event_partitions(8, 1)")
        for start in range(0, total, 100_000):
            await conn.execute(_FILL, endpoint_ids, start, min(total, start + 100_000) - 1)
        await conn.execute("ANALYZE events")
        await conn.execute("UPDATE endpoints SET body_retention_days = 1")
    finally:
        await conn.close()


async def _sweep(settings) -> dict[str, object]:
    async with worker_context(settings) as ctx:
        async with ctx.pool.acquire() as conn:
            due = await db_retention.due_endpoints(conn, retention_days=settings.retention_days)
        longest = 0.0
        events = batches = 0
        started = time.perf_counter()
        for endpoint in due:
            since = endpoint["watermark"]
            while True:
                t = time.perf_counter()
                async with ctx.pool.acquire() as conn:
                    done = await db_retention.expire_batch(
                        conn, endpoint["id"], since=since, cutoff=endpoint["cutoff"], limit=BATCH
                    )
                longest = max(longest, time.perf_counter() - t)
                events += done.events
                batches += 1
                if done.events < BATCH:
                    break
                since = done.last
        total_s = time.perf_counter() - started
    return {
        "events_expired": events,
        "batches": batches,
        "total_s": round(total_s, 1),
        "events_per_s": round(events / total_s),
        "longest_batch_ms": round(longest * 1000, 1),
    }


def run(seconds: float = 0) -> dict[str, object]:
    with bench_env() as bench:
        endpoints = [asyncio.run(create_endpoint(bench.settings)) for _ in range(10)]
        started = time.perf_counter()
        asyncio.run(_fill(bench.settings.database_url, [e.id for e in endpoints], 1_000_000))
        fill_s = time.perf_counter() - started
        figures = asyncio.run(_sweep(bench.settings))
        return {"fill_s": round(fill_s, 1), "batch": BATCH, **figures}


if __name__ == "__main__":
    print(run())
