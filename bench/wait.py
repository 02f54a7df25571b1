"""Long-poll wake-up latency: 1,000 concurrent waiters on one control process, woken by real events.

All waiters wait on one endpoint; once they are parked, events go through the real pipeline (edge →
stream → flush worker → Postgres → PUBLISH) and the figure is the wake-up time,
measured from the moment the edge acknowledged the event to each waiter's response, so it includes the
flush; the wake-up figures start at the PUBLISH (as a subscriber sees it), the flush's share is reported
apart as ``ack_to_publish_ms``. The event is sent once the server reports every waiter parked (its
``hookyard_wait_parked`` gauge: subscribed, first look done, nothing left to look at), however long that takes
on the machine: ``park_s``. Registered is not parked (``hookyard_wait_waiters``): sent then, the event's look
queued behind the waiters' own 1,000 first looks, and the figure measured those. Target (``TARGETS``): wake-up
p99 ≤ 100 ms with 1,000 waiters.
"""

from __future__ import annotations

import asyncio
import time

import httpx

from bench.infra import bench_env, free_port, gauge, granian, run_process, script
from bench.results import Target
from bench.setup import create_endpoint
from shared import redis_client
from shared.keys import Keys

__all__ = ("run",)

_PARK_TIMEOUT_S = 60.0

TARGETS = (
    Target(
        figure="events/wait, 1,000 waiters on one process, wake-up p99",
        key="wake_p99_ms",
        op="<=",
        bound=100,
        unit=" ms",
        beside=("wake_p50_ms", "ack_to_publish_ms"),
    ),
    Target(
        figure="events/wait, until the server reported all 1,000 waiters parked (its gauge), s",
        key="park_s",
        unit=" s",
    ),
)


async def _wait_raw(port: int, path: str, key: str, parked: asyncio.Event | None) -> tuple[int, float]:
    """One long-poll over a plain socket: a pooled HTTP client (httpx) with a thousand concurrent
    connections spends seconds in its own pool bookkeeping and would measure itself, not the server."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {path} HTTP/1.1\r\nhost: bench\r\nauthorization: Bearer {key}\r\n\r\n".encode())
    await writer.drain()
    status_line = await reader.readline()
    done = time.perf_counter()
    writer.close()
    return int(status_line.split()[1]), done


async def _parked(base: str, waiters: int, tasks: list[asyncio.Task]) -> float:
    """Seconds until the server reports every waiter parked (its ``hookyard_wait_parked`` gauge: subscribed,
    its first look done, nothing left to look at): sent earlier, the event's look would wait behind the
    waiters' own first looks, and the wake-up figure would be theirs."""

    def parked() -> bool:
        ended = sum(t.done() for t in tasks)
        if ended:
            raise SystemExit(f"{ended} waiters ended before any event was sent (see the control log in bench/out)")
        return (gauge(f"{base}/metrics", "hookyard_wait_parked") or 0) >= waiters

    started = time.perf_counter()
    while not await asyncio.to_thread(parked):
        if time.perf_counter() - started > _PARK_TIMEOUT_S:
            raise SystemExit(f"{waiters} waiters not all parked after {_PARK_TIMEOUT_S:.0f} s")
        await asyncio.sleep(0.05)
    return time.perf_counter() - started


async def _round(
    port: int, metrics: str, edge: str, endpoint, waiters: int, settings
) -> tuple[float, list[float], float]:
    """(ack → publish ms, [publish → response ms per waiter], seconds until all were parked); ``metrics``:
    control's metrics port's URL (``HOOKYARD_CONTROL_METRICS_PORT``; the API port serves none, ADR 0095)."""
    path = f"/v1/endpoints/{endpoint.id}/events/wait?timeout=30"
    redis = redis_client.connect(settings.redis_url, blocking_reads=True)
    pubsub = redis.pubsub(ignore_subscribe_messages=True)
    await pubsub.subscribe(Keys(settings.redis_prefix).event_channel(endpoint.id))
    tasks = [asyncio.create_task(_wait_raw(port, path, endpoint.api_key, None)) for _ in range(waiters)]
    park_s = await _parked(metrics, waiters, tasks)
    async with httpx.AsyncClient() as client:
        sent = time.perf_counter()
        r = await client.post(f"{edge}/h/{endpoint.token}", content=b'{"type":"bench.wake"}')
    if r.status_code != 200:
        raise SystemExit(f"edge answered {r.status_code}")
    deadline = sent + 20  # bounded: a pipeline that never publishes must fail the bench, not hang it
    while await pubsub.get_message(timeout=1) is None:
        if time.perf_counter() > deadline:
            raise SystemExit("no PUBLISH within 20 s of the ack: is the flush worker storing events? (bench/out)")
    published = time.perf_counter()
    await pubsub.aclose()
    await redis.aclose()
    results = await asyncio.gather(*tasks)
    bad = [status for status, _ in results if status != 200]
    if bad:
        raise SystemExit(f"{len(bad)} waiters got {sorted(set(bad))}")
    return (published - sent) * 1000, [(done - published) * 1000 for _, done in results], park_s


def run(seconds: float) -> dict[str, object]:
    waiters = 1000
    with bench_env(rate_limit_per_s=100_000, rate_limit_burst=100_000) as bench:
        endpoint = asyncio.run(create_endpoint(bench.settings))
        port, edge_port, metrics_port = free_port(), free_port(), free_port()
        base, edge = f"http://127.0.0.1:{port}", f"http://127.0.0.1:{edge_port}"
        control_env = {**bench.env, "HOOKYARD_CONTROL_METRICS_PORT": str(metrics_port)}

        hookyard = script("hookyard")
        with (
            run_process(granian("control.app:create_app", port), control_env, f"{base}/healthz"),
            run_process(granian("edge.app:create_app", edge_port), bench.env, f"{edge}/healthz"),
            run_process([hookyard, "worker", "flush"], bench.env),
        ):
            rounds = max(1, int(seconds // 10))
            latencies: list[float] = []
            flush_ms: list[float] = []
            park_s: list[float] = []
            for _ in range(rounds):
                metrics = f"http://127.0.0.1:{metrics_port}"
                one = _round(port, metrics, edge, endpoint, waiters, bench.settings)
                to_publish, wakes, parked_s = asyncio.run(one)
                flush_ms.append(to_publish)
                park_s.append(parked_s)
                latencies += wakes
    latencies.sort()
    return {
        "waiters": waiters,
        "rounds": rounds,
        "park_s": round(max(park_s), 2),
        "ack_to_publish_ms": round(max(flush_ms), 1),
        "wake_p50_ms": round(latencies[len(latencies) // 2], 1),
        "wake_p99_ms": round(latencies[int(len(latencies) * 0.99) - 1], 1),
        "wake_max_ms": round(latencies[-1], 1),
    }
