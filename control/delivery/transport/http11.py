"""The transport itself: one request/response exchange over a pooled connection, behind httpx's public
``AsyncBaseTransport`` interface (as httpx's own ``HTTPTransport`` is, in ``httpx/_transports/default.py``).

This is the part that knows the order of things: a kept-alive connection of the origin or a new one (the
``Connector`` makes it, egress checks included; TLS on top for https), the request written (a large body in
a write of its own, a streamed one chunk by chunk), interim 1xx responses skipped, and the response handed
back with its body still on the wire unless it has all arrived already, in which case the connection is
free at once. Timeouts (``request.extensions["timeout"]``, set by the client): ``connect`` bounds resolving,
connecting, the egress checks and the TLS handshake together; ``write`` each stall of the send buffer;
``read`` each wait for response bytes; ``pool`` the wait for a free connection slot. ``send`` also takes
the whole exchange's ``deadline`` (body included): each of those waits ends there at the latest, with
``TimeoutError``; callers of ``handle_async_request`` bound the whole exchange themselves.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable
from dataclasses import dataclass

import httpx

from control.delivery.transport.body import Body
from control.delivery.transport.connection import Connection, Connector, PoolKey, TlsProfile
from control.delivery.transport.messages import encode_request, framing, invalid, parse_head
from control.delivery.transport.pool import Pool
from control.delivery.transport.timings import TIMINGS, mark

__all__ = ("Reply", "Transport", "origin_of")


@dataclass(slots=True)
class Reply:
    """A response as read off the wire: its head parsed, its body whole (``bytes``) or still arriving
    (``Body``: iterate it, then ``aclose`` it, which returns the connection to the pool or closes it)."""

    status: int
    version: bytes
    reason: bytes
    headers: list[tuple[bytes, bytes]]
    body: bytes | Body

    def header(self, name: bytes) -> str | None:
        """A header's value (several joined with ``, ``, as httpx joins them); ``name`` lowercase."""
        values = [v for n, v in self.headers if n.lower() == name]
        if not values:
            return None
        raw = b", ".join(values)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            return raw.decode("latin-1")

    async def aclose(self) -> None:
        if not isinstance(self.body, bytes):
            await self.body.aclose()


