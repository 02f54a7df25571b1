"""Small helpers shared by the test modules (fixtures live in conftest.py or in each module)."""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import asyncpg
import httpx
import msgspec
import pytest
import redis.asyncio as aioredis

from control.db import connect
from control.service.accounts import hash_key
from shared.keys import CONFIGS_COMPLETE, Keys
from shared.settings import Settings, load_settings
from tests.apps import control_app
from tests.conftest import TEST_ENCRYPTION_KEY, database_name, forget_prefix, with_database

ISO_Z = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?Z$")
BASE62 = re.compile(r"^[0-9A-Za-z]+$")
ULID = r"[0-9A-HJKMNP-TV-Z]{26}"

ENDPOINT_FIELDS = {
    "id",
    "name",
    "environment",
    "external_ref",
    "ingest_url",
    "temporary",
    "expires_at",
    "created_at",
    "updated_at",
    "expect_event_within_s",  # alerts: endpoint.silent
    "signature_failure_alert_threshold",  # alerts: endpoint.signature_failures
    "body_retention_days",  # retention: bodies expire before events
    "response",  # the endpoint's own answer to a stored request
}


def parse_ts(value: str) -> datetime:
    assert ISO_Z.match(value), f"not an ISO 8601 UTC timestamp with Z: {value!r}"
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def assert_error(resp: httpx.Response, status: int, code: str, *, field: str | None = None) -> dict[str, Any]:
    """The response is the error envelope with this status and code (and, if given, names ``field`` first)."""
    assert resp.status_code == status, f"expected {status}, got {resp.status_code}: {resp.text}"
    assert resp.headers["content-type"].startswith("application/json")
    body = resp.json()
    assert set(body) == {"error"}, body
    assert set(body["error"]) == {"code", "message"}, body
    assert body["error"]["code"] == code, body
    assert isinstance(body["error"]["message"], str)
    assert body["error"]["message"], body
    if field is not None:
        assert body["error"]["message"].startswith(f"{field}:"), body
    return body["error"]


@contextlib.asynccontextmanager
async def concurrent_client(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    """The control app in this event loop behind httpx's ASGI transport.

    Litestar's test client runs the app through a blocking portal, one request at a time; this one lets
    ``asyncio.gather`` put requests truly in flight together (races, quotas, locks).
    """
    with control_app(settings) as app:
        async with app.lifespan():
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://control.test") as c:
                yield c


@contextlib.contextmanager
def module_database(servers: Any, template_database: str) -> Iterator[str]:
    """One database (a copy of the migrated template) for a whole module.

    Creating a database costs about a tenth of a second, so modules whose tests isolate themselves by account
    (every test gets fresh ``account`` / ``other_account`` fixtures and only counts its own rows) share one:
    a database per test or per module isolates alike. Override ``database_url`` with it, module-scoped.
    """
    name = f"hy_tm_{uuid.uuid4().hex[:16]}"
    asyncio.run(_admin(servers.database_url, f"CREATE DATABASE {name} {servers.copy_of(template_database)}"))
    try:
        yield with_database(servers.database_url, name)
    finally:
        asyncio.run(_admin(servers.database_url, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))


async def _admin(dsn: str, sql: str) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


def token_of(ingest_url: str) -> str:
    return ingest_url.rsplit("/h/", 1)[1]


async def create_endpoint(client: Any, headers: dict[str, str], **body: Any) -> dict[str, Any]:
    body.setdefault("name", "orders")
    resp = await client.post("/v1/endpoints", json=body, headers=headers)
    assert resp.status_code == 201, resp.text
    return resp.json()


async def endpoint_with_destination(
    client: Any, headers: dict[str, str], url: str, **body: Any
) -> tuple[str, dict[str, Any]]:
    """A new endpoint and a destination of it at ``url`` (created: 201): (endpoint id, the destination)."""
    endpoint = (await create_endpoint(client, headers))["id"]
    resp = await client.post(f"/v1/endpoints/{endpoint}/destinations", json={"url": url, **body}, headers=headers)
    assert resp.status_code == 201, resp.text
    return endpoint, resp.json()


@contextlib.asynccontextmanager
async def db(database_url: str | None) -> AsyncIterator[asyncpg.Connection]:
    """A connection to the test's database with hookyard's jsonb codec. Takes ``Settings.database_url`` as
    typed (optional: a setting `up` may fill in); every test's settings name a database, so None is a fault."""
    assert database_url is not None, "the test's settings name no database"
    conn = await connect(database_url)
    try:
        yield conn
    finally:
        await conn.close()


@contextlib.asynccontextmanager
async def redis_client(url: str) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.Redis.from_url(url)
    try:
        yield client
    finally:
        await client.aclose()


async def key_id_of(database_url: str, key: str) -> str:
    async with db(database_url) as conn:
        return await conn.fetchval("SELECT id FROM api_keys WHERE key_hash = $1", hash_key(key))


async def wait_for(check: Callable[[], Awaitable[Any]], *, timeout: float = 5.0, interval: float = 0.01) -> Any:
    """Polls ``check`` until it returns something truthy; fails after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        result = await check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        await asyncio.sleep(interval)


async def blocked_by(observer: asyncpg.Connection, holder: asyncpg.Connection, *, timeout: float = 10.0) -> None:
    """Returns once another backend waits for a lock ``holder``'s open transaction holds (Postgres's own
    ``pg_blocking_pids``): the proof that a statement started elsewhere is waiting for this transaction, where a
    fixed sleep followed by "not done yet" only hopes so. ``observer`` must be a third connection outside any
    transaction (a backend reads ``pg_stat_activity`` once per transaction)."""
    pid = holder.get_server_pid()
    query = "SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))"

    async def waiting() -> bool:
        return await observer.fetchval(query, pid) > 0

    await wait_for(waiting, timeout=timeout)


async def configs_whole(settings: Settings, *, timeout: float = 30.0) -> None:
    """Waits for a worker's sweep to have written every edge config (``Keys.config_marker`` complete): only
    from then on does an edge call a token it does not find unknown (404) rather than possibly lost (503)."""
    keys = Keys(settings.redis_prefix)
    async with redis_client(settings.redis_url) as redis:

        async def whole() -> bool:
            return await redis.get(keys.config_marker) == CONFIGS_COMPLETE

        await wait_for(whole, timeout=timeout, interval=0.05)


async def next_messages(pubsub: Any, count: int, *, timeout: float = 5.0) -> list[str]:
    """The data of the next ``count`` pub/sub messages, waiting at most ``timeout`` seconds in all."""
    deadline = time.monotonic() + timeout
    out: list[str] = []
    while len(out) < count:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise AssertionError(f"got {len(out)} of {count} messages within {timeout}s: {out}")
        msg = await pubsub.get_message(ignore_subscribe_messages=True, timeout=min(remaining, 0.5))
        if msg is not None and msg["type"] == "message":
            data = msg["data"]
            out.append(data.decode() if isinstance(data, bytes) else data)
    return out


def utcnow() -> datetime:
    return datetime.now(UTC)


@pytest.fixture(scope="module", name="database_url")
def module_database_url(servers: Any, template_database: str) -> Iterator[str]:
    """Import into a test module to give the whole module one database: for modules whose tests isolate
    themselves by their own fresh accounts (see ``module_database``)."""
    with module_database(servers, template_database) as url:
        yield url


@pytest.fixture(name="redis")
async def redis_connection(servers: Any) -> AsyncIterator[aioredis.Redis]:
    """Import into a test module for a plain Redis client on the test servers."""
    async with redis_client(servers.redis_url) as client:
        yield client


@contextlib.asynccontextmanager
async def subscribed(redis: aioredis.Redis, channel: str) -> AsyncIterator[Any]:
    """Subscribed to ``channel``, confirmed, before the test acts: nothing can be missed."""
    pubsub = redis.pubsub()
    await pubsub.subscribe(channel)
    confirm = await pubsub.get_message(timeout=5)
    assert confirm is not None
    assert confirm["type"] == "subscribe"
    try:
        yield pubsub
    finally:
        await pubsub.unsubscribe()
        await pubsub.aclose()


async def config_version(database_url: str, endpoint_id: str) -> int | None:
    """The endpoint's ``config_version``, which Postgres bumps on every change routing or the edge reads."""
    async with db(database_url) as conn:
        return await conn.fetchval("SELECT config_version FROM endpoints WHERE id = $1", endpoint_id)


