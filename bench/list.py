"""Events list latency with 1,000,000 and then 3,000,000 events stored: p50/p99 per query shape, through a real
control process (each size in a database of its own; ``BENCH_LIST_EVENTS=200000,1000000`` for others).

Events are generated straight into Postgres with SQL (generate_series), spread over 10 endpoints and 7 days (a
seventh today, between midnight UTC and now, whatever the hour), with providers, event types, methods and a few
distinct words in the bodies varying independently; the sweep's search indexes are built as in production (full
ones for finished days, today's prefix up to its last whole hour); then each query shape is asked sequentially N
times over HTTP. ``q`` is a common term (one event in five); ``q_mid`` a term in about one event of 450 (a few
in the walk, the rest from the index, whose read stops at the newest day that fills the page: ADR 0074); ``q_today`` the
worst case of ``q``: the newest events, today's partition alone, for a term that endpoint never holds;
``today_unindexed`` is how many of that endpoint's events today lie past the prefix index (read by scanning).
The search text is made as the flush makes it: the body, content type, method, type, path and the header values
(a request id unique per event).
Figures of the first size have plain names, the others a suffix (``q_p99_ms_3m``); ``q_growth`` is the worst
``q`` p99 at the last size over the first's (its events ratio beside it): under that ratio, ``q`` grows
sub-linearly. ``index_s`` is the time the sweep's index builds took.
Targets (``TARGETS``): filtered list p99 ≤ 25 ms, ``q`` ≤ 200 ms at 1M and at 3M, ``q_growth`` ≤ 2.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import time

import asyncpg
import httpx

from bench.infra import bench_env, free_port, granian, run_process
from bench.results import Target
from bench.setup import create_endpoint
from control.db import partitions

__all__ = ("fill_events", "run")

TARGETS = (
    Target(
        figure="events list with filters, 1M events stored, p99", key="filters_p99_ms", op="<=", bound=25, unit=" ms"
    ),
    Target(
        figure="events list `q` search, 1M events stored, p99 (worst shape)",
        key="q_p99_ms",
        op="<=",
        bound=200,
        unit=" ms",
        beside=("q_rare_p99_ms", "q_mid_p99_ms", "q_today_p99_ms", "index_s"),
    ),
    Target(
        figure="events list `q` search, 3M events stored, p99 (worst shape)",
        key="q_p99_ms_3m",
        op="<=",
        bound=200,
        unit=" ms",
        beside=("q_rare_p99_ms_3m", "q_mid_p99_ms_3m", "q_today_p99_ms_3m", "index_s_3m"),
    ),
    Target(
        figure="events list `q` p99 at 3M events over at 1M (sub-linear: under the events' ratio)",
        key="q_growth",
        op="<=",
        bound=2,
        beside=("events_ratio",),
    ),
)


_FILL = """
INSERT INTO events (id, endpoint_id, received_at, method, path, query, headers, body, body_is_utf8,
                    content_type, source_ip, provider, event_type, idempotency_key, signature_valid,
                    labels, search_text)
SELECT 'evt_' || lpad(to_hex(g), 26, '0'),
       ($1::text[])[1 + g % array_length($1::text[], 1)],
       CASE WHEN (g / 11) % 7 = 0  -- a seventh today, up to now, whatever the time of day
            THEN d.today + (now() - d.today) * (((g * 7919) % 100000) / 100000.0)
            ELSE d.today - make_interval(days => ((g / 11) % 7)::int, secs => ((g * 7919) % 86400)::int) END,
       CASE WHEN g % 7 = 3 THEN 'PUT' ELSE 'POST' END, '', '',
       '{"content-type": "application/json"}'::jsonb,
       convert_to(b.body, 'UTF8'), true, 'application/json', '203.0.113.7'::inet,
       (ARRAY['payments','commerce','identity','code_host'])[1 + g % 4],
       (ARRAY['invoice.paid','orders/create','user.created','push','charge.refunded'])[1 + g % 5],
       'idem_' || g, g % 7 <> 0, '[]'::jsonb,
       lower(b.body || E'\napplication/json\npost\n' || (ARRAY['invoice.paid','orders/create','user.created','push',
             'charge.refunded'])[1 + g % 5] || E'\n/stripe\n\napplication/json\nstripe/1.0 (+https://stripe.com/docs/webhooks)'
             || E'\nreq_' || md5(g::text) || E'\nt=1733100000,v1=' || md5((g + 1)::text))
  FROM generate_series($2::bigint, $3::bigint) g,
       (SELECT date_trunc('day', now() AT TIME ZONE 'utc') AT TIME ZONE 'utc' AS today) d,
       LATERAL (SELECT '{"type":"' || (ARRAY['invoice.paid','orders/create','user.created','push'])[1 + g % 4]
                       || '","customer":"cus_' || (g % 50000) || '","word":"'
                       || (ARRAY['alpha','bravo','charlie','delta','needle'])[1 + (g / 7) % 5]
                       || '","amount":' || (g % 9999) || '}' AS body) b
"""


# The first endpoint's events today that no index covers yet (past today's prefix index, if any).
_TAIL = """
SELECT count(*) FROM events e WHERE e.endpoint_id = $1
   AND e.received_at >= greatest(date_trunc('day', now() AT TIME ZONE 'utc') AT TIME ZONE 'utc',
       coalesce((SELECT max((to_date(substr(ic.relname, 8, 8), 'YYYYMMDD')::timestamp + right(ic.relname, 6)::time)
                            AT TIME ZONE 'utc')
                   FROM pg_class ic WHERE ic.relname ~ ('^events_' || to_char(now() AT TIME ZONE 'utc', 'YYYYMMDD')
                                                         || '_keys_to_[0-9]{6}$')), '-infinity'))
