"""The control plane's and the workers' metrics, and the deployment-wide gauges read at scrape time.

Per-process counters and histograms (``shared.metrics``): rate-limit rejections and long-poll waiters in
control; flush batches, dead letters, deliveries and their latency in the workers. Deployment-wide state is
read fresh from Redis and Postgres by the scraped process (``live``), never summed over processes: stream
length, consumer lag and pending entries per shard, dead letters per shard, destinations per circuit state.
Control and every worker expose them; a dashboard reads them from one job (deploy/grafana/).

``hookyard worker`` serves ``/metrics`` on ``HOOKYARD_WORKER_METRICS_PORT`` with a few lines of asyncio, and
``/livez`` for a liveness probe: it answers nothing else, and an HTTP framework for two GETs was not worth a
dependency. ``hookyard control`` serves its ``/metrics`` the same way on ``HOOKYARD_CONTROL_METRICS_PORT``, never
on the API port: the backlog gauges name every account's destinations, and a tenant must not see another
account's ids (ADR 0095). Each granian worker of a control server listens there with ``SO_REUSEPORT``; any of
them answers with the server's summed counters.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from pathlib import Path

from prometheus_client.core import GaugeMetricFamily
from redis.exceptions import RedisError

from control.db import circuit as db_circuit
from control.db.context import Context
from control.support.backlog_metrics import Backlog, sampling
from shared.errors import ConfigError
from shared.metrics import CONTENT_TYPE, SIZE_BUCKETS, Metrics, metrics_dir

__all__ = ("CONTROL", "LIVE_GAUGES", "WORKER", "live", "publishing", "serve_control_metrics", "serve_worker_metrics")

LIVE_GAUGES = (
    "hookyard_stream_length",
    "hookyard_stream_lag",
    "hookyard_stream_pending",
    "hookyard_dead_letters",
    "hookyard_circuits",
    "hookyard_wait_waiters",  # per control process, registered by the app (summed like its counters)
    "hookyard_wait_parked",  # the same waiters once their first look is done and nothing is left to look at
    "hookyard_delivery_backlog",  # read on a timer (control.support.backlog_metrics), shown by control and workers
    "hookyard_delivery_backlog_seconds",
    "hookyard_stream_lag_seconds",
)
"""Gauges whose values are read at scrape time, for the dashboard check (tests/test_dashboard.py)."""

log = logging.getLogger("hookyard.metrics")

CONTROL = Metrics("control")
RATE_LIMITED = CONTROL.counter(
    "hookyard_rate_limited_total", "Requests answered 429 by a rate limit, by limit", ("limit",)
)

WORKER = Metrics("worker")
FLUSH_BATCH = WORKER.histogram(
    "hookyard_flush_batch_events", "Events per flushed batch (stored plus dead-lettered)", bounds=SIZE_BUCKETS
)
FLUSH_SECONDS = WORKER.histogram("hookyard_flush_batch_seconds", "From reading a batch to acknowledging it")
DEAD_LETTERED = WORKER.counter("hookyard_dead_letters_total", "Ingest records moved to a dead-letter stream")
DELIVERIES = WORKER.counter(
    "hookyard_deliveries_total", "Delivery attempts by outcome (success, failure, error: no response)", ("outcome",)
)
DELIVERY_SECONDS = WORKER.histogram("hookyard_delivery_seconds", "Duration of one delivery attempt", ("outcome",))


async def live(ctx: Context, backlog: Backlog | None = None) -> list[GaugeMetricFamily]:
    """Deployment-wide gauges, read now; a source that fails is left out (and logged), not a failed scrape.
    ``backlog``: the process's latest backlog reading (``control.support.backlog_metrics``, read on a timer)."""
    families: list[GaugeMetricFamily] = [] if backlog is None else backlog.families()
    length = GaugeMetricFamily("hookyard_stream_length", "Entries in each ingest stream shard", labels=("shard",))
    lag = GaugeMetricFamily(
        "hookyard_stream_lag", "Entries of each shard not yet read by the flush group", labels=("shard",)
    )
    pending = GaugeMetricFamily(
        "hookyard_stream_pending", "Entries of each shard read but not yet acknowledged", labels=("shard",)
    )
    dead = GaugeMetricFamily("hookyard_dead_letters", "Records in each shard's dead-letter stream", labels=("shard",))
    try:
        for shard in range(ctx.keys.shards):
            stream = ctx.keys.ingest_stream(shard)
            async with ctx.redis.pipeline(transaction=False) as pipe:
                pipe.xlen(stream)
                pipe.xlen(ctx.keys.dead_letter_stream(shard))
                xlen, dead_len = await pipe.execute()
            groups = []
            with contextlib.suppress(RedisError):  # no group yet: nothing read, nothing pending
                groups = await ctx.redis.xinfo_groups(stream)
            group = next((g for g in groups if _text(g.get("name")) == "flush"), None)
            waiting = group.get("pending", 0) if group else 0
            behind = group.get("lag") if group else None
            label = (str(shard),)
            length.add_metric(label, xlen)
            pending.add_metric(label, waiting)
            # Redis < 7 has no "lag": acknowledged entries are deleted, so what is left and not pending is unread.
            lag.add_metric(label, behind if behind is not None else max(xlen - waiting, 0))
            dead.add_metric(label, dead_len)
        families += [length, lag, pending, dead]
    except (RedisError, OSError) as exc:
        log.warning("metrics: stream gauges unavailable (%s)", exc)
    try:
        async with ctx.pool.acquire(timeout=2) as conn:
            states = await db_circuit.count_by_state(conn)
        circuits = GaugeMetricFamily("hookyard_circuits", "Destinations by circuit state", labels=("state",))
        for state in ("closed", "open", "half_open"):
            circuits.add_metric((state,), states.get(state, 0))
        families.append(circuits)
    except Exception as exc:  # noqa: BLE001 - Postgres away: the scrape still carries the rest
        log.warning("metrics: circuit gauge unavailable (%s)", exc)
    return families