@contextlib.asynccontextmanager
async def refusing_connections(servers: Any, database_url: str) -> AsyncIterator[None]:
    """The test's database refuses new connections and its backends are terminated until the block ends."""
    name = database_name(database_url)
    admin = await asyncpg.connect(with_database(servers.database_url, "postgres"))
    try:
        await admin.execute(f"ALTER DATABASE {name} ALLOW_CONNECTIONS false")
        await admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()",
            name,
        )
        yield
    finally:
        await admin.execute(f"ALTER DATABASE {name} ALLOW_CONNECTIONS true")
        await admin.close()


def unsealed(stored: str | None, column: str, row_id: str) -> str | None:
    """A secret as Postgres holds it (sealed under the tests' key, ``control.db.keyring``), opened."""
    from control.db.keyring import keyring_for
    from tests.conftest import TEST_ENCRYPTION_KEY

    return None if stored is None else keyring_for((TEST_ENCRYPTION_KEY,)).open(stored, column, row_id)


@pytest.fixture(scope="module", name="module_settings")
def module_settings_fixture(servers: Any, template_database: str) -> Iterator[Settings]:
    """Import into a test module (fixture ``module_settings``) for a stack started once for the module.

    Settings for a whole module: its own copy of the migrated template and its own Redis prefix (whose keys
    are deleted after), for a stack started once for the module."""
    prefix = f"hyt:{uuid.uuid4().hex[:12]}:"
    with module_database(servers, template_database) as database_url:
        yield load_settings(
            {},
            database_url=database_url,
            redis_url=servers.redis_url,
            redis_prefix=prefix,
            egress="any",
            encryption_keys=(TEST_ENCRYPTION_KEY,),
        )

    asyncio.run(forget_prefix(servers.redis_url, prefix))


FAST_DELIVERY: dict[str, Any] = {
    "retry_schedule_s": (0.05, 0.05),
    "deliver_poll_s": 0.2,
    "deliver_sweep_s": 0.2,
    "deliver_timeout_s": 2.0,
    "deliver_lease_s": 5.0,
}
"""Settings that make retries, polls and sweeps take fractions of a second."""


@pytest.fixture(name="settings")
def fast_delivery_settings(settings: Settings) -> Settings:
    """Import into a test module or a folder's conftest (fixture ``settings``): the test's settings with
    ``FAST_DELIVERY``."""
    return msgspec.structs.replace(settings, **FAST_DELIVERY)
