"""The recorder's usual batch as one statement (``delivery_records.write``, ADR 0042, session 10): the records
and their counts, the task results and the circuits the successes close, as the transaction of separate
statements writes them; and the counting, now in SQL, against ``histogram.bucket`` at every bound."""

from __future__ import annotations

from datetime import UTC, datetime

import asyncpg

from control.db import delivery_records, histogram
from control.db import stats as db_stats
from control.db.context import Context
from tests.delivery.rows import attempt_row
from tests.destination import Destination, make_task


def _with_latency(row: tuple, latency_ms: int | None) -> tuple:
    out = list(row)
    out[delivery_records.COLUMNS.index("latency_ms")] = latency_ms
    return tuple(out)


async def _counts(conn: asyncpg.Connection, endpoint_id: str) -> db_stats.DeliveryCounts:
    window = db_stats.Window.last(24, datetime.now(UTC))
    overall, _ = await db_stats.delivery_counts(conn, endpoint_id, window)
    return overall


async def test_one_statement_writes_records_counts_results_and_closes_the_circuit(
    ctx: Context, destination: Destination
) -> None:
    first = await make_task(ctx, destination.url)
    same = {"endpoint_id": first["endpoint"], "destination_id": first["destination"]}
    tasks = [first, *[await make_task(ctx, destination.url, **same) for _ in range(4)]]
    sent, failed, skipped, gone = tasks[:2], tasks[2], tasks[3], tasks[4]
    rows = [_with_latency(attempt_row(sent[0], 0), 0), _with_latency(attempt_row(sent[1], 7), 7)]
    rows.append(_with_latency(attempt_row(failed, 120_001, success=False), 120_001))
    rows.append(attempt_row(skipped, None, transform={"outcome": "skipped"}))  # nothing went out: not counted
    rows.append(_with_latency(attempt_row(gone, 3), 3))  # its task is gone before the write: neither stored nor counted
    results = [(t["task"], 0, "succeeded", None, None) for t in (*sent, skipped, gone)]
    results.append((failed["task"], 0, "pending", 30.0, "HTTP 500"))
    async with ctx.pool.acquire() as conn:
        await conn.execute("DELETE FROM delivery_tasks WHERE id = $1", gone["task"])
        await conn.execute("UPDATE destinations SET consecutive_failures = 2 WHERE id = $1", first["destination"])
        assert await delivery_records.write(conn, rows, results, [first["destination"]]) == 4
        again = await delivery_records.write(conn, rows, results, [first["destination"]])  # a lost COMMIT's retry
        stored = await conn.fetch("SELECT task_id FROM deliveries WHERE endpoint_id = $1", first["endpoint"])
        tasks_now = await conn.fetch("SELECT id, status FROM delivery_tasks WHERE endpoint_id = $1", first["endpoint"])
        states = {r["id"]: r["status"] for r in tasks_now}
        due_in = await conn.fetchval(
            "SELECT extract(epoch FROM next_attempt_at - now()) FROM delivery_tasks WHERE id = $1", failed["task"]
        )
        failures = await conn.fetchval(
            "SELECT consecutive_failures FROM destinations WHERE id = $1", first["destination"]
        )
        counts = await _counts(conn, first["endpoint"])
    assert again == 1  # fenced: only the retry, still pending at the same attempt, has its due time set again
    assert sorted(r["task_id"] for r in stored) == sorted(t["task"] for t in (*sent, failed, skipped))
    assert states == {sent[0]["task"]: "succeeded", sent[1]["task"]: "succeeded", failed["task"]: "pending",
                      skipped["task"]: "succeeded"}  # fmt: skip
    assert 25 < due_in <= 30
    assert failures == 0
    assert (counts.attempts, counts.succeeded) == (3, 2)  # counted once, though written twice
    assert list(counts.latency) == histogram.histogram([0, 7, 120_001])


async def test_counts_in_sql_bucket_every_bound_as_the_histogram_does(ctx: Context, destination: Destination) -> None:
    made = await make_task(ctx, destination.url)
    latencies = sorted({v for b in histogram.BOUNDS_MS for v in (b - 1, b, b + 1) if v >= 0} | {10**9})
    rows = [_with_latency(attempt_row(made, v), v) for v in latencies]
    rows.append(_with_latency(attempt_row(made, None), None))  # an attempt without a latency: counted, no bucket
    async with ctx.pool.acquire() as conn:
        await delivery_records.insert_many(conn, rows)
        counts = await _counts(conn, made["endpoint"])
    assert counts.attempts == len(latencies) + 1
    assert list(counts.latency) == histogram.histogram(latencies)
