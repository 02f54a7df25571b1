"""The outbound HTTP/1.1 transport: httpx's public transport interface over asyncio protocols.

Why our own: httpcore's pool looked at every connection on every request and every response close, and h11
sent a request in three writes; at a few thousand deliveries a second over a hundred kept-alive connections
that was most of the deliver worker's CPU. What delivery needs from HTTP is small: one request at a time per
connection, keep-alive per origin, Content-Length, chunked and read-until-close response bodies, no
redirects, no upgrades, and a connection made by a given ``Connector`` (the egress policy's, see
``control.delivery.egress``). It uses only httpx's public API (``AsyncBaseTransport``, ``Request``,
``Response``, ``AsyncByteStream`` and its exceptions), so no private internals pin the httpx version.

Timeouts (``request.extensions["timeout"]``, set by the client): ``connect`` bounds resolving, connecting,
the egress checks and the TLS handshake together; ``write`` each stall of the send buffer; ``read`` each
wait for response bytes; ``pool`` the wait for a free connection slot. The caller bounds the whole exchange.

A response body left unread (a capped read, an error) closes its connection unless the rest of it has
already arrived, so a reused connection never starts in the middle of an old body.
"""

from __future__ import annotations

import asyncio
import re
import ssl
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

import httpx

__all__ = ("Connector", "Transport")

Connector = Callable[[str, int, Callable[[], asyncio.Protocol]], Awaitable[tuple[asyncio.BaseTransport, Any]]]
"""``(host, port, protocol_factory) → (transport, protocol)``: a TCP connection, policy checks included."""

MAX_HEAD = 64 * 1024
"""Longest response head (status line and headers) accepted."""
_MAX_LINE = 4096  # a chunk-size or trailer line
_HIGH_WATER = 256 * 1024  # stop reading from the socket while this much is buffered
_LOW_WATER = 64 * 1024

_STATUS = re.compile(rb"HTTP/1\.([01]) ([0-9]{3})(?: ([^\r\n]*))?")
_TOKEN = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_VALUE = re.compile(rb"[\t\x20-\x7e\x80-\xff]*")
_HEX = re.compile(rb"[0-9A-Fa-f]{1,16}")
_DIGITS = re.compile(rb"[0-9]{1,18}")


def _closed_error(what: str) -> httpx.RemoteProtocolError:
    return httpx.RemoteProtocolError(f"connection closed {what}")


def _invalid(what: str) -> httpx.RemoteProtocolError:
    """The peer answered something that is not HTTP/1.x: a clear error, never a crash or a guess."""
    return httpx.RemoteProtocolError(f"invalid response: {what}")


