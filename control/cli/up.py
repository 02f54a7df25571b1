"""``hookyard up``: the whole service in one foreground command, for a laptop or a demo.

Order matters in both directions. Up: embedded servers (when no URLs are given), migrations, the local
account, then edge, control, worker and learner (the learn loop, ``control.workers.learn``) as child
processes, then both ``/healthz``. Down (Ctrl-C, SIGTERM,
or any child dying): the children first, each given time to drain, and the databases last, so no process
ever loses its database while it is still finishing work.

Where it serves is recorded in the data dir (``control.cli.instance``) from the moment its children start
until it exits, so the client commands in another terminal find this instance, on whatever ports.

Each child runs in a process group of its own: a Ctrl-C typed in the terminal reaches only this process,
which then stops the children in order, and the group lets it reap what a child leaves behind (granian's
worker processes). Children also ask the kernel for SIGTERM should this process die without cleaning up
(``shared.parent``), so even ``kill -9`` of the supervisor leaves no servers holding the ports.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shlex
import signal
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import asyncpg
import httpx
import redis
import redis.asyncio as aioredis

from control.cli.embedded import EmbeddedServers, start_embedded
from control.cli.instance import instance_of_this_process, read_instance, remove_instance, write_instance
from control.cli.local_key import LocalKey, ensure_local_key
from control.cli.ports import check_port, control_metrics_where
from control.db import connect
from control.db.keyring import data_dir_keys
from control.db.migrate import migrate, pending
from control.support.client_tls import verify_for
from control.support.sealing import keyring_of, reseal
from control.workers import LOOP_NAMES
from shared.errors import ConfigError, StartupError
from shared.otel_config import describe
from shared.settings import CONTROL_URL_VARIABLE, Settings

__all__ = ("up",)

log = logging.getLogger("hookyard.up")

STARTUP_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 10.0


@dataclass
class Child:
    name: str
    proc: asyncio.subprocess.Process

    async def terminate(self) -> None:
        """SIGTERM to the leader (granian and the worker drain on it), SIGKILL to the group on timeout; then
        SIGKILL to whatever is left in the group, which is nothing unless the leader lost track of a worker."""
        started = time.monotonic()
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, signal.SIGTERM)
            try:
                await asyncio.wait_for(self.proc.wait(), STOP_TIMEOUT_S)
            except TimeoutError:
                log.warning("%s did not stop within %.0fs; killing it", self.name, STOP_TIMEOUT_S)
                _killpg(self.proc.pid)
                await self.proc.wait()
        _killpg(self.proc.pid)
        log.debug("%s stopped in %.2fs", self.name, time.monotonic() - started)


def _either(configured: str | None, started: str | None) -> str:
    """The configured URL, else the embedded server's (``start_embedded`` starts one for each URL not set)."""
    url = configured or started
    if not url:
        raise RuntimeError("the embedded server gave no URL")
    return url


