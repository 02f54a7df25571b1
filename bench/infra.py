"""What every bench needs: its own database and Redis prefix on real servers, and real processes.

Servers come from DATABASE_URL / REDIS_URL when set, else embedded ones under ``bench/out/embedded``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import httpx

from bench.ports import free_port
from control.db.migrate import migrate
from control.support.client_tls import verify_for
from shared.settings import Settings, load_settings

__all__ = (
    "Bench",
    "bench_env",
    "free_port",
    "gauge",
    "run_process",
    "script",
    "wait_http",
    "wait_listening",
    "wait_until",
)

OUT = Path(__file__).parent / "out"


def script(name: str) -> str:
    """A console script of the interpreter running the bench (the tree under test), else the first on PATH:
    a checkout beside another install measures its own code."""
    sibling = Path(sys.executable).parent / name
    return str(sibling) if sibling.exists() else (shutil.which(name) or name)


def wait_http(url: str, timeout_s: float = 20.0) -> None:
    """Polls ``url`` every 50 ms through one client (``httpx.get`` would make one, TLS context and all, each
    time: 20-50 ms of CPU against 0.3 ms for a refused connection), with TLS trust only for an https URL
    (``control.support.client_tls``)."""
    deadline = time.monotonic() + timeout_s
    with httpx.Client(timeout=1, trust_env=False, verify=verify_for(url)) as http:
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.HTTPError):
                if http.get(url).status_code == 200:
                    return
            time.sleep(0.05)
    raise TimeoutError(f"{url} did not become healthy in {timeout_s}s")


def wait_until(what: str, done: Callable[[], bool], timeout_s: float, *, every_s: float = 0.05) -> float:
    """Polls ``done`` until it is true; returns the seconds it took. A bench waits on what a server reports
    (a gauge, a listening connection), never a fixed sleep, which holds on one machine and fails on a slower
    one; past ``timeout_s`` it fails naming ``what`` it waited for."""
    started = time.monotonic()
    while not done():
        if time.monotonic() - started > timeout_s:
            raise SystemExit(f"gave up after {timeout_s:.0f} s waiting for {what}")
        time.sleep(every_s)
    return time.monotonic() - started


def gauge(metrics_url: str, name: str) -> float | None:
    """An unlabelled gauge's value in a server's Prometheus text (``/metrics``); None while it is absent."""
    with contextlib.suppress(httpx.HTTPError):
        found = re.search(rf"^{re.escape(name)} (\S+)$", httpx.get(metrics_url, timeout=5).text, re.MULTILINE)
        return float(found.group(1)) if found else None
    return None


def wait_listening(database_url: str, channel: str, *, since: float, timeout_s: float = 30.0) -> float:
    """Until a session of the database opened after ``since`` (epoch seconds: not one of a worker just
    stopped) LISTENs on ``channel`` (a deliver worker ready for the flush's NOTIFY, as Postgres reports it in
    pg_stat_activity); returns the seconds it took."""

    async def listening() -> bool:
        conn = await asyncpg.connect(database_url)
        try:
            return await conn.fetchval(
                "SELECT count(*) > 0 FROM pg_stat_activity WHERE datname = current_database()"
                " AND query ILIKE 'LISTEN %' AND position($1 in query) > 0 AND backend_start >= to_timestamp($2)",
                channel,
                since,
            )
        finally:
            await conn.close()

    return wait_until(f"a LISTEN on {channel}", lambda: asyncio.run(listening()), timeout_s, every_s=0.1)


@contextlib.contextmanager
def run_process(
    args: list[str],
    env: dict[str, str],
    health_url: str | None = None,
    *,
    health_timeout_s: float = 20.0,
    cwd: Path | None = None,
) -> Iterator[subprocess.Popen]:
    """``cwd``: where the process runs; another checkout's for its code. A ``python -m`` child finds its
    modules in its working directory before its virtualenv's editable install, so another checkout's
    ``hookyard up`` started from this tree ran this tree's worker and edge (ADR 0064)."""
    log = open(OUT / f"{Path(args[0]).name}-{uuid.uuid4().hex[:6]}.log", "wb")  # noqa: SIM115
    proc = subprocess.Popen(args, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, cwd=cwd)
    try:
        if health_url:
            wait_http(health_url, health_timeout_s)
        yield proc
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()