class _Connection(asyncio.Protocol):
    """One TCP (or TLS) connection: what arrived is buffered here, waits are futures with a timer."""

    def __init__(self, key: tuple[str, str, int]) -> None:
        self.key = key
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.eof = False
        self.error: Exception | None = None
        self.pool: _Pool | None = None
        """Set while parked in the pool, so a peer closing an idle connection frees its slot at once."""
        self.holds_slot = True
        """Counted in the pool's open connections until discarded."""
        self.idle_since = 0.0
        self.reused = False
        self._waiter: asyncio.Future[None] | None = None
        self._drain_waiter: asyncio.Future[None] | None = None
        self._writing_paused = False
        self._reading_paused = False

    # -- asyncio callbacks -------------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        if len(self.buffer) > _HIGH_WATER and not self._reading_paused and self.transport is not None:
            self._reading_paused = True
            self.transport.pause_reading()
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def eof_received(self) -> bool:
        self.eof = True
        self._wake()
        return False  # close our side too

    def connection_lost(self, exc: Exception | None) -> None:
        self.eof = True
        self.error = exc
        self._wake()
        if self._drain_waiter is not None and not self._drain_waiter.done():
            self._drain_waiter.set_result(None)
        if self.pool is not None:
            self.pool.forget(self)

    def pause_writing(self) -> None:
        self._writing_paused = True

    def resume_writing(self) -> None:
        self._writing_paused = False
        if self._drain_waiter is not None and not self._drain_waiter.done():
            self._drain_waiter.set_result(None)

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # -- I/O ---------------------------------------------------------------------------------------------
    @property
    def usable(self) -> bool:
        """Still open, and the peer sent nothing since the last response (no close, no stray bytes)."""
        return not self.eof and not self.buffer and self.transport is not None and not self.transport.is_closing()

    def close(self) -> None:
        self.pool = None
        if self.transport is not None:
            self.transport.close()

    async def _wait(self, within_s: float | None, error: Callable[[], Exception]) -> None:
        """Until more bytes, or the close, arrive; ``error()`` is raised after ``within_s`` seconds."""
        loop = asyncio.get_running_loop()
        waiter = self._waiter = loop.create_future()
        timer = None if within_s is None else loop.call_later(within_s, _expire, waiter, error)
        try:
            await waiter
        finally:
            self._waiter = None
            if timer is not None:
                timer.cancel()

    def _take(self, n: int) -> bytes:
        buffer = self.buffer
        if n >= len(buffer):
            data = bytes(buffer)
            buffer.clear()
        else:
            data = bytes(buffer[:n])
            del buffer[:n]
        if self._reading_paused and len(buffer) < _LOW_WATER and self.transport is not None:
            self._reading_paused = False
            self.transport.resume_reading()
        return data

    async def read_some(self, n: int, within_s: float | None, *, eof_ok: bool = False) -> bytes:
        """Up to ``n`` bytes once any are there; at the close, ``b""`` if ``eof_ok`` else an error."""
        while not self.buffer:
            if self.eof:
                if eof_ok:
                    return b""
                raise self._lost("before the response body was complete")
            await self._wait(within_s, _read_timeout(within_s))
        return self._take(n)

    async def read_line(self, within_s: float | None) -> bytes:
        """One line without its CRLF (or bare LF)."""
        start = 0
        while (end := self.buffer.find(b"\n", start)) < 0:
            if len(self.buffer) > _MAX_LINE:
                raise _invalid("a chunk-size or trailer line is too long")
            if self.eof:
                raise self._lost("before the response body was complete")
            start = len(self.buffer)
            await self._wait(within_s, _read_timeout(within_s))
        line = self._take(end + 1)
        return line[:-2] if line.endswith(b"\r\n") else line[:-1]

    async def read_head(self, within_s: float | None) -> list[bytes]:
        """The lines of a response head (status line first), the blank line consumed."""
        start = 0
        while True:
            buffer = self.buffer
            end = buffer.find(b"\r\n\r\n", start)
            if end >= 0:
                head = self._take(end + 4)
                return head[:-4].split(b"\r\n")
            ends = [i for i in (buffer.find(b"\n\n"), buffer.find(b"\n\r\n")) if i >= 0]
            if ends:  # bare LF line ends (lenient, as h11 is)
                end = min(ends)
                head = self._take(end + (2 if buffer.startswith(b"\n\n", end) else 3))
                return [line.rstrip(b"\r") for line in head.rstrip(b"\r\n").split(b"\n")]
            if len(buffer) > MAX_HEAD:
                raise _invalid(f"response head larger than {MAX_HEAD} bytes")
            if self.eof:
                if buffer or not self.reused:
                    raise self._lost("before a complete response head arrived")
                raise self._lost("without a response (a kept-alive connection the destination had closed)")
            start = max(0, len(buffer) - 3)
            await self._wait(within_s, _read_timeout(within_s))

    def _lost(self, what: str) -> httpx.RemoteProtocolError:
        reason = f" ({self.error})" if self.error is not None else ""
        return _closed_error(what + reason)

    async def write(self, data: bytes, within_s: float | None) -> None:
        transport = self.transport
        if transport is None or transport.is_closing():
            raise httpx.WriteError("the connection is closed")
        transport.write(data)
        if self._writing_paused and not self.eof:
            loop = asyncio.get_running_loop()
            waiter = self._drain_waiter = loop.create_future()
            timer = None
            if within_s is not None:
                timer = loop.call_later(within_s, _expire, waiter, _write_timeout(within_s))
            try:
                await waiter
            finally:
                self._drain_waiter = None
                if timer is not None:
                    timer.cancel()
        # A peer that closed (or reset) meanwhile is not an error yet: it may have answered first (a 413
        # before the whole body, say); reading the response tells which.


