"""The edge: a raw ASGI app (no framework) that granian serves to providers at high volume.

``create_app()`` is the factory granian loads (``--factory edge.app:create_app``). The lifespan opens
a redis-py client per process (configuration, pub/sub, health) and one pipelining RESP connection
for the ingest stream writes (``edge.resp``); on a Redis Cluster, the cluster client and one such
connection per node, routed by that client's slot map (``edge.cluster``). Every non-2xx is the shared
error envelope, pre-encoded where it is fixed, an unexpected exception included (``500 internal_error``):
no request ever gets the server's plain-text 500.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import redis.asyncio as aioredis

from edge.cluster import ClusterRespConnection
from edge.config import EndpointCache
from edge.ingest import Ingest
from edge.metrics import EDGE
from edge.refusals import Refusals
from edge.resp import RespConnection
from edge.respond import send_error, send_internal_error, send_json
from edge.stream import StreamWriter
from edge.tracing import TracedIngest  # traced
from shared import (
    redis_client,
    tracing,  # traced
)
from shared.clientip import ClientIP
from shared.keys import Keys
from shared.logs import redact, safe_url
from shared.metrics import CONTENT_TYPE, metrics_dir
from shared.parent import follow_server
from shared.settings import URLS_FROM_UP, Settings, load_settings
from shared.tracing import Tracing  # traced
from shared.uri import uri_text

__all__ = ("EDGE_GC_THRESHOLD", "EdgeApp", "create_app")

_OK = b'{"ok":true}'

log = logging.getLogger("hookyard.edge")

EDGE_GC_THRESHOLD = 100_000
"""Allocations between collections of the youngest generation while the edge serves (Python's default: 700).

Tuning note: 100,000 because a request allocates a dozen short-lived containers (scope, messages, header
dict, tuples) and no cycles, so at 700 the collector ran every few dozen requests. Measured as CPU of
granian's Python thread per request in two alternated runs: 16.85 → 15.91 and 16.92 → 16.12 µs (5%). An
earlier attempt judged it by requests per second, where a 3% gain was inside the noise; this figure is not.
The older generations keep their thresholds; all are restored at shutdown."""


async def _ignore() -> None:
    """Scopes the edge does not serve (granian runs it with ``--no-ws``)."""


class EdgeApp:
    def __init__(self, settings: Settings) -> None:
        if not settings.redis_url:
            raise ValueError(f"REDIS_URL must be set for the edge ({URLS_FROM_UP})")
        self.settings = settings
        self.redis_url: str = settings.redis_url
        self.keys = Keys(settings.redis_prefix, settings.stream_shards)
        self.redis: aioredis.Redis | None = None
        self.stream_redis: RespConnection | ClusterRespConnection | None = None
        self.ingest: Callable[[dict[str, Any], Any, Any], Awaitable[None]] | None = None  # Ingest, maybe traced
        self.refusals = Refusals(self.keys)  # its key names do not depend on the cluster's tags
        self._listener: asyncio.Task[None] | None = None
        self._metrics_task: asyncio.Task[None] | None = None
        self.tracing: Tracing | None = None  # traced

    def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Awaitable[None]:
        """A plain method that hands back the handler's coroutine: no wrapper coroutine per request.

        Routes on the raw path (what the sender wrote; ingest stores it verbatim). Each handler answers
        its own unexpected exceptions with the ``500 internal_error`` envelope; the ``try`` here (free
        when nothing raises) does the same for anything that fails before a handler exists.
        """
        try:
            kind = scope["type"]
            if kind == "http":
                path = scope["raw_path"]
                if path.startswith(b"/h/"):
                    return self.ingest(scope, receive, send)  # type: ignore[misc]  # set by startup, before serving
                if path == b"/healthz":
                    return self._healthz(scope, send)
                if path == b"/livez":
                    return send_json(send, 200, _OK)
                if path == b"/metrics":
                    return self._metrics(scope, send)
                return self._not_found(scope, send)
            if kind == "lifespan":
                return self._lifespan(receive, send)
            return _ignore()
        except Exception as exc:  # noqa: BLE001 - never the server's bare 500
            return send_internal_error(scope, send, exc)

    async def _healthz(self, scope: dict[str, Any], send: Any) -> None:
        """503 while Redis does not answer: for monitors. Probes use ``/livez`` (no dependency checked): a Redis
        outage took every edge out of its Service, and senders got refused connections instead of ingest's
        503 with Retry-After (deploy/k8s/edge.yaml)."""
        try:
            try:
                await self.redis.ping()  # type: ignore[union-attr]  # set by startup, before serving
            except Exception as exc:  # noqa: BLE001 - any failure means "cannot serve"
                await send_error(send, 503, "unavailable", f"redis unavailable: {type(exc).__name__}")
                return
            await send_json(send, 200, _OK)
        except Exception as exc:  # noqa: BLE001 - never the server's bare 500
            await send_internal_error(scope, send, exc)

    async def _metrics(self, scope: dict[str, Any], send: Any) -> None:
        """Prometheus text, summed over this server's granian workers (``shared.metrics``)."""
        try:
            body = await asyncio.to_thread(EDGE.render)
            headers = [(b"content-type", CONTENT_TYPE.encode()), (b"content-length", str(len(body)).encode())]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": body})
        except Exception as exc:  # noqa: BLE001 - never the server's bare 500
            await send_internal_error(scope, send, exc)

    async def _publish_metrics(self) -> None:
        """This worker's totals into the shared directory once a second, for whichever worker is scraped."""
        while True:
            await asyncio.sleep(1.0)
            await asyncio.to_thread(EDGE.write)

    async def _not_found(self, scope: dict[str, Any], send: Any) -> None:
        try:
            path = uri_text(scope["raw_path"])
            await send_error(send, 404, "not_found", f"no route for {scope['method']} {path}")
        except Exception as exc:  # noqa: BLE001 - never the server's bare 500
            await send_internal_error(scope, send, exc)

    async def _lifespan(self, receive: Any, send: Any) -> None:
        thresholds = gc.get_threshold()
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                try:
                    await self.startup()
                except Exception as exc:  # noqa: BLE001 - reported to the server, which exits
                    said = f"edge: cannot start: REDIS_URL {safe_url(self.redis_url)}: {type(exc).__name__}: {exc}"
                    log.error("%s", redact(said))  # granian's own line named neither the setting nor the address
                    await send({"type": "lifespan.startup.failed", "message": repr(exc)})
                    return
                # What start-up made lives as long as the app: frozen, full collections stop scanning it
                # (the same as control). Requests allocate a dozen short-lived containers each and make no
                # cycles, so the youngest generation is collected every EDGE_GC_THRESHOLD allocations instead
                # of 700 (docs/adr/0010-freeze-the-startup-heap.md; the threshold's figures are on the
                # constant). Both are undone at shutdown: an app inside a test process leaves the interpreter
                # as it found it.
                gc.freeze()
                gc.set_threshold(EDGE_GC_THRESHOLD, *thresholds[1:])
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                gc.set_threshold(*thresholds)
                gc.unfreeze()
                await self.shutdown()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def startup(self) -> None:
        settings, url = self.settings, self.redis_url
        if await redis_client.is_cluster(url):
            cluster = redis_client.connect(url, cluster=True)
            self.redis = cluster
            self.keys = Keys(settings.redis_prefix, settings.stream_shards, cluster=True)  # shards spread
            await cluster.initialize()  # the slot map the writer routes by
            self.stream_redis = ClusterRespConnection(url, cluster)  # type: ignore[arg-type]  # a RedisCluster
        else:
            self.redis = redis_client.connect(url)
            self.stream_redis = RespConnection(url)
        cache = EndpointCache(self.redis, self.keys)
        writer = StreamWriter(self.stream_redis, self.keys, high_water=settings.stream_high_water)
        self.ingest = Ingest(settings, self.keys, cache, writer, ClientIP(settings.trusted_proxies), self.refusals)
        self.tracing = tracing.setup("edge")  # traced
        if self.tracing is not None:  # traced
            self.ingest = TracedIngest(self.ingest, self.tracing)
        self._listener = asyncio.create_task(cache.listen(), name="edge-config-listener")
        self.refusals.start(self.redis)
        if settings.metrics_dir:
            EDGE.directory = Path(metrics_dir(settings.metrics_dir, "edge"))
            self._metrics_task = asyncio.create_task(self._publish_metrics(), name="edge-metrics")
        # Serve only once invalidations flow, so no change made from now on can be missed.
        async with asyncio.timeout(10):
            await cache.listening.wait()

    async def shutdown(self) -> None:
        if self.tracing is not None:  # traced
            await asyncio.to_thread(self.tracing.shutdown)
        if self.redis is not None:
            await self.refusals.close(self.redis)
        if self._metrics_task is not None:
            self._metrics_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._metrics_task
        if self._listener is not None:
            self._listener.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._listener
        if self.stream_redis is not None:
            await self.stream_redis.aclose()
        if self.redis is not None:
            await self.redis.aclose()


def create_app(settings: Settings | None = None) -> EdgeApp:
    """granian's factory, run in each of its workers: a worker ends with granian's main process."""
    follow_server()
    return EdgeApp(settings or load_settings())
