"""Backlog as metrics: per destination, the deliveries due and not yet sent and how long the oldest has
waited past its due time; per ingest stream shard, how old its oldest unflushed entry is.

Read on a timer (every ``BACKLOG_EVERY_S``), never per scrape or per request: one bounded, index-backed query
(``control.db.backlog``) and one ``XRANGE ... COUNT 1`` per shard. Every process that serves ``/metrics``
(control, and a worker with ``HOOKYARD_WORKER_METRICS_PORT``) keeps the latest reading and shows it there
(``hookyard_delivery_backlog``, ``hookyard_delivery_backlog_seconds``, ``hookyard_stream_lag_seconds``:
deployment-wide, aggregate with ``max``); when an OTLP endpoint is set, the same reading is exported as
OpenTelemetry gauges (``hookyard.delivery.backlog.due``, ``hookyard.delivery.backlog.age``,
``hookyard.stream.lag.age``). A destination without anything due is not listed (its series goes stale, as
Prometheus ends a series that is no longer exposed), and at most ``DESTINATIONS`` of the most overdue are.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Iterable
from typing import Any

from prometheus_client.core import GaugeMetricFamily
from redis.exceptions import RedisError

from control.db import backlog as db_backlog
from control.db.context import Context
from shared import tracing

__all__ = ("BACKLOG_EVERY_S", "DESTINATIONS", "SCAN_LIMIT", "Backlog", "sampling")

log = logging.getLogger("hookyard.metrics")

BACKLOG_EVERY_S = 5.0
"""How often the backlog is read; a scrape every 15 s (Prometheus' default) sees a reading at most 5 s old."""
SCAN_LIMIT = 100_000
"""Due tasks of each kind (unordered, FIFO) one reading looks at, at most: past it, counts read "at least"."""
DESTINATIONS = 1_000
"""Destinations listed per reading, the most overdue first: the label's cardinality stays bounded."""


class Backlog:
    """The latest reading, replaced whole by each read (readers never see half of one)."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.destinations: list[tuple[str, int, float]] = []
        """(destination id, due, oldest's wait past its due time in seconds)."""
        self.streams: list[tuple[int, float]] = []
        """(shard, age in seconds of its oldest entry not yet flushed; 0 when it is empty)."""
        self.read_at: float | None = None

    async def read(self) -> None:
        """One reading; a source that fails keeps its previous values (and is logged)."""
        try:
            async with self.ctx.pool.acquire(timeout=5) as conn:
                self.destinations = await db_backlog.due_by_destination(
                    conn, limit=SCAN_LIMIT, destinations=DESTINATIONS
                )
        except Exception as exc:  # noqa: BLE001 - Postgres away: the last reading stands
            log.warning("metrics: delivery backlog unavailable (%s)", exc)
        try:
            streams = []
            now_ms = time.time() * 1000
            for shard in range(self.ctx.keys.shards):
                oldest = await self.ctx.redis.xrange(self.ctx.keys.ingest_stream(shard), count=1)
                age = 0.0
                if oldest:
                    entry_id = oldest[0][0]
                    entry_ms = int((entry_id.decode() if isinstance(entry_id, bytes) else str(entry_id)).split("-")[0])
                    age = max(0.0, (now_ms - entry_ms) / 1000)
                streams.append((shard, round(age, 3)))
            self.streams = streams
        except (RedisError, OSError) as exc:
            log.warning("metrics: stream lag unavailable (%s)", exc)
        self.read_at = time.monotonic()

    def families(self) -> list[GaugeMetricFamily]:
        """The Prometheus gauges of the latest reading."""
        due = GaugeMetricFamily(
            "hookyard_delivery_backlog", "Deliveries due and not yet sent, per destination", labels=("destination_id",)
        )
        age = GaugeMetricFamily(
            "hookyard_delivery_backlog_seconds",
            "Seconds the oldest delivery due and not yet sent has waited past its due time, per destination",
            labels=("destination_id",),
        )
        for destination_id, count, oldest_s in self.destinations:
            due.add_metric((destination_id,), count)
            age.add_metric((destination_id,), round(oldest_s, 3))
        lag = GaugeMetricFamily(
            "hookyard_stream_lag_seconds",
            "Age in seconds of the oldest entry of each ingest stream shard not yet flushed (0: none waits)",
            labels=("shard",),
        )
        for shard, seconds in self.streams:
            lag.add_metric((str(shard),), seconds)
        return [due, age, lag]

    def observe(self, meter: Any) -> None:
        """The same reading as OpenTelemetry gauges of ``meter``, observed at each export."""
        from opentelemetry.metrics import Observation

        def due(_: object) -> Iterable[Observation]:
            return [Observation(n, {"hookyard.destination_id": d}) for d, n, _ in self.destinations]

        def age(_: object) -> Iterable[Observation]:
            return [Observation(round(s, 3), {"hookyard.destination_id": d}) for d, _, s in self.destinations]

        def lag(_: object) -> Iterable[Observation]:
            return [Observation(s, {"hookyard.shard": str(shard)}) for shard, s in self.streams]

        meter.create_observable_gauge(
            "hookyard.delivery.backlog.due", [due], unit="{delivery}", description="Deliveries due and not yet sent"
        )
        meter.create_observable_gauge(
            "hookyard.delivery.backlog.age",
            [age],
            unit="s",
            description="How long the oldest delivery due and not yet sent has waited past its due time",
        )
        meter.create_observable_gauge(
            "hookyard.stream.lag.age", [lag], unit="s", description="Age of the oldest ingest entry not yet flushed"
        )


@contextlib.asynccontextmanager
async def sampling(ctx: Context, role: str) -> AsyncIterator[Backlog]:
    """Reads the backlog every ``BACKLOG_EVERY_S`` while the block runs, and exports it over OTLP when an
    endpoint is set for metrics."""
    backlog = Backlog(ctx)
    provider = tracing.setup_metrics(role)
    if provider is not None:
        backlog.observe(provider.get_meter("hookyard"))

    stopping = asyncio.Event()

    async def loop() -> None:
        while not stopping.is_set():
            await backlog.read()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopping.wait(), BACKLOG_EVERY_S)

    task = asyncio.create_task(loop(), name="backlog-metrics")
    try:
        yield backlog
    finally:
        # A reading in progress finishes rather than being cancelled mid-query (a cancelled query's clean-up
        # raced the pool's close at a lifespan's end and could hang it); the wait between readings ends now.
        stopping.set()
        try:
            await asyncio.wait_for(asyncio.shield(task), 10)
        except TimeoutError:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if provider is not None:
            await asyncio.to_thread(tracing.stop_metrics, provider)  # within a second, collector down or not
