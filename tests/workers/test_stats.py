"""GET /v1/endpoints/{id}/stats and the ``health`` of GET /v1/destinations/{id}: counters kept by real flushes
and real deliveries to loopback destinations, checked against exact expected numbers; the window's minute and
hour rows; the sweep removing counters older than the window; 401/404 across accounts."""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
import pytest

from control.db import delivery_records, histogram
from control.db import stats as db_stats
from control.db.flush import store_batch
from control.records.storable import event_row
from control.service import Context
from control.service.stats import WINDOW_HOURS
from control.workers.flush import Flush
from control.workers.sweep import Sweep
from shared import ids
from shared.settings import Settings
from shared.wire import IngestRecord, encode_records
from tests.conftest import ingest_record
from tests.destination import (
    FAST_DELIVERY,
    Destination,
    Reply,
    add_destination,
    add_endpoint,
    add_rule,
    running,
    serving,
)
from tests.helpers import assert_error, create_endpoint, parse_ts, wait_for

THRESHOLD, COOLDOWN_S = 3, 1.0
REASONS = (
    "missing_header",
    "malformed_header",
    "malformed_timestamp",
    "timestamp_out_of_tolerance",
    "signature_mismatch",
)


@pytest.fixture
def settings(settings: Settings) -> Settings:
    return msgspec.structs.replace(
        settings,
        **{**FAST_DELIVERY, "deliver_timeout_s": 5.0, "deliver_lease_s": 10.0},
        circuit_failure_threshold=THRESHOLD,
        circuit_cooldown_s=COOLDOWN_S,
    )


@pytest.fixture
def sinks() -> Iterator[list[Destination]]:
    with serving() as a, serving() as b, serving() as c:
        yield [a, b, c]


def _record(endpoint_id: str, at: datetime, provider: str | None = None, event_type: str | None = None, **kw: Any):
    """An ingest record received ``at``, attributed to ``provider`` and ``event_type`` (the body names it too)."""
    body = b'{"type":"%s"}' % (event_type or "none").encode()
    at_us = int(at.timestamp() * 1_000_000)
    return ingest_record(
        endpoint_id, body, at_us=at_us, source_ip="203.0.113.9", provider=provider, event_type=event_type, **kw
    )


async def _flush(ctx: Context, flush: Flush, records: list[IngestRecord]) -> None:
    await ctx.redis.xadd(ctx.keys.ingest_stream(0), {"r": encode_records(records)})
    while await flush.step():
        pass


async def _stats(client: Any, headers: dict[str, str], endpoint_id: str) -> dict[str, Any]:
    resp = await client.get(f"/v1/endpoints/{endpoint_id}/stats", headers=headers)
    assert resp.status_code == 200, resp.text
    return resp.json()


def _hour(at: datetime) -> datetime:
    return at.replace(minute=0, second=0, microsecond=0)


# -- events ------------------------------------------------------------------------------------------------


