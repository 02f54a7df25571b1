"""The control plane's Litestar app factory.

The lifespan owns the asyncpg pool and the Redis client for this process; handlers reach them through the
``ctx`` dependency. A stop signal ends every long poll and inbox stream at once (``Wakeups.stop``), so the
server stops as soon as it is asked to. Served by granian (``hookyard control``) or any ASGI server;
``create_app()`` reads the settings from the environment when none are given, so ``granian --factory
control.app:create_app`` works.

The settings live in ``app.state.settings`` and every lifespan starts from them alone: what a lifespan makes
(pool, Redis, Wakeups, the MCP session manager, caches in ``app.state``) is made anew each time. So one app
can serve one lifespan after another with other settings (``bind``; the tests reuse one app per process, ADR
0044), as long as what is fixed when the app is built (``shape``) is the same.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
from collections.abc import AsyncIterator

from litestar import Litestar, Response, get
from litestar.datastructures import State
from litestar.di import NamedDependency, Provide
from litestar.openapi.config import OpenAPIConfig
from litestar.openapi.plugins import JsonRenderPlugin, RedocRenderPlugin
from litestar.openapi.spec import Components, SecurityScheme
from litestar.plugins import PluginProtocol
from litestar.plugins.core import MsgspecDIPlugin
from litestar.types import ASGIApp

from control.api import v1_router
from control.api.allow import AllowMiddleware
from control.api.body import StrictJSONRequest
from control.api.content_encoding import ContentEncodingMiddleware
from control.api.deps import provide_ctx
from control.api.empty_segments import EmptySegmentMiddleware
from control.api.errors import EXCEPTION_HANDLERS, error_response
from control.api.openapi import StrictStructSchemaPlugin
from control.api.provisioning import provisioning_routes
from control.api.public import AddressLimits
from control.api.request_ids import RequestIdMiddleware, add_request_id
from control.api.wait_answers import WaitAnswers
from control.db import create_pool
from control.db.connection import ping
from control.db.context import Context
from control.mcp import McpMount
from control.mcp.llms import llms_txt
from control.records import Alive, Health, HealthDetails
from control.service.trigger import EdgeClient
from control.support import dead_letters
from control.support.backlog_metrics import sampling
from control.support.long_poll import Wakeups
from control.support.metrics import CONTROL, publishing, serve_control_metrics
from control.support.sealing import keyring_of
from control.transform.pool import close_pool
from shared import redis_client, tracing
from shared.errors import ConfigError
from shared.keys import Keys
from shared.parent import follow_server
from shared.settings import URLS_FROM_UP, Settings, load_settings
from shared.stopping import on_stop_signal

__all__ = ("bind", "create_app", "shape")

log = logging.getLogger("hookyard.control")


@get("/healthz", include_in_schema=False)
async def healthz(ctx: NamedDependency[Context]) -> Response[Health]:
    """200 once Postgres and Redis both answer; 503 (enveloped) while either does not. The details say what
    an operator should look at while it is up: dead letters (``hookyard dead-letters``) and the backlog."""
    try:
        async with ctx.pool.acquire(timeout=2) as conn:
            await ping(conn)
        dead, backlog = await dead_letters.counts(ctx.redis, ctx.keys)
    except Exception as exc:  # noqa: BLE001 - any failure means "not ready", reported, not raised
        return error_response(503, "unavailable", f"not ready: {type(exc).__name__}: {exc}")
    return Response(Health(details=HealthDetails(dead_letters=dead, ingest_backlog=backlog)))


@get("/livez", include_in_schema=False)
async def livez() -> Alive:
    """200 while this process serves requests, whatever Postgres and Redis do: the liveness probe's path. Probing
    ``/healthz`` for liveness restarted every control pod a minute into a database outage, which a restart
    cannot mend (deploy/k8s/control.yaml)."""
    return Alive()


def shape(settings: Settings) -> tuple[int]:
    """What of the settings is fixed when the app is built: the request body limit Litestar enforces."""
    return (max(1_048_576, 2 * settings.max_body_bytes),)


def _urls(settings: Settings) -> tuple[str, str]:
    """The database's and Redis's URLs, without which the control plane cannot run."""
    if not settings.database_url or not settings.redis_url:
        raise ConfigError(f"DATABASE_URL and REDIS_URL must be set for the control plane ({URLS_FROM_UP})")
    return settings.database_url, settings.redis_url


def _checked(settings: Settings) -> Settings:
    _urls(settings)
    keyring_of(settings.encryption_keys)  # a malformed key stops the process now, not at a first request
    return settings


def bind(app: Litestar, settings: Settings) -> None:
    """The settings the app's next lifespan runs with; the app must have been built for the same ``shape``."""
    if shape(settings) != (app.request_max_body_size,):
        raise ValueError(f"settings of shape {shape(settings)} on an app built for {(app.request_max_body_size,)}")
    app.state.settings = _checked(settings)


