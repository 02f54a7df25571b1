"""Endpoint stats from real flushes: event counts by outcome and reason, the window's minute and hour
rows, the sweep removing counters older than the window, a batch written twice counted once, and 401/404
across accounts."""

from __future__ import annotations

import time
from collections import Counter
from datetime import UTC, datetime, timedelta

from control.db import delivery_records, histogram
from control.db import stats as db_stats
from control.db.context import Context
from control.db.flush import store_batch
from control.records.storable import event_row
from control.service.stats import WINDOW_HOURS
from control.workers.flush import Flush
from control.workers.sweep.loop import Sweep
from shared import ids
from tests.destination import add_destination, add_endpoint
from tests.helpers import assert_error, create_endpoint, parse_ts
from tests.workers.stats.support import flush_records, read_stats, record_at

REASONS = (
    "missing_header",
    "malformed_header",
    "malformed_timestamp",
    "timestamp_out_of_tolerance",
    "signature_mismatch",
)


def _hour(at: datetime) -> datetime:
    return at.replace(minute=0, second=0, microsecond=0)


async def test_event_counts_from_real_flushes(client, account, ctx: Context, flush: Flush) -> None:
    now = datetime.now(UTC)
    async with ctx.pool.acquire() as conn:
        endpoint_id = await add_endpoint(conn, account_id=account.id)
        other_endpoint = await add_endpoint(conn, account_id=account.id)
    long_type = "t" * 250
    records = [
        *(record_at(endpoint_id, now - timedelta(seconds=5 + i), "payments", "invoice.paid") for i in range(4)),
        record_at(endpoint_id, now - timedelta(hours=2), "payments", "charge.refunded"),
        record_at(endpoint_id, now - timedelta(hours=5, minutes=30), "code_host", "push", signature_valid=True),
        record_at(endpoint_id, now - timedelta(hours=23, minutes=58), "commerce", "orders/create"),
        record_at(endpoint_id, now - timedelta(hours=24, minutes=5), "commerce", "orders/create"),  # before the window
        record_at(endpoint_id, now - timedelta(hours=1), None, None),
        record_at(endpoint_id, now - timedelta(minutes=3), "identity", long_type),
        *(
            record_at(
                endpoint_id,
                now - timedelta(minutes=10 + i),
                "payments",
                "invoice.paid",
                signature_valid=False,
                signature_failure_reason=reason,
            )
            for i, reason in enumerate(REASONS * 2)
        ),
        record_at(
            endpoint_id,
            now - timedelta(minutes=40),
            "payments",
            "invoice.paid",
            signature_valid=False,
            signature_failure_reason="timestamp_out_of_tolerance",
        ),
        record_at(other_endpoint, now, "payments", "invoice.paid"),  # another endpoint's
    ]
    await flush_records(ctx, flush, records[:10])
    await flush_records(ctx, flush, records[10:])
    await flush_records(ctx, flush, records)  # every entry again, as after a crash between commit and XACK

    stats = await read_stats(client, account.headers, endpoint_id)
    assert set(stats) == {"endpoint_id", "from", "to", "events", "refused", "deliveries", "destinations"}
    assert stats["endpoint_id"] == endpoint_id
    since, to = parse_ts(stats["from"]), parse_ts(stats["to"])
    assert since == (to - timedelta(hours=WINDOW_HOURS)).replace(second=0, microsecond=0)
    counted = [
        r
        for r in records
        if r.endpoint_id == endpoint_id and datetime.fromtimestamp(r.received_at_us / 1e6, UTC) >= since
    ]
    assert len(counted) == len(records) - 2
    events = stats["events"]
    assert set(events) == {"total", "per_hour", "by_provider", "by_event_type", "signature_failures"}
    assert events["total"] == len(counted)

    hours = Counter(_hour(datetime.fromtimestamp(r.received_at_us / 1e6, UTC)) for r in counted)
    expected_hours, hour = [], _hour(since)
    while hour <= to:
        expected_hours.append({"hour": hour.isoformat().replace("+00:00", "Z"), "count": hours[hour]})
        hour += timedelta(hours=1)
    assert events["per_hour"] == expected_hours
    assert len(events["per_hour"]) in (24, 25)

    assert events["by_provider"] == [
        {"provider": "payments", "count": 16},
        {"provider": "code_host", "count": 1},
        {"provider": "commerce", "count": 1},
        {"provider": "identity", "count": 1},
        {"provider": None, "count": 1},
    ]
    assert events["by_event_type"] == [
        {"provider": "payments", "event_type": "invoice.paid", "count": 15},
        {"provider": "code_host", "event_type": "push", "count": 1},
        {"provider": "commerce", "event_type": "orders/create", "count": 1},
        {"provider": "identity", "event_type": "t" * db_stats.EVENT_TYPE_CHARS, "count": 1},
        {"provider": "payments", "event_type": "charge.refunded", "count": 1},
        {"provider": None, "event_type": None, "count": 1},
    ]
    assert events["signature_failures"] == {
        "missing_header": 2,
        "malformed_header": 2,
        "malformed_timestamp": 2,
        "timestamp_out_of_tolerance": 3,
        "signature_mismatch": 2,
    }
    assert stats["deliveries"] == {
        "attempted": 0,
        "succeeded": 0,
        "failed": 0,
        "success_rate": None,
        "latency_ms": {"p50": None, "p95": None, "p99": None},
    }
    assert stats["destinations"] == []