def _killpg(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


_UPGRADE_NOTES = {
    "0036_search_grams": "q search: the sweep now builds a trigram index (no extension needed) for each finished "
    "day of events that lacks one, once, in the background, within a minute of starting; until a day has it, q "
    "reads that day's events one by one, with the same answers (docs/adr/0057-q-trigrams-without-an-extension.md)",
    "0039_search_keys": "q search: the sweep now rebuilds each finished day's trigram index keyed by endpoint (a "
    "page then reads its own endpoint's part of the index alone), once, in the background, dropping the day's "
    "previous index when the new one is ready; until then q reads that day's events of the endpoint one by one, "
    "with the same answers (docs/adr/0057-q-trigrams-without-an-extension.md)",
}


_BEFORE_NOTES = {
    "0040_id_collation": 'upgrading the database: its id columns now compare as bytes (COLLATE "C"), so their '
    "indexes are rebuilt once, now, before hookyard starts; on a data directory holding millions of events and "
    "deliveries this takes minutes, with the tables locked (docs/adr/0072-ids-compare-as-bytes.md)",
}


def before_notes(pending: list[str]) -> list[str]:
    """What an upgrade's migrations will take long to do, said by ``hookyard up`` before it applies them (a
    first run, where the tables are empty, has nothing to say)."""
    if "0001_init" in pending:
        return []
    return [note for version, note in _BEFORE_NOTES.items() if version in pending]


def upgrade_notes(applied: list[str]) -> list[str]:
    """What an upgrade's migrations start that a user would otherwise notice only as load: said plainly by
    ``hookyard up`` when it upgrades an existing data directory (not on a first run, where nothing is there)."""
    if "0001_init" in applied:
        return []
    return [note for version, note in _UPGRADE_NOTES.items() if version in applied]


def check_ports(settings: Settings) -> None:
    """A port already taken is the most common reason ``up`` fails; say which, before starting anything."""
    if settings.edge_port == settings.control_port:
        raise ConfigError(f"HOOKYARD_CONTROL_PORT: the edge and control ports are both {settings.edge_port}")
    check_port(settings.host, settings.edge_port, "HOOKYARD_EDGE_PORT", "--edge-port")
    check_port(settings.host, settings.control_port, "HOOKYARD_CONTROL_PORT", "--control-port")
    for port, variable in (
        (settings.control_metrics_port, "HOOKYARD_CONTROL_METRICS_PORT"),
        (settings.worker_metrics_port, "HOOKYARD_WORKER_METRICS_PORT"),
    ):
        if port in (settings.edge_port, settings.control_port):
            raise ConfigError(f"{variable}: port {port} is also the edge's or control's port; give /metrics its own")
        if port:  # a child would find it taken only after Postgres, Redis and the migrations had started
            check_port(settings.host, port, variable, "the setting")


def _local_url(host: str, port: int) -> str:
    """Where this machine reaches a server bound to ``host`` (a wildcard address is not a destination)."""
    host = {"0.0.0.0": "127.0.0.1", "": "127.0.0.1", "::": "::1"}.get(host, host)
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def up(settings: Settings, environ: Mapping[str, str]) -> int:
    """Runs until SIGINT/SIGTERM (exit 0) or until a child dies (exit 1); raises StartupError when the
    service never came up. Everything started is stopped before it returns or raises."""
    data_dir = Path(settings.data_dir).resolve()
    running = read_instance(data_dir)
    if running is not None:
        raise ConfigError(
            f"HOOKYARD_DATA_DIR: {running.describe(data_dir)} already serves {running.control_url}; "
            "stop it, or choose another data dir (--data-dir)"
        )
    check_ports(settings)
    data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    return asyncio.run(_up(settings, environ, data_dir))


async def _up(settings: Settings, environ: Mapping[str, str], data_dir: Path) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    embedded: EmbeddedServers | None = None
    children: list[Child] = []
    try:
        if not settings.database_url or not settings.redis_url:
            embedded = await asyncio.to_thread(
                start_embedded, data_dir, postgres=not settings.database_url, redis=not settings.redis_url
            )
        database_url = _either(settings.database_url, embedded.database_url if embedded else None)
        redis_url = _either(settings.redis_url, embedded.redis_url if embedded else None)
        if stop.is_set():
            return 0
        try:
            for note in before_notes(await pending(database_url)):
                log.info("%s", note)
            applied = await migrate(database_url)
            # Secrets at rest: HOOKYARD_ENCRYPTION_KEYS, else a key made on the first run and kept here.
            encryption_keys = settings.encryption_keys or data_dir_keys(data_dir, create=True)
            conn = await connect(database_url)
            try:
                await reseal(conn, keyring_of(encryption_keys))
            finally:
                await conn.close()
            key = await ensure_local_key(database_url, data_dir / "api_key")
        except (OSError, asyncpg.PostgresError) as exc:
            raise StartupError(f"cannot prepare the database: {type(exc).__name__}: {exc}") from exc
        log.info("migrations applied: %s", ", ".join(applied) or "none (schema up to date)")
        for note in upgrade_notes(applied):
            log.info("%s", note)
        await _check_redis(redis_url)
        env = {
            **environ,
            "DATABASE_URL": database_url,
            "REDIS_URL": redis_url,
            "HOOKYARD_HOST": settings.host,
            "HOOKYARD_EDGE_PORT": str(settings.edge_port),
            "HOOKYARD_CONTROL_PORT": str(settings.control_port),
            "HOOKYARD_DATA_DIR": str(data_dir),
            "HOOKYARD_EGRESS": settings.egress,
            # a line per event and per delivery attempt (control.support.activity), unless set otherwise
            "HOOKYARD_LOG_ACTIVITY": environ.get("HOOKYARD_LOG_ACTIVITY", "true"),
            "HOOKYARD_ENCRYPTION_KEYS": ",".join(encryption_keys),
        }
        for name, command in _children(settings):
            if stop.is_set():
                return 0
            argv = [sys.executable, "-m", "control.cli", *command, "--parent-pid", str(os.getpid())]
            proc = await asyncio.create_subprocess_exec(
                *argv, env=env, stdin=asyncio.subprocess.DEVNULL, process_group=0
            )
            children.append(Child(name, proc))
        local = {
            name: _local_url(settings.host, port)
            for name, port in (("edge", settings.edge_port), ("control", settings.control_port))
        }
        # Where this machine reaches it (not HOOKYARD_PUBLIC_*_URL, which may lead through a tunnel or proxy).
        write_instance(
            data_dir,
            instance_of_this_process(
                control_url=local["control"],
                edge_url=local["edge"],
                database_url=database_url,
                redis_url=redis_url,
                embedded=embedded.started if embedded is not None else (),
            ),
        )
        health = {name: url + "/healthz" for name, url in local.items()}
        if not await _wait_healthy(health, children, stop):
            return 0
        _banner(settings, data_dir, key, describe(environ))
        if (elsewhere := _client_url_elsewhere(environ, local["control"], settings.control_url)) is not None:
            log.warning("%s", elsewhere)
        failed = await _supervise(children, stop)
        if failed is not None:
            code = failed.proc.returncode
            how = f"was killed by {signal.Signals(-code).name}" if code is not None and code < 0 else f"exited ({code})"
            # Code 0 too: a child stopped on its own (e.g. its own SIGTERM) still leaves the instance incomplete.
            log.error("%s %s while up was running; stopping everything", failed.name, how)
            return 1
        log.info("stopping")
        return 0
    finally:
        remove_instance(data_dir, os.getpid())
        await asyncio.gather(*(child.terminate() for child in children))
        if embedded is not None:
            # Said, as the children's own lines say their stop: a trial saw 2.7 s of silence here, Postgres's
            # shutdown checkpoint writing what the run changed (0.1 s after a quiet run, ~0.8 s after a first).
            checkpoint = " (Postgres first writes its checkpoint)" if "postgres" in embedded.started else ""
            names = " and ".join({"postgres": "Postgres", "redis": "Redis"}[n] for n in embedded.started)
            log.info("stopping the embedded %s%s", names, checkpoint)
            started = time.monotonic()
            await asyncio.to_thread(embedded.stop)
            log.info("embedded servers stopped in %.2fs", time.monotonic() - started)


def _children(settings: Settings) -> list[tuple[str, list[str]]]:
    """(name, command) of each child: the learn loop in a process of its own, at a lower CPU priority
    (``control.workers.learn``), so learning never takes the flush's share of the CPU."""
    children = [("edge", ["edge"]), ("control", ["control"])]
    if not settings.schema_learning:
        return [*children, ("worker", ["worker"])]
    others = [n for n in LOOP_NAMES if n != "learn"]
    return [*children, ("worker", ["worker", *others]), ("learner", ["worker", "learn"])]


async def _check_redis(url: str) -> None:
    """Unreachable Redis would otherwise show only as /healthz never answering, a minute later."""
    client = aioredis.Redis.from_url(url, socket_connect_timeout=5, socket_timeout=5)
    try:
        await client.ping()
    except (redis.RedisError, OSError) as exc:
        raise StartupError(f"cannot reach Redis (REDIS_URL): {type(exc).__name__}: {exc}") from exc
    finally:
        await client.aclose()


async def _wait_healthy(urls: dict[str, str], children: list[Child], stop: asyncio.Event) -> bool:
    """True once every URL answered 200; False if asked to stop first; StartupError if a child died or the
    deadline passed (the children's own output, above in the terminal, says why)."""
    pending = dict(urls)
    deadline = asyncio.get_running_loop().time() + STARTUP_TIMEOUT_S
    async with httpx.AsyncClient(timeout=2.0, trust_env=False, verify=verify_for(*urls.values())) as client:
        while pending:
            if stop.is_set():
                return False
            for child in children:
                if child.proc.returncode is not None:
                    raise StartupError(f"{child.name} exited with code {child.proc.returncode} during start-up")
            for name, url in list(pending.items()):
                with contextlib.suppress(httpx.HTTPError):
                    if (await client.get(url)).status_code == 200:
                        del pending[name]
            if not pending:
                return True
            if asyncio.get_running_loop().time() > deadline:
                raise StartupError(f"{' and '.join(pending)} not healthy within {STARTUP_TIMEOUT_S:.0f}s")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 0.1)
    return True


