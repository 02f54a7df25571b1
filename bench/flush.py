"""Flush throughput: events/s from a pre-filled ingest stream into Postgres, one worker process.

The stream is filled the way the edge fills it (entries of ~50 records, realistic headers and a 400-byte
JSON body, spread over 20 endpoints), then one flush worker drains it; the figure is events per second of
wall time from the first read to the last commit. Target (DESIGN.md section 6): ≥ 20,000 events/s.
"""

from __future__ import annotations

import asyncio
import json
import time

from bench.infra import bench_env
from bench.setup import create_endpoint
from control.workers import worker_context
from control.workers.flush import Flush
from shared import ids
from shared.wire import IngestRecord, encode_records

__all__ = ("run",)

HEADERS = [
    (b"host", b"hooks.example.com"),
    (b"user-agent", b"Stripe/1.0 (+https://stripe.com/docs/webhooks)"),
    (b"content-type", b"application/json; charset=utf-8"),
    (b"stripe-signature", b"t=1795252711,v1=" + b"a" * 64),
    (b"accept", b"*/*; q=0.5, application/xml"),
    (b"content-length", b"400"),
]


def _body(i: int) -> bytes:
    doc = {
        "id": f"evt_{i:024d}",
        "object": "event",
        "type": "payment_intent.succeeded",
        "data": {"object": {"id": f"pi_{i:024d}", "amount": 2000 + i, "currency": "usd", "status": "succeeded"}},
        "livemode": False,
        "pending_webhooks": 1,
    }
    return json.dumps(doc).encode().ljust(400)


async def _fill(bench_settings, endpoint_ids: list[str], total: int) -> None:
    async with worker_context(bench_settings) as ctx:
        flush = Flush(ctx)
        await flush.ensure_groups()
        batch: list[IngestRecord] = []
        async with ctx.redis.pipeline(transaction=False) as pipe:
            for i in range(total):
                now = time.time()
                batch.append(
                    IngestRecord(
                        id=ids.new_id("evt"),
                        endpoint_id=endpoint_ids[i % len(endpoint_ids)],
                        received_at_us=int(now * 1_000_000),
                        method="POST",
                        path="",
                        query="",
                        headers=HEADERS,
                        body=_body(i),
                        source_ip="203.0.113.7",
                        provider="payments",
                        event_type="payment_intent.succeeded",
                        idempotency_key=f"evt_{i:024d}",
                        signature_valid=True,
                    )
                )
                if len(batch) == 50:
                    pipe.xadd(ctx.keys.ingest_stream(0), {"r": encode_records(batch)})
                    batch = []
                if i % 5000 == 4999:
                    await pipe.execute()
            if batch:
                pipe.xadd(ctx.keys.ingest_stream(0), {"r": encode_records(batch)})
            await pipe.execute()


async def _drain(bench_settings, lanes: int) -> tuple[int, float]:
    """Runs the worker's flush lanes (one process) until the stream is empty."""
    async with worker_context(bench_settings) as ctx:
        flushes = [Flush(ctx, consumer=f"bench-{i}", block_ms=50) for i in range(lanes)]

        async def lane(flush: Flush) -> int:
            total = 0
            while n := await flush.step():
                total += n
            return total

        start = time.perf_counter()
        counts = await asyncio.gather(*(lane(f) for f in flushes))
        return sum(counts), time.perf_counter() - start


def run(seconds: float) -> dict[str, object]:
    total = int(max(20_000, min(400_000, seconds * 20_000)))
    with bench_env() as bench:
        endpoint_ids = [asyncio.run(create_endpoint(bench.settings)).id for _ in range(20)]
        asyncio.run(_fill(bench.settings, endpoint_ids, total))
        flushed, elapsed = asyncio.run(_drain(bench.settings, bench.settings.flush_lanes))
    if flushed != total:
        raise SystemExit(f"flushed {flushed} of {total} events")
    return {
        "events": flushed,
        "seconds": round(elapsed, 2),
        "lanes": bench.settings.flush_lanes,
        "events_per_s": round(flushed / elapsed),
    }
