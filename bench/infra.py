"""What every bench needs: its own database and Redis prefix on real servers, and real processes.

Servers come from DATABASE_URL / REDIS_URL when set, else embedded ones under ``bench/out/embedded``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import httpx

from control.db.migrate import migrate
from shared.settings import Settings, load_settings

__all__ = ("Bench", "bench_env", "free_port", "run_process", "wait_http")

OUT = Path(__file__).parent / "out"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url: str, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(url, timeout=1).status_code == 200:
                return
        time.sleep(0.05)
    raise TimeoutError(f"{url} did not become healthy in {timeout_s}s")


@contextlib.contextmanager
def run_process(args: list[str], env: dict[str, str], health_url: str | None = None) -> Iterator[subprocess.Popen]:
    log = open(OUT / f"{Path(args[0]).name}-{uuid.uuid4().hex[:6]}.log", "wb")  # noqa: SIM115
    proc = subprocess.Popen(args, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        if health_url:
            wait_http(health_url)
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
def bench_env(**overrides: object) -> Iterator[Bench]:
    """A fresh migrated database and Redis prefix for one bench run; dropped afterwards. May be nested (two
    databases side by side)."""
    OUT.mkdir(exist_ok=True)
    with _servers() as (database_url, redis_url), _database(database_url, redis_url, overrides) as bench:
        yield bench


@contextlib.contextmanager
def _database(database_url: str, redis_url: str, overrides: dict[str, object]) -> Iterator[Bench]:
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
        asyncio.run(migrate(db_dsn))
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
    exe = shutil.which("granian") or str(Path(sys.executable).parent / "granian")
    args = [exe, "--interface", "asgi", "--host", "127.0.0.1", "--port", str(port), "--workers", str(workers)]
    args += ["--loop", "uvloop", "--http", "1", "--no-ws", "--log-level", "warning"]
    if factory:
        args.append("--factory")
    return [*args, target]
