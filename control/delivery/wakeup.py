"""Deliver wakeups: LISTEN on a dedicated Postgres connection for the flush's commit-time NOTIFY.

asyncpg drops a pooled connection's listeners on release, so this one is its own. It is (re)connected
lazily by :meth:`TaskNotifications.ensure`, with backoff while Postgres is away; meanwhile (and always, as
a safety net) the deliver loop still looks at the task table every ``deliver_poll_s``.

A notification's payload may name a destination that was disabled or enabled (``disabled:<id>``,
``enabled:<id>``: ``control.db.destination_state``), for the loop to drop what it claimed ahead of it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import asyncpg

from control.db.connection import Connection, marked_connection
from control.db.tasks import NOTIFY_CHANNEL

__all__ = ("TaskNotifications",)

log = logging.getLogger("hookyard.worker.deliver")


class TaskNotifications:
    def __init__(
        self,
        dsn: str,
        on_notify: Callable[[], None],
        *,
        connect_timeout_s: float = 5.0,
        on_state: Callable[[str, str], None] | None = None,
    ) -> None:
        self.dsn = dsn
        self.on_notify = on_notify
        self.on_state = on_state
        """Called with (``disabled`` or ``enabled``, destination id) for a destination's change of state."""
        self.connect_timeout_s = connect_timeout_s
        self._conn: Connection | None = None
        self._retry_at = 0.0
        self._failures = 0

    @property
    def listening(self) -> bool:
        return self._conn is not None and not self._conn.is_closed()

    async def ensure(self) -> None:
        """Connects and LISTENs unless already listening; never raises (the poll covers an outage)."""
        if self.listening or time.monotonic() < self._retry_at:
            return
        await self.aclose()
        conn = None
        try:
            conn = await marked_connection(self.dsn, timeout=self.connect_timeout_s)
            await conn.add_listener(NOTIFY_CHANNEL, self._notified)
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError) as exc:
            if conn is not None:
                conn.terminate()
            self._failures += 1
            delay = min(10.0, 0.2 * 2**self._failures)
            self._retry_at = time.monotonic() + delay
            log.warning("deliver: LISTEN connection failed (%s); polling, retrying in %.1fs", exc, delay)
            return
        conn.add_termination_listener(self._terminated)
        self._conn, self._failures = conn, 0
        self.on_notify()  # notifications sent while not listening were missed: look now

    def _notified(self, conn: object, pid: int, channel: str, payload: object) -> None:
        if isinstance(payload, str) and payload and self.on_state is not None:  # NOTIFY's payload: a str
            state, _, destination_id = payload.partition(":")
            if state in ("disabled", "enabled") and destination_id:
                self.on_state(state, destination_id)
        self.on_notify()

    def _terminated(self, conn: object) -> None:
        log.warning("deliver: LISTEN connection lost; reconnecting")
        self.on_notify()

    async def aclose(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.remove_termination_listener(self._terminated)
        if conn is not None and not conn.is_closed():
            try:
                await conn.close(timeout=2)
            except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError):
                conn.terminate()
