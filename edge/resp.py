"""A pipelining Redis connection for the edge's one hot write: RESP over an asyncio protocol.

Why not redis-py here: on the hot path its pipeline machinery (connection-pool checkout, retry wrapper,
command packing, per-command response callbacks) costs more than the XADD itself. Measured on the 2-core
bench machine, a granian app whose requests wait for their batch's XADD served 27.9k req/s through a
redis-py pipeline and 36.2k through this connection (bare app 47.9k, see
docs/adr/0006-own-resp-writer-for-stream-writes.md). Everything else on the edge (config reads, pub/sub,
health) still uses redis-py.

The connection speaks RESP2 only as far as the edge needs: commands are arrays of bulk strings written in
one ``transport.write``; replies are parsed by hiredis (a dependency of ``redis[hiredis]``), error replies
come back as :class:`RespError` in the result list rather than being raised, so one failing command does
not hide the others' outcome. URLs are the ones redis-py accepts: ``redis://``, ``rediss://``, ``unix://``,
with password, username and db.

A lost connection fails every pending call with :class:`ConnectionError`; the next call reconnects.
"""

from __future__ import annotations

import asyncio
import collections
import socket
import ssl
from typing import Any

import hiredis
from redis.asyncio.connection import SSLConnection, UnixDomainSocketConnection, parse_url

__all__ = ("RespConnection", "RespError", "pack")

RespError = hiredis.ReplyError

Command = tuple[bytes, ...]

_CERT_REQS = {"none": ssl.CERT_NONE, "optional": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}


def pack(commands: list[Command]) -> bytes:
    """The wire form of a pipeline: each command an array of bulk strings."""
    parts: list[bytes] = []
    for command in commands:
        parts.append(b"*%d\r\n" % len(command))
        for arg in command:
            parts.append(b"$%d\r\n" % len(arg))
            parts.append(arg)
            parts.append(b"\r\n")
    return b"".join(parts)


class _Pending:
    __slots__ = ("future", "remaining", "replies")

    def __init__(self, future: asyncio.Future[list[Any]], count: int) -> None:
        self.future = future
        self.remaining = count
        self.replies: list[Any] = []


