"""A real destination for delivery tests: an HTTP/1.1 server on a loopback port that records every request
and answers as told (status, body, headers, Retry-After, a delay, or a dropped connection); plus the
endpoint, destination and rule rows those tests route with.

It runs its own event loop in a thread, so it keeps answering while the test's loop is blocked (Litestar's
test client runs requests to completion that way) and serves real worker processes alike. Keep-alive is
supported, as the deliver worker's pooled client reuses connections.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import errno
import ipaddress
import ssl
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from bench.ports import free_port
from control.db.context import Context
from control.service.accounts import create_account
from control.transform.pool import close_pool
from control.workers.deliver import Deliver
from control.workers.loop import run_loops
from shared import ids
from tests.events_support import Ev, store, store_task
from tests.helpers import FAST_DELIVERY, wait_for

__all__ = (
    "FAST_DELIVERY",
    "MATCH_ALL",
    "Destination",
    "Received",
    "Reply",
    "add_destination",
    "add_endpoint",
    "add_rule",
    "deliveries_of",
    "fetch_row",
    "make_task",
    "running",
    "serving",
    "settled",
    "task_status",
)


@dataclass(frozen=True)
class Reply:
    status: int = 200
    body: bytes = b'{"received":true}'
    headers: dict[str, str] = field(default_factory=dict)
    retry_after: str | None = None
    delay_s: float = 0.0
    """Answer only after this long (a slow destination; a timeout when longer than the sender waits)."""
    drop: bool = False
    """Close the connection without answering."""


@dataclass(frozen=True)
class Received:
    method: str
    target: str
    headers: dict[str, str]
    """Lowercased names; a repeated header keeps its last value (the raw list is ``raw_headers``)."""
    raw_headers: list[tuple[str, str]]
    wire_headers: list[tuple[str, bytes]]
    """Every header as it came on the wire: the value's exact bytes."""
    body: bytes
    at: float
    """time.time() when the request was complete."""
    peer_certificate: dict[str, Any] | None = None
    """The client certificate the sender presented over TLS (``ssl.SSLSocket.getpeercert``), if any."""


