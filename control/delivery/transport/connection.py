"""One TCP (or TLS) connection as an asyncio protocol: bytes buffered as they arrive, reads that wait with a
timer, writes that respect the send buffer.

Protocol callbacks rather than streams because they cost a few calls per read instead of a task switch per
``StreamReader`` step, which mattered at thousands of deliveries a second. Reading stops while more than
``HIGH_WATER`` bytes are buffered (a destination cannot make us hold an unbounded body) and resumes below
``LOW_WATER``. Every wait is one future with one timer that fails it with httpx's own timeout exception, so
the exchange sees the same errors httpx's transports raise; or, when the exchange's ``deadline`` comes
first, with ``TimeoutError``: the whole exchange is bounded by the same timers, without a second timer per
send (``asyncio.timeout``, about 5% of a delivery's CPU; docs/adr/0042-delivery-cpu-per-send.md).
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

import httpx

from control.delivery.transport.messages import closed_error, invalid
from control.delivery.transport.timings import Timings

__all__ = ("HIGH_WATER", "MAX_HEAD", "Connection", "Connector", "Parking", "PoolKey", "TlsProfile")

Connector = Callable[[str, int, Callable[[], asyncio.Protocol]], Awaitable[tuple[asyncio.Transport, Any]]]
"""``(host, port, protocol_factory) → (transport, protocol)``: a TCP connection, policy checks included."""

PoolKey = tuple[str, str, int] | tuple[str, str, int, str]
"""What pooled connections are kept apart by: (scheme, host, port), and for a destination with TLS settings of
its own (``TlsProfile``) the profile's key as well."""


@dataclass(frozen=True, slots=True)
class TlsProfile:
    """A destination's own TLS settings (``control.delivery.auth.tls``): ``context`` verifies against its CA
    and presents its client certificate; ``key`` (a digest of them) keeps its pooled connections apart."""

    key: str
    context: ssl.SSLContext


MAX_HEAD = 64 * 1024
"""Longest response head (status line and headers) accepted."""
_MAX_LINE = 4096  # a chunk-size or trailer line
HIGH_WATER = 256 * 1024
"""Stop reading from the socket while this much is buffered."""
_LOW_WATER = 64 * 1024


class Parking(Protocol):
    """Where an idle connection is parked (``pool.Pool``), told when the peer closes it: a protocol here, so
    the pool depends on the connection and not the other way round."""

    def forget(self, conn: Connection, /) -> None: ...


class Connection(asyncio.Protocol):
    """One TCP (or TLS) connection: what arrived is buffered here, waits are futures with a timer."""

    def __init__(self, key: PoolKey) -> None:
        self.key = key
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.eof = False
        self.error: Exception | None = None
        self.pool: Parking | None = None
        """Set while parked in the pool, so a peer closing an idle connection frees its slot at once."""
        self.holds_slot = True
        """Counted in the pool's open connections until discarded."""
        self.idle_since = 0.0
        self.reused = False
        self.deadline: float | None = None
        """The loop time by which the current exchange must end (None: only each wait's own timeout), set
        by the transport per exchange: a wait it cuts short raises ``TimeoutError``."""
        self.timings: Timings | None = None
        """The current exchange's moments when its send is traced (``transport.timings``): the first
        response byte is noted here."""
        self._waiter: asyncio.Future[None] | None = None
        self._drain_waiter: asyncio.Future[None] | None = None
        self._writing_paused = False
        self._reading_paused = False

    # -- asyncio callbacks -------------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # a stream connection's: an asyncio.Transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        timings = self.timings
        if timings is not None and not timings.first_byte:
            timings.first_byte = time.perf_counter()
        if len(self.buffer) > HIGH_WATER and not self._reading_paused and self.transport is not None:
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
        timer = self._timer(loop, waiter, within_s, error)
        try:
            await waiter
        finally:
            self._waiter = None
            if timer is not None:
                timer.cancel()

    def take(self, n: int) -> bytes:
        """Up to ``n`` bytes of what is buffered, at once (reading resumes below the low-water mark)."""
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
        return self.take(n)

    async def read_line(self, within_s: float | None) -> bytes:
        """One line without its CRLF (or bare LF)."""
        start = 0
        while (end := self.buffer.find(b"\n", start)) < 0:
            if len(self.buffer) > _MAX_LINE:
                raise invalid("a chunk-size or trailer line is too long")
            if self.eof:
                raise self._lost("before the response body was complete")
            start = len(self.buffer)
            await self._wait(within_s, _read_timeout(within_s))
        line = self.take(end + 1)
        return line[:-2] if line.endswith(b"\r\n") else line[:-1]

    async def read_head(self, within_s: float | None) -> list[bytes]:
        """The lines of a response head (status line first), the blank line consumed."""
        start = 0
        while True:
            buffer = self.buffer
            end = buffer.find(b"\r\n\r\n", start)
            if end >= 0:
                head = self.take(end + 4)
                return head[:-4].split(b"\r\n")
            ends = [i for i in (buffer.find(b"\n\n"), buffer.find(b"\n\r\n")) if i >= 0]
            if ends:  # bare LF line ends (lenient, as h11 is)
                end = min(ends)
                head = self.take(end + (2 if buffer.startswith(b"\n\n", end) else 3))
                return [line.rstrip(b"\r") for line in head.rstrip(b"\r\n").split(b"\n")]
            if len(buffer) > MAX_HEAD:
                raise invalid(f"response head larger than {MAX_HEAD} bytes")
            if self.eof:
                if buffer or not self.reused:
                    raise self._lost("before a complete response head arrived")
                raise self._lost("without a response (a kept-alive connection the destination had closed)")
            start = max(0, len(buffer) - 3)
            await self._wait(within_s, _read_timeout(within_s))

    def _timer(
        self,
        loop: asyncio.AbstractEventLoop,
        waiter: asyncio.Future[None],
        within_s: float | None,
        error: Callable[[], Exception],
    ) -> asyncio.TimerHandle | None:
        """The one timer of a wait: ``within_s`` with ``error``, or the exchange's deadline with
        ``TimeoutError`` when that comes first."""
        deadline = self.deadline
        if deadline is not None and (within_s is None or loop.time() + within_s >= deadline):
            return loop.call_at(deadline, _expire, waiter, TimeoutError)
        return None if within_s is None else loop.call_later(within_s, _expire, waiter, error)

    def _lost(self, what: str) -> httpx.RemoteProtocolError:
        reason = f" ({self.error})" if self.error is not None else ""
        return closed_error(what + reason)

    async def write(self, data: bytes, within_s: float | None) -> None:
        transport = self.transport
        if transport is None or transport.is_closing():
            raise httpx.WriteError("the connection is closed")
        transport.write(data)
        if self._writing_paused and not self.eof:
            loop = asyncio.get_running_loop()
            waiter = self._drain_waiter = loop.create_future()
            timer = self._timer(loop, waiter, within_s, _write_timeout(within_s))
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


def _write_timeout(within_s: float | None) -> Callable[[], Exception]:
    return lambda: httpx.WriteTimeout(f"the destination took no data for {within_s:g}s")