class Transport(httpx.AsyncBaseTransport):
    """HTTP/1.1 over connections from ``connector``; ``https`` through ``ssl_context`` (host name
    verified); at most ``max_connections`` open, idle ones kept for ``keepalive_expiry`` seconds (below
    the 5 s idle timeout of Node.js servers, so we close first rather than race their close).

    Usable on its own (``send``, as ``control.delivery.send`` does, or ``handle_async_request``) or as an
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
        self._pool = Pool(max_connections, keepalive_expiry)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        origin = origin_of(url.scheme, url.host, url.port)
        timeouts = request.extensions.get("timeout") or self._timeouts
        head, body, close_after = encode_request(request)
        stream = request if body is None else None
        reply = await self._exchange(origin, request.method, head, body, close_after, timeouts, stream)
        extensions = {"http_version": b"HTTP/1." + reply.version, "reason_phrase": reply.reason}
        content = httpx.ByteStream(reply.body) if isinstance(reply.body, bytes) else reply.body
        return httpx.Response(
            reply.status, headers=reply.headers, stream=content, extensions=extensions, request=request
        )

    async def send(
        self,
        method: str,
        origin: tuple[str, str, int],
        head: bytes,
        body: bytes,
        close_after: bool,
        *,
        deadline: float | None = None,
        tls: TlsProfile | None = None,
    ) -> Reply:
        """One exchange of a request already encoded (``messages.encode_head``) to ``origin`` (from
        :func:`origin_of`), with the transport's own timeouts: what ``control.delivery.send`` uses, without
        building httpx's ``Request`` and ``Response`` (their headers objects and streams were a tenth of a
        delivery's CPU). The connection, egress checks, timeouts and errors are those of
        ``handle_async_request``. ``deadline`` (loop time) bounds the whole exchange, the reply's body
        included: any wait still going then raises ``TimeoutError``. ``tls``: the destination's own TLS settings
        (a private CA, a client certificate) for an https origin; its connections are pooled apart from the
        origin's others, so a client certificate is only ever presented on the connections made for it."""
        if tls is not None and origin[0] == "https":
            key: PoolKey = (*origin, tls.key)
            return await self._exchange(key, method, head, body, close_after, self._timeouts, None, deadline, tls)
        return await self._exchange(origin, method, head, body, close_after, self._timeouts, None, deadline)

    async def _exchange(
        self,
        origin: PoolKey,
        method: str,
        head: bytes,
        body: bytes | None,
        close_after: bool,
        timeouts: dict[str, float | None],
        stream: httpx.Request | None,
        deadline: float | None = None,
        tls: TlsProfile | None = None,
    ) -> Reply:
        conn = await self._connection(origin, timeouts, deadline, tls)
        conn.deadline = deadline  # until the reply's body is read: its waits are the connection's
        conn.timings = timings = TIMINGS.get()  # a traced send's moments (None: not timed)
        if timings is not None:
            timings.reused = conn.reused
        try:
            read_timeout, write_timeout = timeouts.get("read"), timeouts.get("write")
            if body is None:  # a streamed request body
                await conn.write(head, write_timeout)
                await _write_stream(conn, stream, write_timeout)  # type: ignore[arg-type]  # body None: the request streams
            elif len(body) < 65_536:
                await conn.write(head + body, write_timeout)
            else:
                await conn.write(head, write_timeout)
                await conn.write(body, write_timeout)
            while True:
                lines = await conn.read_head(read_timeout)
                status, version, reason, headers = parse_head(lines)
                if status >= 200:
                    break
                if status == 101:
                    raise invalid("101 switching protocols, never asked for")
            content = self._body(conn, method, status, version, headers, close_after, read_timeout)
            return Reply(status, version, reason, headers, content)
        except BaseException:
            self._pool.discard(conn)
            raise

    async def _connection(
        self, key: PoolKey, timeouts: dict[str, float | None], deadline: float | None, tls: TlsProfile | None
    ) -> Connection:
        pool = self._pool
        if pool.closed:
            raise RuntimeError("the transport is closed")
        conn = pool.take(key)
        if conn is not None:
            return conn
        wait_until, whole = _first(timeouts.get("pool"), deadline)
        while not pool.reserve():
            try:
                await pool.wait(wait_until)
            except httpx.PoolTimeout:
                if whole:
                    raise TimeoutError from None
                raise
            conn = pool.take(key)
            if conn is not None:
                return conn
        try:
            return await self._connect(key, timeouts.get("connect"), deadline, tls)
        except BaseException:
            pool.unreserve()
            raise

    async def _connect(
        self, key: PoolKey, within_s: float | None, deadline: float | None, tls: TlsProfile | None = None
    ) -> Connection:
        scheme, host, port = key[0], key[1], key[2]
        conn: Connection | None = None
        until, whole = _first(within_s, deadline)
        mark("connect_started")
        try:
            async with asyncio.timeout_at(until):
                transport, conn = await self._connector(host, port, lambda: Connection(key))
                mark("connected")
                if scheme == "https":
                    if tls is not None:
                        context = tls.context
                    elif isinstance(self._ssl_context, ssl.SSLContext):
                        context = self._ssl_context
                    else:
                        context = self._ssl_context()
                    secured = await asyncio.get_running_loop().start_tls(transport, conn, context, server_hostname=host)
                    if secured is None:
                        raise httpx.ConnectError("the connection closed during the TLS handshake")
                    conn.transport = secured
                    mark("tls")
        except TimeoutError:
            if conn is not None:
                conn.close()
            if whole:
                raise
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

    def _body(
        self,
        conn: Connection,
        method: str,
        status: int,
        version: bytes,
        headers: list[tuple[bytes, bytes]],
        close_after: bool,
        read_timeout: float | None,
    ) -> bytes | Body:
        """The response body: whole when it has all arrived (the connection free at once), else a
        :class:`Body` that owns the connection until it is read or closed."""
        length, chunked, keep_alive = framing(method, status, version, headers, close_after)
        pool = self._pool
        if length is not None and len(conn.buffer) >= length:
            body = conn.take(length)
            if keep_alive:
                pool.release(conn)
            else:
                pool.discard(conn)
            return body
        return Body(pool, conn, length=length, chunked=chunked, keep_alive=keep_alive, within_s=read_timeout)

    async def aclose(self) -> None:
        self._pool.close_all()


def _first(within_s: float | None, deadline: float | None) -> tuple[float | None, bool]:
    """(loop time a step ends at, whether that is the whole exchange's ``deadline``) of a step that may
    take ``within_s`` seconds on its own."""
    if within_s is None:
        return deadline, deadline is not None
    until = asyncio.get_running_loop().time() + within_s
    return (deadline, True) if deadline is not None and deadline <= until else (until, False)


def origin_of(scheme: str, host: str, port: int | None) -> tuple[str, str, int]:
    """(scheme, host, port) of a URL the transport can send to; ``httpx.UnsupportedProtocol`` otherwise."""
    if scheme not in ("http", "https"):
        raise httpx.UnsupportedProtocol(f"the URL scheme must be http or https, not {scheme!r}")
    if not host:
        raise httpx.UnsupportedProtocol("the URL has no host")
    return scheme, host, port or (443 if scheme == "https" else 80)


async def _write_stream(conn: Connection, request: httpx.Request, within_s: float | None) -> None:
    """A streamed request body, as it comes: chunked when the request says so, else as it is."""
    chunked = request.headers.get("transfer-encoding", "").lower() == "chunked"
    async for chunk in request.stream:  # type: ignore[union-attr]  # an httpx request stream is async here
        if chunk:
            await conn.write(b"%x\r\n%b\r\n" % (len(chunk), chunk) if chunked else chunk, within_s)
    if chunked:
        await conn.write(b"0\r\n\r\n", within_s)
