"""Stats latency with 1,000,000 events and 1,000,000 rule deliveries in the 24-hour window of one endpoint.

Events and deliveries are generated straight into Postgres with SQL (generate_series), spread over the last
24 hours, 4 providers x 5 event types, 1 in 20 events with a failed signature (every reason), 5 destinations,
1 in 10 attempts failed, latencies from 1 ms to seconds. They are counted by the code the flush and the
deliver worker run (``control.db.stats.events_counted`` in the insert's statement, ``count_deliveries`` on
the inserted rows), spread over every counter slot as concurrent writers would (the worst case for the
reader). Then ``GET /v1/endpoints/{id}/stats`` and ``GET /v1/destinations/{id}`` are asked sequentially N
times over HTTP through a real control process, and the answer is checked against the rows. Target
(``TARGETS``): stats p99 ≤ 50 ms, printed last.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from datetime import datetime
from typing import Any

import asyncpg
import httpx

from bench.infra import bench_env, free_port, granian, run_process
from bench.results import Target
from bench.setup import create_endpoint
from control.db import connect
from control.db import stats as db_stats
from control.db.context import Principal
from control.records.destinations import DestinationCreate
from control.service.destinations.crud import create_destination
from control.workers.main import worker_context
from shared.settings import Settings

__all__ = ("run",)

TARGETS = (
    Target(
        figure="endpoint stats, 1M events + 1M deliveries in 24 h, p99",
        key="p99_ms",
        op="<=",
        bound=50,
        unit=" ms",
        beside=("p50_ms", "destination_p99_ms"),
    ),
)


TOTAL = 1_000_000
DESTINATIONS = 5
STEP = 100_000
_DAY_S = 86_000  # a little under 24 hours, so every row is inside the window when it is asked

_EVENTS = f"""
WITH ins AS (
    INSERT INTO events (id, endpoint_id, received_at, method, path, query, headers, body, body_is_utf8,
                        content_type, source_ip, provider, event_type, signature_valid, signature_failure_reason,
                        labels, search_text)
    SELECT 'evt_' || lpad(to_hex(g), 26, '0'), $1, now() - make_interval(secs => (g * 7919) % {_DAY_S}),
           'POST', '', '', '{{"content-type": "application/json"}}'::jsonb, '\\x7b7d'::bytea, true,
           'application/json', '203.0.113.7'::inet,
           (ARRAY['payments','commerce','identity','code_host'])[1 + g % 4],
           (ARRAY['invoice.paid','orders/create','user.created','push','charge.refunded'])[1 + g % 5],
           g % 20 <> 0,
           CASE WHEN g % 20 = 0 THEN (ARRAY['missing_header','malformed_header','malformed_timestamp',
                'timestamp_out_of_tolerance','signature_mismatch'])[1 + (g / 20) % 5] END,
           '[]'::jsonb, '{{}}'
      FROM generate_series($2::bigint, $3::bigint) g
    RETURNING endpoint_id, received_at, provider, event_type, signature_failure_reason
), counted AS ({db_stats.events_counted("ins")})
SELECT count(*) FROM ins
"""
_DELIVERIES = f"""
INSERT INTO deliveries (id, endpoint_id, event_id, destination_id, destination_name, destination_url, rule_id,
                        source, attempt_number, response_status, latency_ms, success, created_at)
SELECT 'dlv_' || lpad(to_hex(g), 26, '0'), $1, 'evt_' || lpad(to_hex(g), 26, '0'),
       ($4::text[])[1 + g % {DESTINATIONS}], 'sink', 'http://127.0.0.1:9/', 'rule_1', 'rule', 1,
       CASE WHEN g % 10 = 0 THEN 500 ELSE 200 END,
       (2 + (g * 31) % 97 + CASE WHEN g % 50 = 0 THEN 1500 ELSE 0 END)::integer, g % 10 <> 0,
       now() - make_interval(secs => (g * 7919) % {_DAY_S})
  FROM generate_series($2::bigint, $3::bigint) g