async def test_event_counts_from_real_flushes(client, account, ctx: Context, flush: Flush) -> None:
    now = datetime.now(UTC)
    async with ctx.pool.acquire() as conn:
        endpoint_id = await add_endpoint(conn, account_id=account.id)
        other_endpoint = await add_endpoint(conn, account_id=account.id)
    long_type = "t" * 250
    records = [
        *(_record(endpoint_id, now - timedelta(seconds=5 + i), "payments", "invoice.paid") for i in range(4)),
        _record(endpoint_id, now - timedelta(hours=2), "payments", "charge.refunded"),
        _record(endpoint_id, now - timedelta(hours=5, minutes=30), "code_host", "push", signature_valid=True),
        _record(endpoint_id, now - timedelta(hours=23, minutes=58), "commerce", "orders/create"),
        _record(endpoint_id, now - timedelta(hours=24, minutes=5), "commerce", "orders/create"),  # before the window
        _record(endpoint_id, now - timedelta(hours=1), None, None),
        _record(endpoint_id, now - timedelta(minutes=3), "identity", long_type),
        *(
            _record(
                endpoint_id,
                now - timedelta(minutes=10 + i),
                "payments",
                "invoice.paid",
                signature_valid=False,
                signature_failure_reason=reason,
            )
            for i, reason in enumerate(REASONS * 2)
        ),
        _record(
            endpoint_id,
            now - timedelta(minutes=40),
            "payments",
            "invoice.paid",
            signature_valid=False,
            signature_failure_reason="timestamp_out_of_tolerance",
        ),
        _record(other_endpoint, now, "payments", "invoice.paid"),  # another endpoint's
    ]
    await _flush(ctx, flush, records[:10])
    await _flush(ctx, flush, records[10:])
    await _flush(ctx, flush, records)  # every entry again, as after a crash between commit and XACK

    stats = await _stats(client, account.headers, endpoint_id)
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
            event_row(_record(endpoint_id, base + timedelta(minutes=m, seconds=1), "payments", "invoice.paid"))
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
                [event_row(_record(endpoint_id, now - timedelta(hours=h))) for h in (0, 23, 26, 30)],
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
    assert len(kept) == 4  # the minute and the hour of the two events in the window
    assert kept_deliveries == 2


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
        (counts,) = [
            r for r in await db_stats.delivery_counts(conn, endpoint_id, db_stats.Window.last(24, now)) if r["overall"]
        ]
    assert (counts["attempts"], counts["succeeded"]) == (2, 1)
    assert counts["latency"] == histogram.histogram([3, 40])
    async with ctx.pool.acquire() as conn:
        columns = await conn.fetch(
            """SELECT column_name FROM information_schema.columns
                WHERE table_name = 'stats_deliveries' AND column_name LIKE 'ms\\_%' ORDER BY ordinal_position"""
        )
    assert tuple(r["column_name"] for r in columns) == db_stats.LATENCY_COLUMNS
    assert len(db_stats.LATENCY_COLUMNS) == histogram.SIZE


# -- deliveries and destination health ---------------------------------------------------------------------


def _true_percentile(latencies: list[int], q: float) -> int:
    ordered = sorted(latencies)
    return ordered[max(1, math.ceil(q * len(ordered))) - 1]


def _within_one_bucket(reported: int, latencies: list[int], q: float) -> None:
    """The reported value is the upper bound of the bucket holding the true nearest-rank percentile."""
    true = _true_percentile(latencies, q)
    assert reported == histogram.BOUNDS_MS[histogram.bucket(true)], (q, reported, true)
    assert true <= reported
    index = histogram.BOUNDS_MS.index(reported)
    assert index == 0 or histogram.BOUNDS_MS[index - 1] < true


