"""Backlog as metrics (``control.support.backlog_metrics``): per destination the deliveries due and how long the oldest
has waited, per shard the age of the oldest unflushed entry; read on a timer by an index-backed query, shown
in /metrics and exported over OTLP to a real receiver (``tests.otlp``)."""

from __future__ import annotations

import time

import pytest
from prometheus_client.parser import text_string_to_metric_families

from control.db import backlog as db_backlog
from control.db.context import Context
from control.support.backlog_metrics import sampling
from control.support.metrics import WORKER, live
from tests.destination import make_task
from tests.helpers import wait_for
from tests.otlp import Received


async def _overdue(ctx: Context, destination_url: str, count: int, waited_s: float) -> str:
    """``count`` deliveries to one new destination, due ``waited_s`` ago and not sent (no deliver worker runs)."""
    first = await make_task(ctx, destination_url)
    for _ in range(count - 1):
        await make_task(ctx, destination_url, endpoint_id=first["endpoint"], destination_id=first["destination"])
    async with ctx.pool.acquire() as conn:
        await conn.execute(
            "UPDATE delivery_tasks SET next_attempt_at = now() - make_interval(secs => $2) WHERE destination_id = $1",
            first["destination"],
            waited_s,
        )
    return first["destination"]


def _samples(text: bytes, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    for family in text_string_to_metric_families(text.decode()):
        if family.name == name:
            return {tuple(sorted(s.labels.items())): s.value for s in family.samples}
    return {}


async def test_the_backlog_per_destination_and_the_stream_lag_reach_metrics_and_otlp(
    ctx: Context, otlp: Received, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", otlp.url)
    monkeypatch.setenv("OTEL_METRIC_EXPORT_INTERVAL", "200")
    late = await _overdue(ctx, "http://127.0.0.1:9/late", 3, 120.0)
    fresh = await _overdue(ctx, "http://127.0.0.1:9/fresh", 1, 2.0)
    stream = ctx.keys.ingest_stream(0)
    await ctx.redis.xadd(stream, {"r": b""}, id=f"{int(time.time() * 1000) - 60_000}-0")  # written a minute ago
    async with sampling(ctx, "worker") as backlog:

        async def read() -> bool:
            return backlog.read_at is not None

        await wait_for(read)
        text = WORKER.render(await live(ctx, backlog))
        received = otlp.wait(lambda r: {m[1] for m in r.metrics} >= {"hookyard.delivery.backlog.age"} and r.metrics)
    due = _samples(text, "hookyard_delivery_backlog")
    age = _samples(text, "hookyard_delivery_backlog_seconds")
    assert due[(("destination_id", late),)] == 3
    assert due[(("destination_id", fresh),)] == 1
    assert 120 <= age[(("destination_id", late),)] < 150
    assert 2 <= age[(("destination_id", fresh),)] < 30
    (lag,) = _samples(text, "hookyard_stream_lag_seconds").items()
    assert lag[0] == (("shard", "0"),)
    assert 60 <= lag[1] < 90
    exported = {(name, attributes.get("hookyard.destination_id")): value for _, name, attributes, value in received}
    assert exported[("hookyard.delivery.backlog.due", late)] == 3
    assert exported[("hookyard.delivery.backlog.age", late)] >= 120
    assert {m[0] for m in received} == {"hookyard-worker"}


async def test_sent_and_not_yet_due_deliveries_are_no_backlog(ctx: Context) -> None:
    destination = await _overdue(ctx, "http://127.0.0.1:9/x", 2, 30.0)
    async with ctx.pool.acquire() as conn:
        ids = [
            r["id"] for r in await conn.fetch("SELECT id FROM delivery_tasks WHERE destination_id = $1", destination)
        ]
        await conn.execute("UPDATE delivery_tasks SET status = 'succeeded' WHERE id = $1", ids[0])
        await conn.execute(
            "UPDATE delivery_tasks SET next_attempt_at = now() + interval '1 hour' WHERE id = $1", ids[1]
        )
        assert await db_backlog.due_by_destination(conn, limit=100, destinations=10) == []


async def test_the_backlog_query_reads_the_due_indexes_and_stops_at_its_limit(ctx: Context) -> None:
    """Cheap at any backlog: both halves are index scans (the planner is held off a sequential scan only to show
    an index serves them; on a large table it picks them itself), and a reading looks at ``limit`` tasks."""
    destination = await _overdue(ctx, "http://127.0.0.1:9/many", 5, 10.0)
    async with ctx.pool.acquire() as conn, conn.transaction():
        await conn.execute("SET LOCAL enable_seqscan = off")
        plan = await conn.fetchval("EXPLAIN (FORMAT JSON) " + db_backlog._DUE, 100, 10)
        assert "delivery_tasks_due" in plan
        assert "delivery_tasks_fifo" in plan
        (row,) = await db_backlog.due_by_destination(conn, limit=2, destinations=10)
    assert row[:2] == (destination, 2)
