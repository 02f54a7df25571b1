"""Delivery stats and destination ``health`` from real attempts to loopback destinations: counts,
latency percentiles within one bucket, the circuit, and a probe in flight showing half open."""

from __future__ import annotations

import math
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from control.db import histogram
from control.db.context import Context
from control.workers.flush import Flush
from tests.control.destinations.support import IDLE_HEALTH
from tests.destination import Destination, Reply, add_destination, add_endpoint, add_rule, running, serving
from tests.helpers import assert_error, parse_ts, wait_for
from tests.workers.stats.support import COOLDOWN_S, THRESHOLD, flush_records, read_stats, record_at


@pytest.fixture
def sinks() -> Iterator[list[Destination]]:
    with serving() as a, serving() as b, serving() as c:
        yield [a, b, c]


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
    records = [record_at(endpoint_id, now, "payments", "charge.succeeded") for _ in range(3)]
    records.append(record_at(endpoint_id, now, "payments", "charge.failed"))

    async def settled() -> bool:
        async with ctx.pool.acquire() as conn:
            return await conn.fetchval(
                """SELECT count(*) = 9 AND bool_and(status IN ('succeeded', 'failed'))
                     FROM delivery_tasks WHERE endpoint_id = $1""",
                endpoint_id,
            )

    async with running(ctx):
        await flush_records(ctx, flush, records)
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

    stats = await read_stats(client, account.headers, endpoint_id)
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
        **IDLE_HEALTH,
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
    after = await read_stats(client, account.headers, endpoint_id)
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
        await flush_records(ctx, flush, [record_at(endpoint_id, datetime.now(UTC), "payments", "first")])
        opened = await wait_for(lambda: circuit("open"), timeout=10)  # its one task's three attempts failed
        assert (opened["attempts"], opened["failed"], opened["consecutive_failures"]) == (THRESHOLD,) * 3
        async with ctx.pool.acquire() as conn:
            opened_at = await conn.fetchval("SELECT circuit_opened_at FROM destinations WHERE id = $1", destination_id)
        assert parse_ts(opened["reopens_at"]) == opened_at + timedelta(seconds=COOLDOWN_S)

        sink.hold()
        sink.reply(default=Reply(status=200))
        await flush_records(ctx, flush, [record_at(endpoint_id, datetime.now(UTC), "payments", "second")])
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