async def test_deliveries_and_destination_health_from_real_attempts(
    client, account, other_account, ctx: Context, flush: Flush, sinks: list[Destination]
) -> None:
    ok, flaky, down = sinks
    ok.reply(Reply(delay_s=0.3))  # one slow answer: the tail of the latency
    flaky.reply(Reply(status=500))  # its first request fails, then it answers 200
    down.reply(default=Reply(status=503, body=b"down"))
    async with ctx.pool.acquire() as conn:
        endpoint_id = await add_endpoint(conn, account_id=account.id)
        ids_ = {
            name: await add_destination(conn, endpoint_id, sink.url, name=name)
            for name, sink in (("ok", ok), ("flaky", flaky), ("down", down))
        }
        ids_["idle"] = await add_destination(conn, endpoint_id, "http://127.0.0.1:9/idle", name=None)
        await add_rule(conn, endpoint_id, [ids_["ok"], ids_["flaky"]])
        failed_only = {
            "op": "AND",
            "children": [{"field": "body.type", "operator": "equals", "value": "charge.failed"}],
        }
        await add_rule(conn, endpoint_id, [ids_["down"]], failed_only)
    now = datetime.now(UTC)
    records = [_record(endpoint_id, now, "payments", "charge.succeeded") for _ in range(3)]
    records.append(_record(endpoint_id, now, "payments", "charge.failed"))

    async def settled() -> bool:
        async with ctx.pool.acquire() as conn:
            return await conn.fetchval(
                """SELECT count(*) = 9 AND bool_and(status IN ('succeeded', 'failed'))
                     FROM delivery_tasks WHERE endpoint_id = $1""",
                endpoint_id,
            )

    async with running(ctx):
        await _flush(ctx, flush, records)
        await wait_for(settled, timeout=20)
    # Manual sends to a destination's URL are not its health: a replay and a destination test.
    event_id = records[0].id
    replayed = await client.post(f"/v1/events/{event_id}/replay", json={"url": ok.url}, headers=account.headers)
    assert replayed.json()["success"] is True
    tested = await client.post(f"/v1/destinations/{ids_['ok']}/test", headers=account.headers)
    assert tested.json()["success"] is True

    async with ctx.pool.acquire() as conn:
        rows = await conn.fetch(
            """SELECT destination_id, success, latency_ms, response_status, created_at FROM deliveries
                WHERE endpoint_id = $1 AND source = 'rule' ORDER BY created_at""",
            endpoint_id,
        )
        circuit = await conn.fetchrow("SELECT circuit, circuit_opened_at FROM destinations WHERE id = $1", ids_["down"])
    assert len(rows) == 4 + 5 + 3
    latencies = [r["latency_ms"] for r in rows]
    assert max(latencies) >= 300

    stats = await _stats(client, account.headers, endpoint_id)
    assert stats["events"]["total"] == 4
    deliveries = stats["deliveries"]
    assert {k: deliveries[k] for k in ("attempted", "succeeded", "failed", "success_rate")} == {
        "attempted": 12,
        "succeeded": 8,
        "failed": 4,
        "success_rate": 0.6667,
    }
    for q, name in ((0.5, "p50"), (0.95, "p95"), (0.99, "p99")):
        _within_one_bucket(deliveries["latency_ms"][name], latencies, q)
    assert deliveries["latency_ms"]["p99"] >= 300

    by_id = {d["destination_id"]: d for d in stats["destinations"]}
    assert [d["destination_id"] for d in stats["destinations"]] == [ids_[n] for n in ("ok", "flaky", "down", "idle")]

    def last(destination: str) -> Any:
        return [r for r in rows if r["destination_id"] == ids_[destination]][-1]

    ok_stats = by_id[ids_["ok"]]
    ok_latencies = [r["latency_ms"] for r in rows if r["destination_id"] == ids_["ok"]]
    assert len(ok_latencies) == 4  # the four events routed to it; the replay and the test are not counted
    assert (ok_stats["name"], ok_stats["url"]) == ("ok", ok.url)
    assert (ok_stats["attempts"], ok_stats["succeeded"], ok_stats["failed"], ok_stats["success_rate"]) == (4, 4, 0, 1.0)
    for q, name in ((0.5, "p50"), (0.95, "p95"), (0.99, "p99")):
        _within_one_bucket(ok_stats["latency_ms"][name], ok_latencies, q)
    assert (ok_stats["last_status"], ok_stats["consecutive_failures"], ok_stats["circuit"]) == (200, 0, "closed")
    assert ok_stats["reopens_at"] is None
    assert parse_ts(ok_stats["last_attempt_at"]) == last("ok")["created_at"]

    flaky_stats = by_id[ids_["flaky"]]
    assert (flaky_stats["attempts"], flaky_stats["succeeded"], flaky_stats["failed"]) == (5, 4, 1)
    assert flaky_stats["success_rate"] == 0.8
    assert (flaky_stats["last_status"], flaky_stats["consecutive_failures"], flaky_stats["circuit"]) == (
        200,
        0,
        "closed",
    )

    down_stats = by_id[ids_["down"]]
    assert (down_stats["attempts"], down_stats["succeeded"], down_stats["failed"]) == (3, 0, 3)
    assert down_stats["success_rate"] == 0.0
    assert (down_stats["last_status"], down_stats["consecutive_failures"]) == (503, THRESHOLD)
    assert down_stats["circuit"] == circuit["circuit"] == "open"
    assert parse_ts(down_stats["reopens_at"]) == circuit["circuit_opened_at"] + timedelta(seconds=COOLDOWN_S)
    assert parse_ts(down_stats["last_attempt_at"]) == last("down")["created_at"]

    idle = by_id[ids_["idle"]]
    assert idle == {
        "destination_id": ids_["idle"],
        "name": None,
        "url": "http://127.0.0.1:9/idle",
        "attempts": 0,
        "succeeded": 0,
        "failed": 0,
        "success_rate": None,
        "latency_ms": {"p50": None, "p95": None, "p99": None},
        "last_status": None,
        "last_attempt_at": None,
        "consecutive_failures": 0,
        "circuit": "closed",
        "reopens_at": None,
        "paused_until": None,
        "fifo_waiting": 0,
    }

    # GET /v1/destinations/{id} carries the same block; another account sees none of it.
    for name in ("ok", "down", "idle"):
        got = await client.get(f"/v1/destinations/{ids_[name]}", headers=account.headers)
        assert got.status_code == 200, got.text
        expected = {k: v for k, v in by_id[ids_[name]].items() if k not in ("destination_id", "name", "url")}
        assert got.json()["health"] == expected
        assert_error(
            await client.get(f"/v1/destinations/{ids_[name]}", headers=other_account.headers), 404, "not_found"
        )
    assert_error(
        await client.get(f"/v1/endpoints/{endpoint_id}/stats", headers=other_account.headers), 404, "not_found"
    )

    # A deleted destination's attempts stay in the endpoint's totals; it leaves the list.
    assert (await client.delete(f"/v1/destinations/{ids_['flaky']}", headers=account.headers)).status_code == 200
    after = await _stats(client, account.headers, endpoint_id)
    assert after["deliveries"]["attempted"] == 12
    assert ids_["flaky"] not in {d["destination_id"] for d in after["destinations"]}