_NOT_FOUND = b'{"error":{"code":"not_found","message":"this port serves GET /metrics and /livez only"}}'


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


@contextlib.asynccontextmanager
async def publishing(metrics: Metrics, directory: str | None) -> AsyncIterator[None]:
    """With a metrics directory (several granian workers), writes this process's totals there every second,
    so a scrape of any sibling counts them."""
    if not directory:
        yield
        return
    metrics.directory = Path(metrics_dir(directory, metrics.role))

    async def loop() -> None:
        while True:
            await asyncio.sleep(1.0)
            await asyncio.to_thread(metrics.write)

    task = asyncio.create_task(loop(), name=f"{metrics.role}-metrics")
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


@contextlib.asynccontextmanager
async def serve_worker_metrics(ctx: Context) -> AsyncIterator[None]:
    """``GET /metrics`` on ``worker_metrics_port`` while the workers run (nothing when the port is 0)."""
    port = ctx.settings.worker_metrics_port
    if not port:
        yield
        return
    async with sampling(ctx, "worker") as backlog, _serving(ctx, WORKER, port, backlog):
        yield


@contextlib.asynccontextmanager
async def serve_control_metrics(ctx: Context, backlog: Backlog) -> AsyncIterator[None]:
    """``GET /metrics`` on ``control_metrics_port`` while a control plane runs (nothing when the port is 0)."""
    port = ctx.settings.control_metrics_port
    if not port:
        yield
        return
    async with _serving(ctx, CONTROL, port, backlog, shared=True):
        yield


@contextlib.asynccontextmanager
async def _serving(
    ctx: Context, metrics: Metrics, port: int, backlog: Backlog, *, shared: bool = False
) -> AsyncIterator[None]:
    """``shared``: the granian workers of one control server all listen (``SO_REUSEPORT``); a worker process
    has the port to itself, and a second one on it is refused by name."""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with asyncio.timeout(10):
                request = await reader.readuntil(b"\r\n\r\n")
            target = request.split(b" ", 2)[1] if request.count(b" ") >= 2 else b""
            path = target.split(b"?")[0] if request.startswith(b"GET ") else b""
            if path == b"/metrics":
                body, status, kind = metrics.render(await live(ctx, backlog)), b"200 OK", CONTENT_TYPE.encode()
            elif path == b"/livez":  # the loop answers: a liveness probe's path (deploy/k8s/worker.yaml)
                body, status, kind = b'{"ok":true}', b"200 OK", b"application/json"
            else:
                body, status, kind = _NOT_FOUND, b"404 Not Found", b"application/json"
            head = b"HTTP/1.1 " + status + b"\r\ncontent-type: " + kind + b"\r\ncontent-length: "
            writer.write(head + str(len(body)).encode() + b"\r\nconnection: close\r\n\r\n" + body)
            await writer.drain()
        except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            pass
        finally:
            writer.close()

    try:
        server = await asyncio.start_server(answer, ctx.settings.host, port, reuse_port=shared or None)
    except OSError as exc:
        # A second worker on one host with the same setting died with asyncio's bind error, not naming it.
        setting = f"HOOKYARD_{metrics.role.upper()}_METRICS_PORT"
        raise ConfigError(
            f"{setting}={port}: cannot listen on {ctx.settings.host}:{port} ({exc.strerror or exc}); each "
            f"{metrics.role} process on a host needs a port of its own, or 0 for none"
        ) from exc
    try:
        yield
    finally:
        server.close()
        await server.wait_closed()
