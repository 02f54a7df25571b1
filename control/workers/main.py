"""The worker process of ``hookyard worker [NAME ...]``: its context (pool, Redis, tracing), its loops built by
name, and the run that drains them on SIGTERM."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable

from redis.asyncio.cluster import RedisCluster

from control.db import create_pool
from control.db.context import Context
from control.db.keyring import warn_if_clear
from control.db.reach import check_database, where
from control.routing.route import Router
from control.schemas.learn import Learner
from control.support.metrics import serve_worker_metrics
from control.support.sealing import keyring_of
from control.transform.pool import close_pool
from control.workers import LOOP_NAMES
from control.workers.alerts.loop import Alerts
from control.workers.deliver import Deliver
from control.workers.erasures.loop import Erasures
from control.workers.flush import Flush
from control.workers.learn import Learn, lower_priority
from control.workers.loop import Loop, frozen_start, install_signal_handlers, run_loops
from control.workers.retries import RetryJobs
from control.workers.sweep.loop import Sweep
from shared import redis_client, tracing
from shared.errors import ConfigError
from shared.keys import Keys
from shared.otel_config import describe
from shared.settings import URLS_FROM_UP, Settings

__all__ = ("build_loops", "close_loops", "run", "started_line", "worker_context")

log = logging.getLogger("hookyard.worker")


def _flush_lanes(ctx: Context) -> list[Loop]:
    router = Router(ctx)  # one rule cache for all lanes of the process (each batch checks its versions)
    return [
        Flush(
            ctx,
            consumer=f"{Flush.default_consumer()}-{i}",
            claim_idle_ms=ctx.settings.flush_claim_idle_ms,
            router=router,
            learn=ctx.settings.schema_learning,  # notes the new events; the learn loop learns them
        )
        for i in range(ctx.settings.flush_lanes)
    ]


_FACTORIES: dict[str, Callable[[Context], list[Loop]]] = {
    "flush": _flush_lanes,
    "learn": lambda ctx: [Learn(ctx, learner=Learner())] if ctx.settings.schema_learning else [],
    "deliver": lambda ctx: [Deliver(ctx)],
    "sweep": lambda ctx: [Sweep(ctx)],
    "retries": lambda ctx: [RetryJobs(ctx)],
    "alerts": lambda ctx: [Alerts(ctx)],
    "erasures": lambda ctx: [Erasures(ctx)],
}
if tuple(_FACTORIES) != LOOP_NAMES:  # the light list up reads must name exactly the loops built here
    raise ImportError(f"control.workers.LOOP_NAMES {LOOP_NAMES} != the factories {tuple(_FACTORIES)}")


@contextlib.asynccontextmanager
async def worker_context(settings: Settings) -> AsyncIterator[Context]:
    if not settings.database_url or not settings.redis_url:
        raise ConfigError(f"DATABASE_URL and REDIS_URL must be set for the workers ({URLS_FROM_UP})")
    warn_if_clear(keyring_of(settings.encryption_keys))  # a malformed key stops the process now, not at a first sync
    await check_database(settings.database_url, who="worker")  # a database that does not exist ends the start
    pool = await create_pool(settings.database_url, max_size=settings.db_pool_max, reset_sessions=False)
    # Blocking stream reads outlive redis-py's default 5 s socket timeout; the loops bound their own waits.
    # Cluster-aware, and waited for: a worker started before Redis answers starts once it does.
    redis = await redis_client.open_client_when_up(settings.redis_url, blocking_reads=True)
    traces = tracing.setup("worker")  # None without an OTLP endpoint
    try:
        yield Context(
            settings=settings,
            pool=pool,
            redis=redis,
            keys=Keys(settings.redis_prefix, settings.stream_shards, cluster=redis_client.is_cluster_client(redis)),
            tracing=traces,
        )
    finally:
        await close_pool()  # the sandbox processes transforms ran in
        if traces is not None:
            await asyncio.to_thread(traces.shutdown)  # what is still queued goes out
        await redis.aclose()
        await pool.close()


def check_names(names: list[str] | tuple[str, ...]) -> None:
    """Refuses a loop name no factory has: asked before anything starts, so a mistyped command line is its one
    line (not after the start's warnings and connections)."""
    unknown = [n for n in names if n not in _FACTORIES]
    if unknown:
        raise ConfigError(f"unknown worker loop(s) {', '.join(unknown)}; choose from {', '.join(LOOP_NAMES)}")


def build_loops(ctx: Context, names: list[str] | tuple[str, ...]) -> list[Loop]:
    check_names(names)
    return [loop for n in (names or LOOP_NAMES) for loop in _FACTORIES[n](ctx)]


async def run(settings: Settings, names: list[str] | tuple[str, ...] = (), *, burst: bool = False) -> None:
    """Runs the named loops (all when none is named) until SIGTERM/SIGINT, then drains and returns."""
    stop = asyncio.Event()
    if tuple(names) == ("learn",):  # background work alone in its process: the flush and Postgres come first
        lower_priority()
    check_names(names)
    async with worker_context(settings) as ctx, serve_worker_metrics(ctx):
        loops = build_loops(ctx, names)
        log.info("%s", started_line(settings, names, loops, cluster=await cluster_masters(ctx.redis)))
        if not burst:
            install_signal_handlers(stop)
        try:
            with frozen_start():
                await run_loops(loops, stop, burst=burst)
        finally:
            began = time.monotonic()
            await close_loops(loops)
            if stop.is_set():
                log.info("%s", stopped_line(loops, time.monotonic() - began))


async def cluster_masters(redis: object) -> int | None:
    """The masters of a Redis Cluster (None for one Redis), for the start line."""
    if not isinstance(redis, RedisCluster):
        return None
    await redis.initialize()  # its slot map, once
    return len(redis.get_primaries())


def stopped_line(loops: list[Loop], took_s: float) -> str:
    """What a stop did, said once it is done: a SIGTERM'd worker logged nothing of it. The deliver loop says
    what it finished and what it handed back (``Deliver.drained``)."""
    said = [f"worker: stopped in {took_s:.1f} s"]
    for finished, cut, unsent, ahead in [d for loop in loops if (d := getattr(loop, "drained", None))]:
        said.append(
            f"deliver: {finished} in-flight sends finished, {cut} cut off ({unsent} of them before sending: "
            f"handed back uncounted), {ahead} claimed ahead handed back unsent"
        )
    return "; ".join(said)


def started_line(
    settings: Settings, names: list[str] | tuple[str, ...], loops: list[Loop], *, cluster: int | None = None
) -> str:
    """What a worker runs and reached, said once it has: a standalone ``hookyard worker`` printed nothing at
        start, and a trial's worker missing ``HOOKYARD_ENCRYPTION_KEYS`` (``up`` keeps them in its data dir) was
        told so only by its sweep failing over and over. The count is of the loops named (flush's lanes said apart:
        they were counted as loops, so a line naming 7 said 8). URLs by ``safe_url`` (no password, path or query); key
        ids only, never the keys. With tracing on, where the spans and metrics go (``shared.otel_config``): a trial
    found nothing saying tracing was on at all."""
    running = [n for n in (names or LOOP_NAMES) if n != "learn" or settings.schema_learning]
    kids = [entry.partition(":")[0].strip() for entry in settings.encryption_keys]
    secrets = "no HOOKYARD_ENCRYPTION_KEYS: a sealed secret cannot be opened (up keeps its keys in its data dir)"
    if kids:
        secrets = f"secrets sealed with key {kids[0]!r}, opened with {', '.join(map(repr, kids))}"
    lanes = sum(1 for loop in loops if isinstance(loop, Flush))
    count = f"{len(running)} loop(s)" + (f"; flush in {lanes} lanes" if lanes > 1 else "")
    return (
        f"worker: running {', '.join(running) or 'nothing'} ({count}); database "
        f"{where(settings.database_url or '')}, redis {where(settings.redis_url or '')}"
        + (f" (a Redis Cluster of {cluster} masters, {settings.stream_shards} ingest shards)" if cluster else "")
        + f"; {secrets}"
        # where spans go (and the backlog, read where metrics are served); never the OTLP headers (keys)
        + (f"; {traced}" if (traced := describe(metrics=bool(settings.worker_metrics_port))) else "")
    )


async def close_loops(loops: list[Loop]) -> None:
    """Lets loops with work of their own in flight (deliver's sends) drain it, before the pool closes."""
    for loop in loops:
        close = getattr(loop, "close", None)
        if close is not None:
            try:
                await close()
            except Exception:
                log.exception("%s: closing failed", loop.name)