async def _supervise(children: list[Child], stop: asyncio.Event) -> Child | None:
    """Waits for a stop request (None) or for the first child to exit (that child)."""
    waits = {asyncio.ensure_future(child.proc.wait()): child for child in children}
    stopper = asyncio.ensure_future(stop.wait())
    done, pending = await asyncio.wait({stopper, *waits}, return_when=asyncio.FIRST_COMPLETED)
    for task in pending:
        task.cancel()
    return next((waits[task] for task in done if task in waits), None)


def _client_url_elsewhere(environ: Mapping[str, str], *served: str) -> str | None:
    """The line ``up`` says when the shell it runs in exports ``HOOKYARD_CONTROL_URL`` (the client commands'
    variable, which the servers ignore) naming another control plane: ``listen``, ``trigger`` and ``tail`` run
    from that shell would talk to that one, with this data dir's key, and it started silently. None when the
    variable is unset or names one of the URLs this ``up`` serves (``localhost`` taken for 127.0.0.1)."""
    given = environ.get(CONTROL_URL_VARIABLE, "").strip()
    if not given or _same_url(given) in {_same_url(url) for url in served}:
        return None
    return (
        f"{CONTROL_URL_VARIABLE} is {given}, not this up's {served[0]}: the client commands run with it (listen, "
        f"trigger, replay, tail, open) talk to that control plane instead; unset it (unset {CONTROL_URL_VARIABLE}) or "
        f"set it to {served[0]}"
    )


