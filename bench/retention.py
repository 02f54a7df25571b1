"""Body-retention sweep on the 1,000,000-event bench database (``bench.list``'s fill: 10 endpoints, 7 days).

Every endpoint gets ``body_retention_days = 1``, so the events of the six days before yesterday's cutoff
(about 850,000) are due; then ``control.workers.sweep.retention.expire_bodies`` runs to the end, batch by batch,
and prints the total time, events per second, and the longest single batch (the longest any row lock is
held). Then the instance's retention for what events leave behind: 1,000,000 delivery records and as many
finished tasks created over the last 60 days (half past the 30-day retention), and
``control.workers.sweep.retention.expire_records`` until nothing is due, batch by batch: rows removed per second
and the longest batch. Run: ``python -m bench.retention`` (no pytest).
"""

from __future__ import annotations

import asyncio
import functools
import random
import time
from datetime import UTC, datetime, timedelta

import asyncpg

from bench.infra import bench_env
from bench.list import fill_events
from bench.setup import create_endpoint
from control.db import retention as db_retention
from control.workers.main import worker_context
from control.workers.sweep.retention import BATCH, expire_records
from shared import ids

__all__ = ("run",)


async def _fill(dsn: str, endpoint_ids: list[str], total: int) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        await fill_events(conn, endpoint_ids, total)
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


_RECORDS = 1_000_000
_SPAN_DAYS = 60


async def _fill_records(dsn: str, endpoint_ids: list[str], total: int) -> None:
    """``total`` delivery records and as many succeeded tasks, created evenly over the last ``_SPAN_DAYS``,
    their ids carrying their time as the service's do; in id order (as the service inserts them)."""
    now_ms = int(time.time() * 1000)
    step_ms = _SPAN_DAYS * 86_400_000 // total
    rng = random.Random(7)
    conn = await asyncpg.connect(dsn)
    try:
        for start in range(0, total, 100_000):
            records, tasks = [], []
            for i in range(start, min(total, start + 100_000)):
                ms = now_ms - (total - i) * step_ms
                at = datetime.fromtimestamp(ms / 1000, UTC)
                endpoint_id, event_id = rng.choice(endpoint_ids), ids.new_id("evt", ms)
                task_id = ids.new_id("task", ms)
                records.append(
                    (ids.new_id("dlv", ms), endpoint_id, event_id, task_id, "dst_1", "rule", 1, True, 12, 200, at)
                )
                tasks.append((task_id, endpoint_id, event_id, at, "rule_1", "dst_1", "succeeded", at, at))
            await conn.copy_records_to_table(
                "deliveries",
                records=records,
                columns=[
                    "id",
                    "endpoint_id",
                    "event_id",
                    "task_id",
                    "destination_id",
                    "source",
                    "attempt_number",
                    "success",
                    "latency_ms",
                    "response_status",
                    "created_at",
                ],
            )
            await conn.copy_records_to_table(
                "delivery_tasks",
                records=tasks,
                columns=[
                    "id",
                    "endpoint_id",
                    "event_id",
                    "event_received_at",
                    "rule_id",
                    "destination_id",
                    "status",
                    "created_at",
                    "updated_at",
                ],
            )
        await conn.execute("ANALYZE deliveries; ANALYZE delivery_tasks")
    finally:
        await conn.close()


async def _expire_records(settings) -> dict[str, object]:
    """The batches ``expire_records`` runs, timed one by one (each batch's time is the longest its row locks
    are held), then ``expire_records`` itself, which must find nothing left."""
    cutoff = datetime.now(UTC) - timedelta(days=settings.retention_days)
    cutoff_ms = int(cutoff.timestamp() * 1000)
    async with worker_context(settings) as ctx:
        async with ctx.pool.acquire() as conn:
            before = await conn.fetchval("SELECT count(*) FROM deliveries")
        longest, removed, batches = 0.0, 0, 0
        started = time.perf_counter()
        # The tasks' extra condition as expire_records has it (a finished task stays the longest deduplication
        # window; the bench's retention is longer).
        tasks = functools.partial(db_retention.remove_tasks, finished_before=cutoff)
        for prefix, remove in (("dlv", db_retention.remove_records), ("task", tasks)):
            below, after = ids.new_id(prefix, cutoff_ms)[: len(prefix) + 11], ""
            while True:
                t = time.perf_counter()
                async with ctx.pool.acquire() as conn:
                    done = await remove(conn, after=after, below=below, cutoff=cutoff, limit=BATCH)
                longest = max(longest, time.perf_counter() - t)
                removed += done.removed
                batches += 1
                if done.scanned < BATCH or done.last is None:
                    break
                after = done.last
        total_s = time.perf_counter() - started
        left = await expire_records(ctx)
        async with ctx.pool.acquire() as conn:
            after_count = await conn.fetchval("SELECT count(*) FROM deliveries")
            oldest = await conn.fetchval("SELECT min(created_at) FROM deliveries")
    return {
        "records_before": before,
        "records_after": after_count,
        "oldest_kept_days": round((datetime.now(UTC) - oldest) / timedelta(days=1), 2),
        "left_for_the_sweep": left.records + left.tasks,
        "rows_removed": removed,
        "rows_removed_per_s": round(removed / total_s),
        "longest_removal_batch_ms": round(longest * 1000, 1),
        "removal_batches": batches,
    }


def run(seconds: float = 0) -> dict[str, object]:
    with bench_env() as bench:
        endpoints = [asyncio.run(create_endpoint(bench.settings)) for _ in range(10)]
        started = time.perf_counter()
        asyncio.run(_fill(bench.settings.database_url, [e.id for e in endpoints], 1_000_000))
        fill_s = time.perf_counter() - started
        figures = asyncio.run(_sweep(bench.settings))
        asyncio.run(_fill_records(bench.settings.database_url, [e.id for e in endpoints], _RECORDS))
        records = asyncio.run(_expire_records(bench.settings))
        return {"fill_s": round(fill_s, 1), "batch": BATCH, **figures, **records}


if __name__ == "__main__":
    print(run())