@dataclass
class Bench:
    settings: Settings
    env: dict[str, str]


_running: list[Any] = []
"""The embedded servers of the outermost open ``bench_env``, shared by any opened inside it."""


@contextlib.contextmanager
def _servers() -> Iterator[tuple[str, str]]:
    """(database URL, Redis URL): the environment's, else embedded servers (one set, however nested)."""
    database_url = os.environ.get("DATABASE_URL")
    redis_url = os.environ.get("REDIS_URL")
    if (database_url and redis_url) or _running:
        yield (database_url or _running[0].database_url, redis_url or _running[0].redis_url)
        return
    from control.cli.embedded import start_embedded

    embedded = start_embedded(OUT / "embedded", postgres=not database_url, redis=not redis_url)
    _running.append(embedded)
    try:
        yield (database_url or embedded.database_url, redis_url or embedded.redis_url)
    finally:
        _running.clear()
        embedded.stop()


@contextlib.contextmanager
def bench_env(*, python: str | None = None, **overrides: object) -> Iterator[Bench]:
    """A fresh migrated database and Redis prefix for one bench run; dropped afterwards. May be nested (two
    databases side by side). ``python``: the interpreter of another checkout whose migrations the database gets
    (a bench measuring that checkout's code beside this one's), instead of this tree's."""
    OUT.mkdir(exist_ok=True)
    with _servers() as (database_url, redis_url), _database(database_url, redis_url, overrides, python) as bench:
        yield bench


def _migrate_with(python: str, dsn: str) -> None:
    """Migrates ``dsn`` with another checkout's code: its own migrations, as its ``hookyard up`` expects."""
    code = "import asyncio, sys; from control.db.migrate import migrate; asyncio.run(migrate(sys.argv[1]))"
    subprocess.run([python, "-c", code, dsn], check=True, cwd=Path(python).parents[2])


@contextlib.contextmanager
def _database(
    database_url: str, redis_url: str, overrides: dict[str, object], python: str | None = None
) -> Iterator[Bench]:
    name = f"hy_bench_{uuid.uuid4().hex[:10]}"
    admin_dsn = urlunsplit(urlsplit(database_url)._replace(path="/postgres"))
    db_dsn = urlunsplit(urlsplit(database_url)._replace(path="/" + name))

    async def admin(sql: str) -> None:
        conn = await asyncpg.connect(admin_dsn)
        try:
            await conn.execute(sql)
        finally:
            await conn.close()

    asyncio.run(admin(f"CREATE DATABASE {name}"))
    prefix = f"hyb:{uuid.uuid4().hex[:8]}:"
    try:
        if python is None:
            asyncio.run(migrate(db_dsn))
        else:
            _migrate_with(python, db_dsn)
        settings = load_settings({}, database_url=db_dsn, redis_url=redis_url, redis_prefix=prefix, **overrides)
        env = {k: v for k, v in os.environ.items() if not k.startswith("HOOKYARD_")}
        env.update(DATABASE_URL=db_dsn, REDIS_URL=redis_url, HOOKYARD_REDIS_PREFIX=prefix)
        env.update({f"HOOKYARD_{k.upper()}": str(v) for k, v in overrides.items()})
        yield Bench(settings=settings, env=env)
    finally:
        import redis

        client = redis.Redis.from_url(redis_url)
        keys = list(client.scan_iter(match=prefix + "*", count=1000))
        if keys:
            client.delete(*keys)
        client.close()
        asyncio.run(admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))


def granian(target: str, port: int, *, factory: bool = True, workers: int = 1) -> list[str]:
    """granian's command line, under this interpreter (``python -m granian``, as ``hookyard edge`` runs it), so
    the app sees the packages of the bench's environment (a venv's too, not only the installed script's)."""
    args = [sys.executable, "-m", "granian", "--interface", "asgi", "--host", "127.0.0.1", "--port", str(port)]
    args += ["--workers", str(workers)]
    args += ["--loop", "uvloop", "--http", "1", "--no-ws", "--log-level", "warning"]
    if factory:
        args.append("--factory")
    return [*args, target]