RETURNING endpoint_id, destination_id, created_at, success, latency_ms
"""


async def _writers(dsn: str) -> list[asyncpg.Connection]:
    """One connection per counter slot: concurrent writers fill every slot, the reader sums them all."""
    by_slot: dict[int, asyncpg.Connection] = {}
    spare = []
    while len(by_slot) < db_stats.SLOTS:
        conn = await connect(dsn)
        slot = await conn.fetchval("SELECT pg_backend_pid()") % db_stats.SLOTS
        if slot in by_slot:
            spare.append(conn)
        else:
            by_slot[slot] = conn
    for conn in spare:
        await conn.close()
    return list(by_slot.values())


async def _fill(dsn: str, endpoint_id: str, destination_ids: list[str]) -> None:
    writers = await _writers(dsn)
    try:
        for i, start in enumerate(range(0, TOTAL, STEP)):
            conn = writers[i % len(writers)]
            end = min(TOTAL, start + STEP) - 1
            async with conn.transaction():
                await conn.fetchval(_EVENTS, endpoint_id, start, end)
                rows = await conn.fetch(_DELIVERIES, endpoint_id, start, end, destination_ids)
                await db_stats.count_deliveries(conn, [tuple(r) for r in rows])
        await writers[0].execute("ANALYZE")
    finally:
        for conn in writers:
            await conn.close()


async def _destinations(settings: Settings, endpoint_id: str, account_id: str) -> list[str]:
    async with worker_context(settings) as ctx:
        principal = Principal(account_id=account_id, key_id="bench", kind="live")
        return [
            (
                await create_destination(
                    ctx, principal, endpoint_id, DestinationCreate(url=f"http://127.0.0.1:9/{i}", name=f"sink {i}")
                )
            ).id
            for i in range(DESTINATIONS)
        ]


async def _truth(dsn: str, endpoint_id: str, since: datetime) -> dict[str, Any]:
    conn = await asyncpg.connect(dsn)
    try:
        return dict(
            await conn.fetchrow(
                """SELECT (SELECT count(*) FROM events WHERE endpoint_id = $1 AND received_at >= $2)
                              AS events,
                          (SELECT count(*) FROM deliveries WHERE endpoint_id = $1 AND created_at >= $2)
                              AS attempted,
                          (SELECT count(*) FILTER (WHERE success) FROM deliveries
                            WHERE endpoint_id = $1 AND created_at >= $2) AS succeeded""",
                endpoint_id,
                since,
            )
        )
    finally:
        await conn.close()


async def _counter_rows(dsn: str) -> int:
    conn = await asyncpg.connect(dsn)
    try:
        return await conn.fetchval(
            "SELECT (SELECT count(*) FROM stats_events) + (SELECT count(*) FROM stats_deliveries)"
        )
    finally:
        await conn.close()


def _measure(client: httpx.Client, url: str, n: int) -> tuple[float, float, dict[str, Any]]:
    timings = []
    body: dict[str, Any] = {}
    for _ in range(n):
        started = time.perf_counter()
        response = client.get(url)
        timings.append((time.perf_counter() - started) * 1000)
        if response.status_code != 200:
            raise SystemExit(f"{url}: {response.status_code} {response.text[:200]}")
        body = response.json()
    timings.sort()
    return statistics.median(timings), timings[max(0, int(len(timings) * 0.99) - 1)], body


def run(seconds: float) -> dict[str, object]:
    with bench_env(rate_limit_per_s=100_000, rate_limit_burst=100_000) as bench:
        endpoint = asyncio.run(create_endpoint(bench.settings))
        destination_ids = asyncio.run(_destinations(bench.settings, endpoint.id, endpoint.account_id))
        started = time.perf_counter()
        asyncio.run(_fill(bench.settings.database_url, endpoint.id, destination_ids))
        fill_s = time.perf_counter() - started
        print(f"filled {TOTAL} events and {TOTAL} deliveries in {fill_s:.1f} s", flush=True)
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        n = max(50, int(seconds * 20))
        headers = {"Authorization": f"Bearer {endpoint.api_key}"}
        with (
            run_process(granian("control.app:create_app", port), bench.env, f"{base}/healthz"),
            httpx.Client(headers=headers, timeout=30) as client,
        ):
            stats_url = f"{base}/v1/endpoints/{endpoint.id}/stats"
            destination_url = f"{base}/v1/destinations/{destination_ids[0]}"
            _measure(client, stats_url, 3)  # warm
            p50, p99, body = _measure(client, stats_url, n)
            _measure(client, destination_url, 3)
            dest_p50, dest_p99, _ = _measure(client, destination_url, n)
        print(f"stats p50 {p50:.1f} ms p99 {p99:.1f} ms; destination p50 {dest_p50:.1f} ms p99 {dest_p99:.1f} ms")
        since = datetime.fromisoformat(body["from"].replace("Z", "+00:00"))
        truth = asyncio.run(_truth(bench.settings.database_url, endpoint.id, since))
        deliveries = body["deliveries"]
        got = {"events": body["events"]["total"], **{k: deliveries[k] for k in ("attempted", "succeeded")}}
        if got != truth:
            raise SystemExit(f"stats {got} differ from the rows {truth}")
        rows = asyncio.run(_counter_rows(bench.settings.database_url))
        return {
            "events": truth["events"],
            "deliveries": truth["attempted"],
            "counter_rows": rows,
            "fill_s": round(fill_s, 1),
            "requests": n,
            "latency_p99_bucket_ms": deliveries["latency_ms"]["p99"],
            "destination_p50_ms": round(dest_p50, 1),
            "destination_p99_ms": round(dest_p99, 1),
            "p50_ms": round(p50, 1),
            "p99_ms": round(p99, 1),
        }