async def test_the_window_reads_minutes_of_its_first_hour_and_whole_hours_after(ctx: Context) -> None:
    """A fixed window starting at 10:30: events at 10:29 are out, 10:30 and 10:59 in (minute rows), 11:xx and
    later in (hour rows), and nothing after ``until``."""
    base = _hour(datetime.now(UTC)) - timedelta(hours=6)
    window = db_stats.Window(since=base + timedelta(minutes=30), until=base + timedelta(hours=3, minutes=10))
    assert window.first_hour == base + timedelta(hours=1)
    minutes = [29, 30, 59, 60, 61, 119, 120, 189, 190, 191]  # 190 = 13:10 is `until` itself, 191 after it
    async with ctx.pool.acquire() as conn:
        endpoint_id = await add_endpoint(conn)
        rows = [
            event_row(record_at(endpoint_id, base + timedelta(minutes=m, seconds=1), "payments", "invoice.paid"))
            for m in minutes
        ]
        async with conn.transaction():
            await store_batch(conn, rows)
        found = await db_stats.event_counts(conn, endpoint_id, window)
    per_hour = {r["hour"]: r["count"] for r in found if r["grouped"] == db_stats.EVENTS_BY_HOUR}
    assert per_hour == {
        base: 2,  # 10:30 and 10:59, not 10:29
        base + timedelta(hours=1): 3,  # 11:00, 11:01, 11:59
        base + timedelta(hours=2): 1,  # 12:00
        base + timedelta(hours=3): 3,  # the hour row of 13:00 holds 13:09, 13:10 and 13:11: read whole
    }


async def test_the_sweep_removes_counters_older_than_the_window(ctx: Context) -> None:
    now = datetime.now(UTC)
    async with ctx.pool.acquire() as conn:
        endpoint_id = await add_endpoint(conn)
        destination_id = await add_destination(conn, endpoint_id, "http://127.0.0.1:9/")
        async with conn.transaction():
            await store_batch(
                conn,
                [event_row(record_at(endpoint_id, now - timedelta(hours=h))) for h in (0, 23, 26, 30)],
            )
            await db_stats.count_deliveries(
                conn, [(endpoint_id, destination_id, now - timedelta(hours=h), True, 5) for h in (0, 26)]
            )
    await Sweep(ctx).step()
    async with ctx.pool.acquire() as conn:
        kept = await conn.fetch("SELECT span, start FROM stats_events ORDER BY start, span")
        kept_deliveries = await conn.fetchval("SELECT count(*) FROM stats_deliveries")
    oldest = now - timedelta(hours=WINDOW_HOURS + 1)
    assert all(r["start"] >= oldest - timedelta(hours=1) for r in kept)
    assert len(kept) == 6  # the minute, the ten minutes and the hour of the two events in the window
    assert kept_deliveries == 3


async def test_a_delivery_batch_written_twice_is_counted_once(ctx: Context) -> None:
    now = datetime.now(UTC)
    async with ctx.pool.acquire() as conn:
        endpoint_id = await add_endpoint(conn)
        destination_id = await add_destination(conn, endpoint_id, "http://127.0.0.1:9/")

        def row(source: str, success: bool, latency: int) -> tuple[object, ...]:
            values = dict.fromkeys(delivery_records.COLUMNS)
            values.update(
                id=ids.new_id("dlv"),
                endpoint_id=endpoint_id,
                event_id=ids.new_id("evt"),
                destination_id=destination_id,
                source=source,
                attempt_number=1,
                success=success,
                latency_ms=latency,
                created_at=now,
            )
            return tuple(values.values())

        rows = [row("rule", True, 3), row("rule", False, 40), row("replay", True, 7), row("manual_test", True, 9)]
        for _ in range(2):
            async with conn.transaction():
                await delivery_records.insert_many(conn, rows)
        await delivery_records.insert(conn, rows[0])  # one more time, on its own
        counts, _ = await db_stats.delivery_counts(conn, endpoint_id, db_stats.Window.last(24, now))
    assert (counts.attempts, counts.succeeded) == (2, 1)
    assert counts.latency == histogram.histogram([3, 40])
    async with ctx.pool.acquire() as conn:
        columns = await conn.fetch(
            """SELECT column_name FROM information_schema.columns
                WHERE table_name = 'stats_deliveries' AND column_name LIKE 'ms\\_%' ORDER BY ordinal_position"""
        )
    assert tuple(r["column_name"] for r in columns) == db_stats.LATENCY_COLUMNS
    assert len(db_stats.LATENCY_COLUMNS) == histogram.SIZE


async def test_unknown_other_accounts_and_unauthenticated_are_refused(client, account, other_account) -> None:
    mine = await create_endpoint(client, account.headers)
    fresh = await read_stats(client, account.headers, mine["id"])
    assert fresh["events"]["total"] == 0
    assert all(h["count"] == 0 for h in fresh["events"]["per_hour"])
    assert fresh["events"]["signature_failures"] == dict.fromkeys(REASONS, 0)
    path = f"/v1/endpoints/{mine['id']}/stats"
    assert_error(await client.get(path, headers=other_account.headers), 404, "not_found")
    assert_error(
        await client.get("/v1/endpoints/ep_01KAAAAAAAAAAAAAAAAAAAAAAA/stats", headers=account.headers), 404, "not_found"
    )
    assert_error(await client.get("/v1/endpoints/nonsense/stats", headers=account.headers), 404, "not_found")
    assert_error(await client.get(path), 401, "unauthorized")
    assert_error(await client.get(path, headers={"Authorization": "Bearer hy_live_" + "x" * 32}), 401, "unauthorized")
    started = time.monotonic()
    await read_stats(client, account.headers, mine["id"])
    assert time.monotonic() - started < 5
