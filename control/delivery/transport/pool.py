"""Kept-alive connections per origin, with one bound on how many are open in all.

Why not httpcore's pool: it looked at every connection on every request and every response close, most of
the deliver worker's CPU at a hundred kept-alive connections. Here a request takes the most recently parked
idle connection of its origin (a dict and a deque: constant time), an idle connection the peer closes frees
its slot the moment asyncio reports it, expired ones are swept at most once a second, and a request that
finds every slot taken closes the longest-idle connection of another origin before it waits. Waiters are
woken one at a time, in order, and a woken waiter that leaves (cancelled) hands its wakeup on.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque

import httpx

from control.delivery.transport.connection import Connection, PoolKey

__all__ = ("Pool",)


class Pool:
    """Kept-alive connections per origin, at most ``max_connections`` open (busy, idle or connecting)."""

    def __init__(self, max_connections: int, keepalive_expiry: float) -> None:
        self.max_connections = max_connections
        self.keepalive_expiry = keepalive_expiry
        self.idle: dict[PoolKey, deque[Connection]] = {}
        self.open = 0
        self.closed = False
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._next_sweep = 0.0

    def take(self, key: PoolKey) -> Connection | None:
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
        oldest: Connection | None = None
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

    def release(self, conn: Connection) -> None:
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

    def discard(self, conn: Connection) -> None:
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

    def forget(self, conn: Connection) -> None:
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