def _same_url(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url.strip().rstrip("/").lower())
    try:
        port = parts.port or {"http": 80, "https": 443}.get(parts.scheme)
    except ValueError:
        port = None
    host = "127.0.0.1" if parts.hostname == "localhost" else parts.hostname or ""
    return parts.scheme, host, port


def _banner(settings: Settings, data_dir: Path, key: LocalKey, tracing: str | None) -> None:
    key_file = data_dir / "api_key"
    if key.new:
        key_line = f"  API key  {key.value}  (new; saved in {key_file})"
    elif key.restored is not None:
        key_line = f"  API key  in {key_file}  (this database's, put back from {key.restored.name})"
    else:
        key_line = f"  API key  in {key_file}"
    if key.set_aside is not None:  # a key of another database, perhaps, still working there
        key_line += f"\n           the key it held is not this database's: kept in {key.set_aside}"
    auth = f'"Authorization: Bearer $(cat {shlex.quote(str(key_file))})"'
    curl = (
        f"curl -s -X POST {settings.control_url}/v1/endpoints -H {auth} "
        "-H 'content-type: application/json' -d '{\"name\": \"demo\"}'"
    )
    lines = [
        f"hookyard is up: control {settings.control_url}, edge {settings.edge_url}",
        f"  data     {data_dir}",
        key_line,
        f"  try      {curl}",
        f"  metrics  control {control_metrics_where(settings.host, settings.control_metrics_port)}",
        *([f"  tracing  {tracing.removeprefix('tracing: ')}"] if tracing else []),
        "Ctrl-C stops everything.",
    ]
    print("\n".join(lines), flush=True)