def _self_signed(directory: Path) -> tuple[Path, Path]:
    """A certificate for localhost and 127.0.0.1 (and its key), valid for a day."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "hookyard test destination")])
    now = datetime.now(UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(now + timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_path, key_path


class Destination:
    def __init__(self, *, tls_dir: Path | None = None, server_context: ssl.SSLContext | None = None) -> None:
        """With ``tls_dir``: HTTPS with a self-signed certificate written there (trust it with
        ``client_context()``). With ``server_context``: HTTPS as that context says (a certificate of a test CA,
        client certificates required...)."""
        self.tls_dir = tls_dir
        self.server_context = server_context
        self.answer: Callable[[Received], Reply | None] | None = None
        """Decides the reply to a request (an auth check, a token endpoint); None from it: the scripted one."""
        self.idle_timeout_s: float | None = None
        """Close a kept-alive connection that sends no new request for this long (as servers do)."""
        self.idle_closed = 0
        self.requests: list[Received] = []
        self.default = Reply()
        self._script: deque[Reply] = deque()
        self._lock = threading.Lock()
        self._gate: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._gate.set_result(None)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._handlers: set[asyncio.Task[None]] = set()
        self._stopping: asyncio.Event | None = None
        self.port = 0

    @property
    def url(self) -> str:
        secure = self.tls_dir is not None or self.server_context is not None
        return f"{'https' if secure else 'http'}://127.0.0.1:{self.port}/hook"

    def client_context(self) -> ssl.SSLContext:
        """An SSL context trusting this destination's certificate (and nothing else)."""
        assert self.tls_dir is not None
        return ssl.create_default_context(cafile=str(self.tls_dir / "cert.pem"))

    def reply(self, *replies: Reply, default: Reply | None = None) -> None:
        """The next requests get ``replies`` in order, then ``default`` (if given) from then on."""
        with self._lock:
            self._script.extend(replies)
            if default is not None:
                self.default = default

    def hold(self) -> None:
        """From now on requests are recorded but not answered until ``release``."""
        with self._lock:
            if self._gate.done():
                self._gate = concurrent.futures.Future()

    def release(self) -> None:
        """Answers the held requests (each as its reply says) and stops holding."""
        with self._lock:
            if not self._gate.done():
                self._gate.set_result(None)

    def _next_reply(self) -> Reply:
        with self._lock:
            return self._script.popleft() if self._script else self.default

    async def wait_for(self, count: int, timeout: float = 10.0) -> list[Received]:
        """The first ``count`` requests, once that many arrived (fails after ``timeout`` seconds)."""
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                if len(self.requests) >= count:
                    return list(self.requests[:count])
            if time.monotonic() > deadline:
                raise AssertionError(f"{len(self.requests)} of {count} requests arrived within {timeout}s")
            await asyncio.sleep(0.01)

    # -- server ----------------------------------------------------------------------------------------
    def start(self) -> None:
        ready = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(ready,), name="destination", daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("destination server did not start")

    def stop(self) -> None:
        if self._loop is not None and self._stopping is not None:
            self._loop.call_soon_threadsafe(self._stopping.set)
        if self._thread is not None:
            self._thread.join(10)

    def _run(self, ready: threading.Event) -> None:
        asyncio.run(self._serve(ready))

    async def _serve(self, ready: threading.Event) -> None:
        self._loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        context = self.server_context
        if self.tls_dir is not None:
            cert, key = _self_signed(self.tls_dir)
            context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            context.load_cert_chain(cert, key)
        while True:  # a port of its own, never one a past test's destination had (bench/ports.py)
            port = free_port()
            try:
                server = await asyncio.start_server(self._connection, "127.0.0.1", port, ssl=context)
                break
            except OSError as exc:
                if exc.errno != errno.EADDRINUSE:
                    raise
        self.port = port
        ready.set()
        try:
            await self._stopping.wait()
        finally:
            server.close()
            for task in list(self._handlers):
                task.cancel()
            await asyncio.gather(*self._handlers, return_exceptions=True)
            await server.wait_closed()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        try:
            while await self._exchange(reader, writer):
                pass
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ssl.SSLError):
            pass
        finally:
            self._handlers.discard(task)
            writer.close()
            with contextlib.suppress(ConnectionError, asyncio.CancelledError):
                await writer.wait_closed()

    async def _exchange(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """Serves one request; False when the connection should end."""
        try:
            async with asyncio.timeout(self.idle_timeout_s):
                head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:
            return False
        except TimeoutError:
            # Closed before counted: a client that sees the count and sends again finds it closed, not closing.
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()
            with self._lock:
                self.idle_closed += 1
            return False
        request_line, *lines = head.decode("latin-1").split("\r\n")
        method, target, _ = request_line.split(" ", 2)
        raw = [(n.strip().lower(), v.strip()) for n, _, v in (line.partition(":") for line in lines if line)]
        headers = dict(raw)
        if headers.get("transfer-encoding", "").lower() == "chunked":
            body = b""
            while size := int((await reader.readuntil(b"\r\n")).strip().split(b";")[0], 16):
                body += await reader.readexactly(size)
                await reader.readexactly(2)
            await reader.readuntil(b"\r\n")
        else:
            body = await reader.readexactly(int(headers.get("content-length", "0")))
        # Raw header values are bytes on the wire; show them as the sender's UTF-8.
        decoded = [(n, v.encode("latin-1").decode("utf-8", "replace")) for n, v in raw]
        wire = [(n, v.encode("latin-1")) for n, v in raw]
        ssl_object = writer.get_extra_info("ssl_object")
        peer = ssl_object.getpeercert() if ssl_object is not None else None
        received = Received(method, target, dict(decoded), decoded, wire, body, time.time(), peer or None)
        with self._lock:
            self.requests.append(received)
            gate = self._gate
        if not gate.done():
            await asyncio.wrap_future(gate)
        answered = self.answer(received) if self.answer is not None else None
        reply = answered if answered is not None else self._next_reply()
        if reply.delay_s:
            await asyncio.sleep(reply.delay_s)
        if reply.drop:
            return False
        out = [f"HTTP/1.1 {reply.status} X", f"content-length: {len(reply.body)}", "content-type: application/json"]
        if reply.retry_after is not None:
            out.append(f"retry-after: {reply.retry_after}")
        out += [f"{name}: {value}" for name, value in reply.headers.items()]
        writer.write(("\r\n".join(out) + "\r\n\r\n").encode("latin-1") + reply.body)
        await writer.drain()
        return headers.get("connection", "").lower() != "close"


@contextlib.asynccontextmanager
async def running(ctx: Context) -> AsyncIterator[Deliver]:
    """The deliver loop in this event loop until the block ends; then stopped and drained like on SIGTERM, and
    this event loop's sandbox processes ended, as a worker's shutdown does (``control.workers.main``): left to
    the loop's close, their tasks were destroyed pending and their pipes collected unclosed."""
    deliver = Deliver(ctx)
    stop = asyncio.Event()
    loop = asyncio.create_task(run_loops([deliver], stop))
    try:
        yield deliver
    finally:
        stop.set()
        try:
            await loop
            await deliver.close()
        finally:
            await close_pool()


@contextlib.contextmanager
def serving(*, tls_dir: Path | None = None, server_context: ssl.SSLContext | None = None) -> Iterator[Destination]:
    """A started destination, stopped afterwards (test modules wrap it in a ``destination`` fixture)."""
    server = Destination(tls_dir=tls_dir, server_context=server_context)
    server.start()
    try:
        yield server
    finally:
        server.stop()


# -- rows for delivery tests (written as the API writes them) ---------------------------------------------

MATCH_ALL: dict[str, Any] = {"op": "AND", "children": []}


async def add_endpoint(
    conn: asyncpg.Connection, *, account_id: str | None = None, environment: str = "production"
) -> str:
    if account_id is None:
        account_id, _ = await create_account(conn, email=None)
    endpoint_id = ids.new_id("ep")
    await conn.execute(
        """INSERT INTO endpoints (id, account_id, name, environment, ingest_token, signing_secret)
           VALUES ($1, $2, 'deliveries', $3, $4, $5)""",
        endpoint_id,
        account_id,
        environment,
        ids.ingest_token(),
        ids.signing_secret(),
    )
    await conn.execute("INSERT INTO auth_configs (endpoint_id) VALUES ($1)", endpoint_id)
    return endpoint_id


async def add_destination(
    conn: asyncpg.Connection,
    endpoint_id: str,
    url: str,
    *,
    name: str | None = "sink",
    headers: dict[str, str] | None = None,
) -> str:
    destination_id = ids.new_id("dst")
    await conn.execute(
        "INSERT INTO destinations (id, endpoint_id, name, url, headers) VALUES ($1, $2, $3, $4, $5)",
        destination_id,
        endpoint_id,
        name,
        url,
        headers,
    )
    return destination_id


async def add_rule(
    conn: asyncpg.Connection,
    endpoint_id: str,
    destination_ids: list[str],
    tree: dict[str, Any] | None = None,
    *,
    active: bool = True,
) -> str:
    rule_id = ids.new_id("rule")
    await conn.execute(
        "INSERT INTO rules (id, endpoint_id, name, condition_tree, active) VALUES ($1, $2, $3, $4, $5)",
        rule_id,
        endpoint_id,
        f"rule {rule_id[-4:]}",
        MATCH_ALL if tree is None else tree,
        active,
    )
    await conn.executemany(
        "INSERT INTO rule_destinations (rule_id, destination_id, position) VALUES ($1, $2, $3)",
        [(rule_id, d, i) for i, d in enumerate(destination_ids)],
    )
    return rule_id


# -- delivery tasks and their outcome ----------------------------------------------------------------------


async def make_task(
    ctx: Context,
    url: str,
    *,
    endpoint_id: str | None = None,
    destination_id: str | None = None,
    dest_headers: dict[str, str] | None = None,
    **event: Any,
) -> dict[str, str]:
    """An event with one pending delivery task to ``url`` (ids by name)."""
    async with ctx.pool.acquire() as conn:
        endpoint_id = endpoint_id or await add_endpoint(conn)
        destination_id = destination_id or await add_destination(conn, endpoint_id, url, headers=dest_headers)
        rule_id = await add_rule(conn, endpoint_id, [destination_id])
        ev = Ev(endpoint_id=endpoint_id, **event)
        await store(conn, None, None, [ev])
        task_id = await store_task(
            conn,
            endpoint_id=endpoint_id,
            event_id=ev.id,
            received_at=ev.received_at,
            rule_id=rule_id,
            destination_id=destination_id,
        )
    return {"endpoint": endpoint_id, "destination": destination_id, "rule": rule_id, "event": ev.id, "task": task_id}


async def fetch_row(ctx: Context, sql: str, *args: object) -> Any:
    async with ctx.pool.acquire() as conn:
        return await conn.fetchrow(sql, *args)


async def task_status(ctx: Context, task_id: str) -> Any:
    return await fetch_row(ctx, "SELECT status, attempts, last_error FROM delivery_tasks WHERE id = $1", task_id)


async def settled(ctx: Context, task_id: str, status: str, timeout: float = 10) -> Any:
    async def check() -> Any:
        row = await task_status(ctx, task_id)
        return row if row["status"] == status else None

    return await wait_for(check, timeout=timeout)


async def deliveries_of(ctx: Context, event_id: str) -> list[Any]:
    async with ctx.pool.acquire() as conn:
        return await conn.fetch(
            "SELECT * FROM deliveries WHERE event_id = $1 ORDER BY attempt_number, created_at", event_id
        )
