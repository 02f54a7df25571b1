"""What storing an ingested event costs: the worker's CPU and its Postgres backend's CPU per event (a harness).

Issue 48's cost ratio charges the flush to every delivered event, and with delivered/ingested near 0.4 each
µs the flush spends per ingested event counts about 2.5 times. ``python -m bench flush`` gives the flush's
wall-clock throughput on a machine that other sessions share; this gives its CPU, which moves less.

One database with ``ENDPOINTS`` endpoints, each with one forward-all destination (every event makes a task, as
in ``bench flush``'s headline variant), and per round a stream filled as the edge fills it (``PER_ENTRY``
records an entry, ``bench.flush``'s Stripe-like request), drained by one real ``Flush`` lane reading
``COUNT`` entries a step (400 events a batch by default: the pipeline's batches were ~418). Measured around the
drain: this process's CPU (``getrusage``, user and system: the stream read, decoding, rows, routing, the store, the
acknowledgement) and the CPU of the Postgres backends connected to the database (``/proc/<pid>/schedstat``),
per event. A warm-up round opens the pool's connection first (its backend is the one measured).

It imports only what ``bench flush`` does, so the same file runs against another checkout's code, alternated
with this one in one sitting: ``cd <checkout> && <its python> /path/to/bench/store.py``. Under the bench lock,
with ``DATABASE_URL`` and ``REDIS_URL`` set (else embedded servers): ``STORE_EVENTS``, ``STORE_ROUNDS``.
"""

from __future__ import annotations

import asyncio
import os
import resource
import statistics
import time

import asyncpg

from bench.flush import _add_rules, _fill
from bench.infra import bench_env
from bench.setup import create_endpoint
from control.workers.flush import Flush
from control.workers.main import worker_context
from shared.settings import Settings

EVENTS = int(os.environ.get("STORE_EVENTS", "8000"))
ROUNDS = int(os.environ.get("STORE_ROUNDS", "3"))
ENDPOINTS = 20
PER_ENTRY = 50
"""Records per stream entry, as ``bench.flush`` fills it."""
COUNT = 8
"""Entries per XREADGROUP: 400 events a batch."""


def _cpu_ns(pid: int) -> int:
    with open(f"/proc/{pid}/schedstat") as f:
        return int(f.read().split()[0])


async def _backends(settings: Settings, own: int) -> list[int]:
    conn = await asyncpg.connect(settings.database_url)
    try:
        rows = await conn.fetch(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
    finally:
        await conn.close()
    return [r[0] for r in rows if r[0] != own]


async def _round(settings: Settings, endpoint_ids: list[str], events: int) -> tuple[float, float, float, float]:
    """(worker's user and system µs, Postgres µs per event, events/s) of draining ``events`` freshly added."""
    await _fill(settings, endpoint_ids, events)
    async with worker_context(settings) as ctx:
        flush = Flush(ctx, consumer="store-bench", count=COUNT, block_ms=50)
        async with ctx.pool.acquire() as conn:  # the one connection the lane will use
            await conn.fetchval("SELECT 1")
        pids = await _backends(settings, 0)
        pg = {p: _cpu_ns(p) for p in pids}
        usage, wall = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        done = 0
        while n := await flush.step():
            done += n
        after, wall = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter() - wall
        user, system = after.ru_utime - usage.ru_utime, after.ru_stime - usage.ru_stime
        pg_ns = sum(_cpu_ns(p) - pg[p] for p in pids)
        await flush.close()
    if done != events:
        raise SystemExit(f"drained {done} of {events}")
    return user / done * 1e6, system / done * 1e6, pg_ns / done / 1e3, done / wall


def main() -> None:
    with bench_env() as bench:
        settings = bench.settings
        made = [asyncio.run(create_endpoint(settings)) for _ in range(ENDPOINTS)]
        asyncio.run(_add_rules(settings, [(e.id, e.account_id) for e in made], "forward_all"))
        endpoint_ids = [e.id for e in made]
        asyncio.run(_round(settings, endpoint_ids, 1000))
        figures = []
        for _ in range(ROUNDS):
            user, system, pg, rate = asyncio.run(_round(settings, endpoint_ids, EVENTS))
            figures.append((user + system, pg))
            print(
                f"store round: worker {user + system:.1f} µs/event ({user:.1f} user, {system:.1f} system), "
                f"postgres {pg:.1f} µs/event, {rate:,.0f} events/s",
                flush=True,
            )
        print(
            f"store median: worker {statistics.median(f[0] for f in figures):.1f}, "
            f"postgres {statistics.median(f[1] for f in figures):.1f} µs/event "
            f"({os.getcwd()}, load {os.getloadavg()[0]:.1f})",
            flush=True,
        )


if __name__ == "__main__":
    main()