@contextlib.asynccontextmanager
async def _resources(app: Litestar) -> AsyncIterator[None]:
    settings: Settings = app.state.settings
    for name in [name for name in app.state if name != "settings"]:  # nothing of a previous lifespan is kept
        del app.state[name]
    database_url, redis_url = _urls(settings)
    pool = await create_pool(database_url, max_size=settings.db_pool_max)
    redis = await redis_client.open_client(redis_url)  # a cluster client on a Redis Cluster
    ctx = Context(
        settings=settings,
        pool=pool,
        redis=redis,
        keys=Keys(settings.redis_prefix, settings.stream_shards, cluster=redis_client.is_cluster_client(redis)),
        tracing=tracing.setup("control"),  # replays and retries are spans of their webhook's trace
    )
    app.state.ctx = ctx
    app.state.address_limits = AddressLimits.create(settings)  # /api/start, /api/register
    app.state.wakeups = wakeups = Wakeups(redis_url, ctx.keys)  # connects on the first events/wait
    app.state.edge_client = edge = EdgeClient()  # every test webhook's send (control.service.trigger)
    CONTROL.gauge(
        "hookyard_wait_waiters", "Long polls waiting (events/wait)", (), lambda: [((), wakeups.waiter_count())]
    )
    CONTROL.gauge(
        "hookyard_wait_parked",
        "Long polls parked: subscribed, first look done, nothing to look at (an event now wakes them)",
        (),
        lambda: [((), wakeups.parked_count())],
    )
    # What exists now lives as long as the app: out of the collector's sight, a full collection scans
    # only what requests made (with 1,000 long polls parked: 60-120 ms -> mostly 15-35 ms).
    gc.freeze()
    try:
        # On the stop signal, not at lifespan shutdown: granian runs that only once every request in
        # flight has ended, which a parked long poll or an open inbox stream would put off (shared.stopping).
        with on_stop_signal(wakeups.stop):
            # /metrics on an operator's port of its own, not the API's: its backlog gauges name every
            # account's destinations (ADR 0095).
            async with (
                publishing(CONTROL, settings.metrics_dir),
                sampling(ctx, "control") as backlog,
                serve_control_metrics(ctx, backlog),
            ):
                yield
    finally:
        gc.unfreeze()
        await close_pool()  # the sandbox processes transforms ran in
        if ctx.tracing is not None:
            await asyncio.to_thread(ctx.tracing.shutdown)
        await wakeups.aclose()
        await edge.aclose()
        await redis.aclose()
        await pool.close()


class _App(Litestar):
    """Litestar without the plugins it adds for pydantic and attrs models whenever those libraries are
    installed (the MCP SDK brings pydantic): no handler of ours takes or returns one (msgspec Structs only),
    and importing the pydantic plugin was a tenth of every control plane worker's start CPU (issue 44). The
    OpenAPI document is the same without them (checked when this was written, litestar 2.x)."""

    @staticmethod
    def _get_default_plugins(plugins: list[PluginProtocol]) -> list[PluginProtocol]:
        return [*plugins, MsgspecDIPlugin()]

    def _create_asgi_handler(self) -> ASGIApp:
        """Litestar's handler (its exception middleware and router) inside ``WaitAnswers``, which answers the
        long polls the route parked once Litestar is done with them (ADR 0068)."""
        return WaitAnswers(super()._create_asgi_handler())


def create_app(settings: Settings | None = None) -> Litestar:
    follow_server()  # granian's factory, run in each of its workers: a worker ends with granian's main process
    settings = _checked(settings or load_settings())
    mcp = McpMount()
    return _App(
        route_handlers=[healthz, livez, v1_router(), *provisioning_routes(), mcp.handler, llms_txt],
        dependencies={"ctx": Provide(provide_ctx, sync_to_thread=False)},
        lifespan=[_resources, mcp.lifespan],
        state=State({"settings": settings}),
        exception_handlers=EXCEPTION_HANDLERS,
        plugins=[StrictStructSchemaPlugin()],
        request_class=StrictJSONRequest,
        middleware=[RequestIdMiddleware(), EmptySegmentMiddleware(), AllowMiddleware(), ContentEncodingMiddleware()],
        before_send=[add_request_id],
        request_max_body_size=shape(settings)[0],
        openapi_config=OpenAPIConfig(
            title="hookyard",
            version="1.0.0",
            description="Webhook capture, routing and replay. Every non-2xx body is `{error: {code, message}}`.",
            path="/schema",
            use_handler_docstrings=True,
            # Redoc from the package (control/static), not a CDN: the page works offline, pinned.
            render_plugins=[
                RedocRenderPlugin(
                    js_url="/static/redoc.standalone.js",
                    google_fonts=False,
                    favicon="<link rel='icon' href='/favicon.ico'>",
                    path="/redoc",
                ),
                JsonRenderPlugin(),
            ],
            components=Components(
                security_schemes={
                    "bearer": SecurityScheme(type="http", scheme="bearer"),
                    # The browser session of /api/start, which also opens the inbox page.
                    "session": SecurityScheme(type="apiKey", name="hy_session", security_scheme_in="cookie"),
                    # The cookie a signed inbox link (POST /v1/endpoints/{id}/inbox-link) is traded for.
                    "inboxLink": SecurityScheme(type="apiKey", name="hy_inbox", security_scheme_in="cookie"),
                }
            ),
        ),
        logging_config=None,
        debug=False,
    )
