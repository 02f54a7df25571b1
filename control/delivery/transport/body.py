"""A response body read off its connection as the caller iterates it: Content-Length, chunked, or until the
close.

Apart from the exchange because the body outlives it: ``handle_async_request`` returns once the head is
read, and the connection is only free when the body is complete. So the body owns the connection until
then, and decides its fate: back to the pool when the body ended cleanly and the connection may be kept
alive, closed otherwise. A body left unread (a capped read, an error) closes its connection unless the rest
of it has already arrived, so a reused connection never starts in the middle of an old body. Chunk sizes
and trailers are checked as strictly as the head (``messages``): a malformed one is a protocol error.
"""

from __future__ import annotations

import httpx

from control.delivery.transport.connection import HIGH_WATER, Connection
from control.delivery.transport.messages import HEX, invalid
from control.delivery.transport.pool import Pool

__all__ = ("Body",)


class Body(httpx.AsyncByteStream):
    """A response body read off its connection as the caller iterates; the connection goes back to the
    pool once the body is complete, and is closed when the body is abandoned half-read."""

    def __init__(
        self,
        pool: Pool,
        conn: Connection,
        *,
        length: int | None,
        chunked: bool,
        keep_alive: bool,
        within_s: float | None,
    ) -> None:
        self._pool = pool
        self._conn: Connection | None = conn
        self._left = length  # Content-Length bytes still to come (None: chunked or until close)
        self._chunked = chunked
        self._chunk_left = 0
        self._chunk_crlf = False  # the CRLF after a chunk's data is still to be read
        self._keep_alive = keep_alive and (length is not None or chunked)
        self._timeout = within_s

    def __aiter__(self) -> Body:
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

    async def _read(self, conn: Connection) -> bytes:
        if self._left is not None:
            if self._left == 0:
                return b""
            data = await conn.read_some(self._left, self._timeout)
            self._left -= len(data)
            return data
        if not self._chunked:
            return await conn.read_some(HIGH_WATER, self._timeout, eof_ok=True)
        while self._chunk_left == 0:
            if self._chunk_crlf:
                if await conn.read_line(self._timeout):
                    raise invalid("chunk data longer than its chunk size")
                self._chunk_crlf = False
            line = (await conn.read_line(self._timeout)).split(b";", 1)[0].strip()
            if not HEX.fullmatch(line):
                raise invalid(f"invalid chunk size {line[:32]!r}")
            size = int(line, 16)
            if size == 0:
                trailers = 0
                while await conn.read_line(self._timeout):  # trailers are read and dropped
                    trailers += 1
                    if trailers > 100:
                        raise invalid("too many trailer fields")
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
            conn.take(self._left)  # the unread rest already arrived: skip it and keep the connection
            self._pool.release(conn)
        else:
            self._pool.discard(conn)
