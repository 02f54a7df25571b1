"""Noisy neighbours: one account's plain deliveries alone, and beside another account's hostile transforms.

One ``hookyard worker deliver`` process and a local sink (``bench.sink``). Account A has one destination
without a transform; account B has six, each with a transform that runs away (a loop, an allocation loop,
``Array.prototype.fill`` of 10^8 elements, which no termination request stops, the string split that is a
V8 fatal error, a loop within the limit). In the same run:

1. alone: ``PLAIN`` tasks of A are committed in one transaction; the figure is the time from that commit
   until the last is ``succeeded`` (Postgres' clock);
2. beside: ``HOSTILE_EVENTS`` tasks for each of B's destinations are committed, then at once ``PLAIN`` more
   of A; the same figure for A's.

Target (``TARGETS``): beside within 3x alone, or alone + 10 s, whichever is larger (``beside_vs_bound``:
beside over that bound, at most 1).
"""

from __future__ import annotations

import asyncio
import time

from bench import sink as bench_sink
from bench.delivery import bench_records, route_to_sink
from bench.infra import bench_env, free_port, run_process, script, wait_listening
from bench.results import Target
from bench.setup import create_endpoint
from control.db import connect
from control.db.flush import store_batch
from control.db.tasks import NOTIFY_CHANNEL
from control.records.storable import event_row
from shared import ids

__all__ = ("HOSTILE", "run")

TARGETS = (
    Target(
        figure="200 plain deliveries beside another account's six hostile transforms / max(3x alone, alone+10 s)",
        key="beside_vs_bound",
        op="<=",
        bound=1.0,
        beside=("alone_s", "beside_s"),
    ),
)

PLAIN = 200
HOSTILE_EVENTS = 20
HOSTILE = (
    "function handler(r) { for (;;) {} }",
    "function handler(r) { const a = []; for (;;) a.push({ n: a.length, s: 'x'.repeat(64) }); }",
    "function handler(r) { new Array(1e8).fill(1.5); return r; }",
    'function handler(r) { "x".repeat(2**29-25).split(""); return null; }',
    "function handler(r) { let s = 'x'; for (;;) s = s + s; }",
    "function handler(r) { const t = Date.now(); while (Date.now() - t < 900) {} return r; }",
)


async def _commit(database_url: str, endpoint_id: str, routes: list[tuple[str, str]], per_route: int) -> None:
    """``per_route`` events on the endpoint and a task for each on each (destination, rule), in one
    transaction (as the flush stores them)."""
    records = bench_records(endpoint_id, per_route)
    tasks = [(ids.new_id("task"), r.id, rule, destination) for destination, rule in routes for r in records]
    conn = await connect(database_url)
    try:
        async with conn.transaction():
            await store_batch(conn, [event_row(r) for r in records], tasks)
    finally:
        await conn.close()


async def _plain_round(database_url: str, endpoint_id: str, destination_id: str, rule_id: str) -> float:
    """Seconds from the commit of ``PLAIN`` tasks to the destination until the last succeeded."""
    conn = await connect(database_url)
    try:
        before = await conn.fetchval(
            "SELECT count(*) FROM delivery_tasks WHERE destination_id = $1 AND status = 'succeeded'", destination_id
        )
        await _commit(database_url, endpoint_id, [(destination_id, rule_id)], PLAIN)
        committed = await conn.fetchval("SELECT clock_timestamp()")
        started = time.monotonic()
        while True:
            row = await conn.fetchrow(
                """SELECT count(*) AS done, max(updated_at) AS last FROM delivery_tasks
                    WHERE destination_id = $1 AND status = 'succeeded'""",
                destination_id,
            )
            if row["done"] - before >= PLAIN:
                return (row["last"] - committed).total_seconds()
            if time.monotonic() - started > 300:
                raise SystemExit(f"{PLAIN - row['done'] + before} plain deliveries not finished in 300 s")
            await asyncio.sleep(0.1)
    finally:
        await conn.close()


async def _beside(
    database_url: str, hostile_ep: str, hostile: list[tuple[str, str]], plain: tuple[str, str, str]
) -> float:
    await _commit(database_url, hostile_ep, hostile, HOSTILE_EVENTS)
    return await _plain_round(database_url, *plain)


def run(seconds: float) -> dict[str, object]:
    del seconds  # the work is fixed: PLAIN deliveries, twice
    hookyard = script("hookyard")
    with bench_env(egress="any") as bench:
        sink_port = free_port()
        sink = f"http://127.0.0.1:{sink_port}/hook"
        database_url = bench.settings.database_url or ""
        quiet = asyncio.run(create_endpoint(bench.settings))
        noisy = asyncio.run(create_endpoint(bench.settings))  # another account
        destination, rule = asyncio.run(route_to_sink(database_url, quiet.id, sink))
        hostile = [asyncio.run(route_to_sink(database_url, noisy.id, sink, source)) for source in HOSTILE]
        begun = time.time()
        with (
            run_process(bench_sink.command(sink_port), bench.env, sink),
            run_process([hookyard, "worker", "deliver"], bench.env),
        ):
            wait_listening(database_url, NOTIFY_CHANNEL, since=begun)  # ready for the tasks, as Postgres says
            alone_s = asyncio.run(_plain_round(database_url, quiet.id, destination, rule))
            beside_s = asyncio.run(_beside(database_url, noisy.id, hostile, (quiet.id, destination, rule)))
    bound = max(3 * alone_s, alone_s + 10)
    return {
        "plain": PLAIN,
        "hostile_destinations": len(HOSTILE),
        "hostile_events": HOSTILE_EVENTS,
        "alone_s": round(alone_s, 2),
        "beside_s": round(beside_s, 2),
        "beside_vs_alone": round(beside_s / alone_s, 2),
        "beside_vs_bound": round(beside_s / bound, 3),
    }