"""


async def fill_events(conn: asyncpg.Connection, endpoint_ids: list[str], total: int) -> None:
    """``total`` events of ``_FILL`` over ``endpoint_ids`` in the past week, 100,000 a statement, then their
    statistics (the erasure and retention benches fill with it too)."""
    await conn.execute("SELECT hy_ensure_event_partitions(8, 1)")
    for start in range(0, total, 100_000):
        await conn.execute(_FILL, endpoint_ids, start, min(total, start + 100_000) - 1)
    await conn.execute("ANALYZE events")


async def _fill(dsn: str, endpoint_ids: list[str], total: int) -> tuple[int, float]:
    conn = await asyncpg.connect(dsn)
    try:
        await fill_events(conn, endpoint_ids, total)
        started = time.perf_counter()
        await partitions.index_finished_days(conn)  # what the sweep does for every finished day
        index_today = getattr(partitions, "index_today", None)  # absent before 0012's design: a before run
        if index_today is not None:
            await index_today(conn)  # and for today up to its last whole hour
        index_s = time.perf_counter() - started
        await conn.execute("ANALYZE events")  # the statistics of the indexes' expressions
        return await conn.fetchval(_TAIL, endpoint_ids[0]), index_s
    finally:
        await conn.close()


def _measure(client: httpx.Client, url: str, params: dict[str, str], n: int) -> tuple[float, float]:
    timings = []
    for _ in range(n):
        started = time.perf_counter()
        response = client.get(url, params=params)
        timings.append((time.perf_counter() - started) * 1000)
        if response.status_code != 200:
            raise SystemExit(f"{params}: {response.status_code} {response.text[:200]}")
    timings.sort()
    return statistics.median(timings), timings[max(0, int(len(timings) * 0.99) - 1)]


def run(seconds: float) -> dict[str, object]:
    sizes = [int(n) for n in os.environ.get("BENCH_LIST_EVENTS", "1000000,3000000").split(",")]
    figures: dict[str, object] = {}
    for i, total in enumerate(sizes):
        suffix = "" if i == 0 else f"_{total // 1_000_000}m" if total % 1_000_000 == 0 else f"_{total}"
        measured = _one(seconds, total)
        figures.update({f"{k}{suffix}": v for k, v in measured.items()})
        print(f"bench list: {total:,} events: " + " ".join(f"{k}={v}" for k, v in measured.items()), flush=True)
    if len(sizes) > 1:
        last = suffix
        figures["events_ratio"] = round(sizes[-1] / sizes[0], 1)
        figures["q_growth"] = round(float(figures[f"q_p99_ms{last}"]) / float(figures["q_p99_ms"]), 2)
    return figures


def _one(seconds: float, total: int) -> dict[str, object]:
    with bench_env(rate_limit_per_s=100_000, rate_limit_burst=100_000) as bench:
        endpoints = [asyncio.run(create_endpoint(bench.settings)) for _ in range(10)]
        started = time.perf_counter()
        tail, index_s = asyncio.run(_fill(bench.settings.database_url, [e.id for e in endpoints], total))
        fill_s = time.perf_counter() - started - index_s
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        shapes = {
            "plain": {},
            "filtered": {"provider": "payments", "type": "invoice.paid", "method": "POST"},
            "since": {"since": time.strftime("%Y-%m-%d", time.gmtime(time.time() - 2 * 86400))},
            "signature": {"signature_valid": "false"},
            "q": {"q": "needle"},
            "q_rare": {"q": 'cus_4242"'},
            "q_mid": {"q": "cus_123"},  # about one event in 450: the walk finds a few, the index the rest
            # the newest events: today's partition alone, a term none of this endpoint's events holds
            "q_today": {"q": 'cus_4242"', "since": time.strftime("%Y-%m-%d", time.gmtime())},
        }
        n = max(20, int(seconds * 10))
        figures: dict[str, object] = {"events": total, "fill_s": round(fill_s, 1), "index_s": round(index_s, 1)}
        figures["today_unindexed"] = tail
        with run_process(granian("control.app:create_app", port), bench.env, f"{base}/healthz"):
            headers = {"Authorization": f"Bearer {endpoints[0].api_key}"}
            url = f"{base}/v1/endpoints/{endpoints[0].id}/events"
            with httpx.Client(headers=headers, timeout=30) as client:
                for name, params in shapes.items():
                    _measure(client, url, {**params, "limit": "20"}, 3)  # warm
                    p50, p99 = _measure(client, url, {**params, "limit": "20"}, n)
                    figures[f"{name}_p50_ms"] = round(p50, 1)
                    figures[f"{name}_p99_ms"] = round(p99, 1)
    filtered = [v for k, v in figures.items() if k.endswith("_p99_ms") and not k.startswith("q")]
    figures["filters_p99_ms"] = max(filtered)
    figures["q_common_p99_ms"] = figures["q_p99_ms"]  # the shape's own, before the key becomes the worst's
    figures["q_p99_ms"] = max(figures[f"{shape}_p99_ms"] for shape in ("q_common", "q_rare", "q_mid", "q_today"))
    return figures
