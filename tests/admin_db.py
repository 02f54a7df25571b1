"""One connection per test process for the ``CREATE DATABASE`` and ``DROP DATABASE`` of every test.

Each test's database was made and dropped on a connection of its own: two Postgres backends started per test
(~5 ms of the server's CPU each, and an asyncpg handshake in the test process), about 2,500 tests a run. This
connection is made once and kept on a thread and event loop of its own, because a test's fixtures run on that
test's loop (``asyncio_default_fixture_loop_scope = "function"``) and an asyncpg connection belongs to the
loop that made it. It is on the server's admin database, which no test terminates backends of; one that the
server closed meanwhile is made again before the next statement.
"""

from __future__ import annotations

import asyncio
import threading

import asyncpg

__all__ = ("AdminConnection",)


class AdminConnection:
    """Runs statements on one kept connection to ``dsn``, from any thread's event loop, one at a time."""

    def __init__(self, dsn: str, name: str = "hookyard-tests-admin") -> None:
        self._dsn, self._name = dsn, name
        self._conn: asyncpg.Connection | None = None
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="hookyard-admin-db", daemon=True)
        self._thread.start()
        self._lock = asyncio.Lock()  # used on self._loop only: statements never interleave on the connection

    async def execute(self, *statements: str) -> None:
        """Runs ``statements`` in order (each its own transaction, as ``CREATE DATABASE`` needs)."""
        await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(self._execute(statements), self._loop))

    async def _execute(self, statements: tuple[str, ...]) -> None:
        async with self._lock:
            if self._conn is None or self._conn.is_closed():
                self._conn = await asyncpg.connect(self._dsn, server_settings={"application_name": self._name})
            try:
                for sql in statements:
                    await self._conn.execute(sql)
            except (asyncpg.InterfaceError, asyncpg.ConnectionDoesNotExistError, OSError):
                await self._discard()  # the next statement gets a new connection; this one's caller sees why
                raise

    async def _discard(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.terminate()

    def close(self) -> None:
        async def closing() -> None:
            if self._conn is not None and not self._conn.is_closed():
                await self._conn.close()

        asyncio.run_coroutine_threadsafe(closing(), self._loop).result(timeout=30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=30)
        self._loop.close()