class _Protocol(asyncio.Protocol):
    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.reader = hiredis.Reader()
        self.pending: collections.deque[_Pending] = collections.deque()
        self.lost: Exception | None = None
        self._resume: asyncio.Future[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # a stream connection's: an asyncio.Transport

    def data_received(self, data: bytes) -> None:
        reader = self.reader
        reader.feed(data)
        pending = self.pending
        while True:
            try:
                reply = reader.gets()
            except hiredis.ProtocolError as exc:  # garbage from the server: nothing after it can be trusted
                self.abandon(ConnectionError(f"redis protocol error: {exc}"))
                return
            if reply is False:
                return
            if not pending:  # a reply nobody asked for: the stream is out of step
                self.abandon(ConnectionError("redis sent an unexpected reply"))
                return
            head = pending[0]
            head.replies.append(reply)
            head.remaining -= 1
            if head.remaining == 0:
                pending.popleft()
                if not head.future.done():
                    head.future.set_result(head.replies)

    def abandon(self, error: Exception) -> None:
        """Closes now and fails whatever is pending, so no later call can be queued behind the close."""
        self._fail(error)
        self.transport.close()  # type: ignore[union-attr]  # replies come only after connection_made

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail(ConnectionError(f"redis connection lost: {exc or 'closed by the server'}"))

    def _fail(self, error: Exception) -> None:
        if self.lost is None:
            self.lost = error
        while self.pending:
            head = self.pending.popleft()
            if not head.future.done():
                head.future.set_exception(error)
                head.future.exception()  # retrieved: its caller may have timed out and left
        if self._resume is not None and not self._resume.done():
            self._resume.set_exception(error)
            self._resume.exception()  # retrieved: a paused writer may not be waiting on it any more

    def pause_writing(self) -> None:
        self._resume = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        if self._resume is not None and not self._resume.done():
            self._resume.set_result(None)
        self._resume = None

    async def drain(self) -> None:
        if self._resume is not None:
            await self._resume


class RespConnection:
    """One connection, opened on first use and reopened after a failure; calls may overlap (pipelining)."""

    def __init__(
        self,
        url: str,
        *,
        connect_timeout_s: float = 5.0,
        reply_timeout_s: float = 5.0,
        host: str | None = None,
        port: int | None = None,
    ) -> None:
        """``host`` and ``port`` replace the URL's (a cluster node, reached with the URL's credentials and TLS)."""
        options: dict[str, Any] = dict(parse_url(url))
        if host is not None:
            options.update(host=host, port=port)
            if options.get("connection_class") is UnixDomainSocketConnection:
                del options["connection_class"]
        self._url_options = options
        self._connect_timeout_s = connect_timeout_s
        self._reply_timeout_s = reply_timeout_s
        self._protocol: _Protocol | None = None
        self._connecting: asyncio.Lock | None = None

    async def execute(self, commands: list[Command]) -> list[Any]:
        """Every command's reply, in order; error replies are :class:`RespError` values in the list."""
        protocol = self._protocol
        if protocol is None or protocol.lost is not None:
            protocol = await self._connect()
        return await self._send(protocol, commands)

    async def _send(self, protocol: _Protocol, commands: list[Command]) -> list[Any]:
        if protocol.lost is not None:
            raise protocol.lost
        future: asyncio.Future[list[Any]] = asyncio.get_running_loop().create_future()
        protocol.pending.append(_Pending(future, len(commands)))
        protocol.transport.write(pack(commands))  # type: ignore[union-attr]  # a connected protocol has one
        try:
            async with asyncio.timeout(self._reply_timeout_s):
                await protocol.drain()  # a Redis that stopped reading is bounded like one that stopped answering
                return await future
        except TimeoutError:
            # The replies may still come, but the stream can no longer be matched to the callers: start over.
            protocol.abandon(ConnectionError("redis connection abandoned after a reply timeout"))
            raise TimeoutError("redis did not reply in time") from None

    async def _connect(self) -> _Protocol:
        if self._connecting is None:
            self._connecting = asyncio.Lock()
        async with self._connecting:
            if self._protocol is not None and self._protocol.lost is None:
                return self._protocol
            self._protocol = None
            protocol: _Protocol | None = None
            try:
                async with asyncio.timeout(self._connect_timeout_s):
                    protocol = await self._open()
                    await self._handshake(protocol)
            except BaseException:
                if protocol is not None and protocol.transport is not None:  # no half-set-up socket stays open
                    protocol.transport.close()
                raise
            self._protocol = protocol
            return protocol

    async def _handshake(self, protocol: _Protocol) -> None:
        handshake: list[Command] = []
        password = self._url_options.get("password")
        if password:
            username = self._url_options.get("username")
            auth = (b"AUTH", username.encode(), password.encode()) if username else (b"AUTH", password.encode())
            handshake.append(auth)
        db = int(self._url_options.get("db") or 0)
        if db:
            handshake.append((b"SELECT", str(db).encode()))
        if handshake:
            for reply in await self._send(protocol, handshake):
                if isinstance(reply, RespError):
                    raise ConnectionError(f"redis refused the connection set-up: {reply}")

    async def _open(self) -> _Protocol:
        loop = asyncio.get_running_loop()
        options = self._url_options
        kind = options.get("connection_class")
        if kind is UnixDomainSocketConnection:
            _, protocol = await loop.create_unix_connection(_Protocol, options["path"])
            return protocol
        context = None
        if kind is SSLConnection:
            context = ssl.create_default_context(cafile=options.get("ssl_ca_certs"))
            reqs = _CERT_REQS.get(str(options.get("ssl_cert_reqs", "required")).lower(), ssl.CERT_REQUIRED)
            if reqs != ssl.CERT_REQUIRED:
                context.check_hostname = False
            context.verify_mode = reqs
        host = options.get("host", "localhost")
        transport, protocol = await loop.create_connection(_Protocol, host, int(options.get("port", 6379)), ssl=context)
        sock = transport.get_extra_info("socket")
        if sock is not None:  # a Redis behind a dead network path is noticed, not waited on forever
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        return protocol

    async def aclose(self) -> None:
        protocol, self._protocol = self._protocol, None
        if protocol is not None and protocol.transport is not None:
            protocol.transport.close()