def _expire(waiter: asyncio.Future[None], error: Callable[[], Exception]) -> None:
    if not waiter.done():
        waiter.set_exception(error())


def _read_timeout(within_s: float | None) -> Callable[[], Exception]:
    return lambda: httpx.ReadTimeout(f"no response data within {within_s:g}s")


def _write_timeout(within_s: float) -> Callable[[], Exception]:
    return lambda: httpx.WriteTimeout(f"the destination took no data for {within_s:g}s")


class _Pool:
    """Kept-alive connections per origin, at most ``max_connections`` open (busy, idle or connecting)."""

    def __init__(self, max_connections: int, keepalive_expiry: float) -> None:
        self.max_connections = max_connections
        self.keepalive_expiry = keepalive_expiry
        self.idle: dict[tuple[str, str, int], deque[_Connection]] = {}
        self.open = 0
        self.closed = False
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._next_sweep = 0.0

    def take(self, key: tuple[str, str, int]) -> _Connection | None:
        """The most recently parked idle connection to the origin that is still usable."""
        parked = self.idle.get(key)
        while parked:
            conn = parked.pop()
            conn.pool = None
            if conn.usable and time.monotonic() - conn.idle_since < self.keepalive_expiry:
                conn.reused = True
                return conn
            self.discard(conn)
        return None

    def reserve(self) -> bool:
        """Takes a slot for a new connection if one is free, closing the longest-idle connection (to some
        other origin) when that is what it takes."""
        if self.open >= self.max_connections and not self._evict_one():
            return False
        self.open += 1
        return True

    def _evict_one(self) -> bool:
        oldest: _Connection | None = None
        for parked in self.idle.values():
            if parked and (oldest is None or parked[0].idle_since < oldest.idle_since):
                oldest = parked[0]
        if oldest is None:
            return False
        self.idle[oldest.key].popleft()
        self.discard(oldest)
        return True

    async def wait(self, deadline: float | None) -> None:
        """Until a connection was released or closed (``PoolTimeout`` at the loop time ``deadline``)."""
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            async with asyncio.timeout_at(deadline):
                await waiter
        except BaseException as exc:
            if waiter.done() and not waiter.cancelled():
                self._wake_one()  # woken, but leaving (cancelled): the wakeup goes to the next waiter
            elif waiter in self._waiters:
                self._waiters.remove(waiter)
            if isinstance(exc, TimeoutError):
                raise httpx.PoolTimeout("no free connection within the pool timeout") from None
            raise

    def _wake_one(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def release(self, conn: _Connection) -> None:
        """A connection whose exchange ended cleanly: parked for reuse, or closed when it cannot be."""
        if self.closed or not conn.usable:
            self.discard(conn)
            return
        now = time.monotonic()
        conn.idle_since = now
        conn.pool = self
        parked = self.idle.get(conn.key)
        if parked is None:
            parked = self.idle[conn.key] = deque()
        parked.append(conn)
        if now >= self._next_sweep:
            self._sweep(now)
        self._wake_one()

    def discard(self, conn: _Connection) -> None:
        """Closes a connection and frees its slot (once)."""
        conn.close()
        if conn.holds_slot:
            conn.holds_slot = False
            self.open -= 1
            self._wake_one()

    def unreserve(self) -> None:
        """A reserved slot whose connection was never made."""
        self.open -= 1
        self._wake_one()

    def forget(self, conn: _Connection) -> None:
        """An idle connection the peer closed: out of the pool, slot freed."""
        parked = self.idle.get(conn.key)
        if parked is not None and conn in parked:
            parked.remove(conn)
        self.discard(conn)

    def _sweep(self, now: float) -> None:
        self._next_sweep = now + 1.0
        for key in list(self.idle):
            parked = self.idle[key]
            while parked and now - parked[0].idle_since >= self.keepalive_expiry:
                self.discard(parked.popleft())
            if not parked:
                del self.idle[key]

    def close_all(self) -> None:
        self.closed = True
        for parked in self.idle.values():
            while parked:
                self.discard(parked.popleft())
        self.idle.clear()


class _Body(httpx.AsyncByteStream):
    """A response body read off its connection as the caller iterates; the connection goes back to the
    pool once the body is complete, and is closed when the body is abandoned half-read."""

    def __init__(
        self,
        pool: _Pool,
        conn: _Connection,
        *,
        length: int | None,
        chunked: bool,
        keep_alive: bool,
        within_s: float | None,
    ) -> None:
        self._pool = pool
        self._conn: _Connection | None = conn
        self._left = length  # Content-Length bytes still to come (None: chunked or until close)
        self._chunked = chunked
        self._chunk_left = 0
        self._chunk_crlf = False  # the CRLF after a chunk's data is still to be read
        self._keep_alive = keep_alive and (length is not None or chunked)
        self._timeout = within_s

    def __aiter__(self) -> _Body:
        return self

    async def __anext__(self) -> bytes:
        conn = self._conn
        if conn is None:
            raise StopAsyncIteration
        try:
            data = await self._read(conn)
        except BaseException:
            self._conn = None
            self._pool.discard(conn)
            raise
        if not data:
            self._conn = None
            if self._keep_alive:
                self._pool.release(conn)
            else:
                self._pool.discard(conn)
            raise StopAsyncIteration
        return data

    async def _read(self, conn: _Connection) -> bytes:
        if self._left is not None:
            if self._left == 0:
                return b""
            data = await conn.read_some(self._left, self._timeout)
            self._left -= len(data)
            return data
        if not self._chunked:
            return await conn.read_some(_HIGH_WATER, self._timeout, eof_ok=True)
        while self._chunk_left == 0:
            if self._chunk_crlf:
                if await conn.read_line(self._timeout):
                    raise _invalid("chunk data longer than its chunk size")
                self._chunk_crlf = False
            line = (await conn.read_line(self._timeout)).split(b";", 1)[0].strip()
            if not _HEX.fullmatch(line):
                raise _invalid(f"invalid chunk size {line[:32]!r}")
            size = int(line, 16)
            if size == 0:
                trailers = 0
                while await conn.read_line(self._timeout):  # trailers are read and dropped
                    trailers += 1
                    if trailers > 100:
                        raise _invalid("too many trailer fields")
                return b""
            self._chunk_left = size
        data = await conn.read_some(self._chunk_left, self._timeout)
        self._chunk_left -= len(data)
        self._chunk_crlf = self._chunk_left == 0
        return data

    async def aclose(self) -> None:
        conn, self._conn = self._conn, None
        if conn is None:
            return
        if self._keep_alive and self._left is not None and len(conn.buffer) >= self._left:
            conn._take(self._left)  # the unread rest already arrived: skip it and keep the connection
            self._pool.release(conn)
        else:
            self._pool.discard(conn)


class Transport(httpx.AsyncBaseTransport):
    """HTTP/1.1 over connections from ``connector``; ``https`` through ``ssl_context`` (host name
    verified); at most ``max_connections`` open, idle ones kept for ``keepalive_expiry`` seconds (below
    the 5 s idle timeout of Node.js servers, so we close first rather than race their close).

    Usable on its own (``handle_async_request``, as ``control.delivery.send`` does) or as an
    ``httpx.AsyncClient(transport=...)``; ``timeout`` applies to requests that carry none (a client's
    requests carry the client's)."""

    def __init__(
        self,
        connector: Connector,
        *,
        ssl_context: ssl.SSLContext | Callable[[], ssl.SSLContext],
        timeout: httpx.Timeout | None = None,
        max_connections: int = 100,
        keepalive_expiry: float = 4.0,
    ) -> None:
        self._connector = connector
        self._ssl_context = ssl_context
        self._timeouts = (timeout or httpx.Timeout(None)).as_dict()
        self._pool = _Pool(max_connections, keepalive_expiry)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        scheme = url.scheme
        if scheme not in ("http", "https"):
            raise httpx.UnsupportedProtocol(f"the URL scheme must be http or https, not {scheme!r}")
        host = url.host
        if not host:
            raise httpx.UnsupportedProtocol("the URL has no host")
        port = url.port or (443 if scheme == "https" else 80)
        timeouts = request.extensions.get("timeout") or self._timeouts
        head, body, close_after = _encode_request(request)
        conn = await self._connection((scheme, host, port), timeouts)
        try:
            read_timeout = timeouts.get("read")
            if body is None:  # a streamed request body
                await conn.write(head, timeouts.get("write"))
                await _write_stream(conn, request, timeouts.get("write"))
            else:
                await conn.write(head + body if len(body) < 65_536 else head, timeouts.get("write"))
                if len(body) >= 65_536:
                    await conn.write(body, timeouts.get("write"))
            while True:
                lines = await conn.read_head(read_timeout)
                status, version, reason, headers = _parse_head(lines)
                if status >= 200:
                    break
                if status == 101:
                    raise _invalid("101 switching protocols, never asked for")
            return self._response(request, conn, status, version, reason, headers, close_after, read_timeout)
        except BaseException:
            self._pool.discard(conn)
            raise

    async def _connection(self, key: tuple[str, str, int], timeouts: dict[str, float | None]) -> _Connection:
        pool = self._pool
        if pool.closed:
            raise RuntimeError("the transport is closed")
        conn = pool.take(key)
        if conn is not None:
            return conn
        pool_timeout = timeouts.get("pool")
        deadline = None if pool_timeout is None else asyncio.get_running_loop().time() + pool_timeout
        while not pool.reserve():
            await pool.wait(deadline)
            conn = pool.take(key)
            if conn is not None:
                return conn
        try:
            return await self._connect(key, timeouts.get("connect"))
        except BaseException:
            pool.unreserve()
            raise

    async def _connect(self, key: tuple[str, str, int], within_s: float | None) -> _Connection:
        scheme, host, port = key
        conn: _Connection | None = None
        try:
            async with asyncio.timeout(within_s):
                transport, conn = await self._connector(host, port, lambda: _Connection(key))
                if scheme == "https":
                    context = (
                        self._ssl_context if isinstance(self._ssl_context, ssl.SSLContext) else self._ssl_context()
                    )
                    tls = await asyncio.get_running_loop().start_tls(transport, conn, context, server_hostname=host)
                    if tls is None:
                        raise httpx.ConnectError("the connection closed during the TLS handshake")
                    conn.transport = tls  # type: ignore[assignment]
        except TimeoutError:
            if conn is not None:
                conn.close()
            raise httpx.ConnectTimeout(f"no connection to {host}:{port} within {within_s:g}s") from None
        except (OSError, ssl.SSLError) as exc:  # ssl.SSLCertVerificationError is both
            if conn is not None:
                conn.close()
            raise httpx.ConnectError(str(exc) or type(exc).__name__) from exc
        except BaseException:
            if conn is not None:
                conn.close()
            raise
        return conn

    def _response(
        self,
        request: httpx.Request,
        conn: _Connection,
        status: int,
        version: bytes,
        reason: bytes,
        headers: list[tuple[bytes, bytes]],
        close_after: bool,
        read_timeout: float | None,
    ) -> httpx.Response:
        length: int | None = None
        chunked = False
        keep_alive = not close_after
        connection = transfer = content_length = None
        for name, value in headers:
            lower = name.lower()
            if lower == b"connection":
                connection = value.lower() if connection is None else connection + b"," + value.lower()
            elif lower == b"transfer-encoding":
                transfer = value.lower() if transfer is None else transfer + b"," + value.lower()
            elif lower == b"content-length":
                content_length = value if content_length is None else content_length + b"," + value
        tokens = {t.strip() for t in connection.split(b",")} if connection else set()
        keep_alive = keep_alive and (b"keep-alive" in tokens if version == b"1.0" else b"close" not in tokens)
        if request.method == "HEAD" or status in (204, 304):
            length = 0
        elif transfer is not None:
            chunked = transfer.rsplit(b",", 1)[-1].strip() == b"chunked"  # else: the body ends at the close
        elif content_length is not None:
            values = {v.strip() for v in content_length.split(b",")}
            if len(values) != 1 or not _DIGITS.fullmatch(value := values.pop()):
                raise _invalid(f"invalid content-length {content_length[:40]!r}")
            length = int(value)
        extensions = {"http_version": b"HTTP/1." + version, "reason_phrase": reason}
        pool = self._pool
        if length is not None and len(conn.buffer) >= length:  # the whole body is here: connection free now
            body = conn._take(length)
            if keep_alive:
                pool.release(conn)
            else:
                pool.discard(conn)
            stream: httpx.AsyncByteStream = httpx.ByteStream(body)
        else:
            stream = _Body(pool, conn, length=length, chunked=chunked, keep_alive=keep_alive, within_s=read_timeout)
        return httpx.Response(status, headers=headers, stream=stream, extensions=extensions, request=request)

    async def aclose(self) -> None:
        self._pool.close_all()


def _parse_head(lines: list[bytes]) -> tuple[int, bytes, bytes, list[tuple[bytes, bytes]]]:
    match = _STATUS.fullmatch(lines[0])
    if match is None:
        raise _invalid(f"not an HTTP/1.x response: {lines[0][:60]!r}")
    headers: list[tuple[bytes, bytes]] = []
    for line in lines[1:]:
        if line[:1] in (b" ", b"\t"):  # obsolete line folding: part of the previous value
            if not headers:
                raise _invalid("a response head starts with a continuation line")
            name, value = headers[-1]
            headers[-1] = (name, value + b" " + line.strip(b" \t"))
            continue
        name, sep, value = line.partition(b":")
        if not sep or not _TOKEN.fullmatch(name):
            raise _invalid(f"invalid response header line {line[:60]!r}")
        value = value.strip(b" \t")
        if not _VALUE.fullmatch(value):
            raise _invalid(f"invalid value of response header {name[:60]!r}")
        headers.append((name, value))
    return int(match[2]), match[1], match[3] or b"", headers


def _encode_request(request: httpx.Request) -> tuple[bytes, bytes | None, bool]:
    """(request head, body or None when it is a stream, whether the request asks to close)."""
    method = request.method.encode("ascii")
    if not _TOKEN.fullmatch(method):
        raise httpx.LocalProtocolError(f"invalid method {request.method!r}")
    target = request.url.raw_path
    if not target or b" " in target or b"\r" in target or b"\n" in target:
        raise httpx.LocalProtocolError(f"invalid request target {target[:60]!r}")
    parts = [method, b" ", target, b" HTTP/1.1\r\n"]
    close = False
    for name, value in request.headers.raw:
        if not _TOKEN.fullmatch(name):
            raise httpx.LocalProtocolError(f"invalid header name {name[:60]!r}")
        if not _VALUE.fullmatch(value):
            raise httpx.LocalProtocolError(f"header {name.decode('ascii')}: CR, LF and NUL are not allowed in values")
        if len(name) == 10 and name.lower() == b"connection":
            close = b"close" in value.lower()
        parts += (name, b": ", value, b"\r\n")
    parts.append(b"\r\n")
    try:
        body: bytes | None = request.content
    except httpx.RequestNotRead:
        body = None
    return b"".join(parts), body, close


async def _write_stream(conn: _Connection, request: httpx.Request, within_s: float | None) -> None:
    chunked = request.headers.get("transfer-encoding", "").lower() == "chunked"
    async for chunk in request.stream:  # type: ignore[union-attr]
        if chunk:
            await conn.write(b"%x\r\n%b\r\n" % (len(chunk), chunk) if chunked else chunk, within_s)
    if chunked:
        await conn.write(b"0\r\n\r\n", within_s)