async def test_a_probe_in_flight_shows_half_open(
    client, account, ctx: Context, flush: Flush, sinks: list[Destination]
) -> None:
    """Open after THRESHOLD failures; once the cool-down is over the next due delivery goes as the probe
    (half_open, reopens_at one cool-down after the probe began); its success closes the circuit."""
    sink = sinks[0]
    sink.reply(default=Reply(status=500))
    async with ctx.pool.acquire() as conn:
        endpoint_id = await add_endpoint(conn, account_id=account.id)
        destination_id = await add_destination(conn, endpoint_id, sink.url)
        await add_rule(conn, endpoint_id, [destination_id])

    async def health() -> dict[str, Any]:
        resp = await client.get(f"/v1/destinations/{destination_id}", headers=account.headers)
        assert resp.status_code == 200, resp.text
        return resp.json()["health"]

    async def circuit(state: str) -> dict[str, Any] | None:
        got = await health()
        return got if got["circuit"] == state else None

    async with running(ctx):
        await _flush(ctx, flush, [_record(endpoint_id, datetime.now(UTC), "payments", "first")])
        opened = await wait_for(lambda: circuit("open"), timeout=10)  # its one task's three attempts failed
        assert (opened["attempts"], opened["failed"], opened["consecutive_failures"]) == (THRESHOLD,) * 3
        async with ctx.pool.acquire() as conn:
            opened_at = await conn.fetchval("SELECT circuit_opened_at FROM destinations WHERE id = $1", destination_id)
        assert parse_ts(opened["reopens_at"]) == opened_at + timedelta(seconds=COOLDOWN_S)

        sink.hold()
        sink.reply(default=Reply(status=200))
        await _flush(ctx, flush, [_record(endpoint_id, datetime.now(UTC), "payments", "second")])
        probing = await wait_for(lambda: circuit("half_open"), timeout=10)
        async with ctx.pool.acquire() as conn:
            probe_at = await conn.fetchval("SELECT circuit_opened_at FROM destinations WHERE id = $1", destination_id)
        assert probe_at >= opened_at + timedelta(seconds=COOLDOWN_S)
        assert parse_ts(probing["reopens_at"]) == probe_at + timedelta(seconds=COOLDOWN_S)
        assert (probing["attempts"], probing["consecutive_failures"]) == (THRESHOLD, THRESHOLD)
        sink.release()
        done = await wait_for(lambda: circuit("closed"), timeout=10)
    assert (done["consecutive_failures"], done["reopens_at"], done["last_status"]) == (0, None, 200)
    assert (done["attempts"], done["succeeded"], done["failed"]) == (THRESHOLD + 1, 1, THRESHOLD)


# -- errors ------------------------------------------------------------------------------------------------


async def test_unknown_other_accounts_and_unauthenticated_are_refused(client, account, other_account) -> None:
    mine = await create_endpoint(client, account.headers)
    fresh = await _stats(client, account.headers, mine["id"])
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
    await _stats(client, account.headers, mine["id"])
    assert time.monotonic() - started < 5
