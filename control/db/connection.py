"""The connection type SQL functions take: a plain connection, or the pool's proxy of one (``pool.acquire()``).

asyncpg's proxy forwards every call of the connection it wraps, and ``isinstance`` of it against
``asyncpg.Connection`` holds; the type stubs (asyncpg-stubs) declare the two as unrelated classes with the same
methods, so type checkers are given their union.

Every connection hookyard opens is opened here, and carries ``MARK`` as its ``application_name``: the follow's
horizon lets a transaction of this database without it pass as one that cannot store events (ADR 0087).
``tests/repo/test_architecture.py`` keeps every other module from calling asyncpg's ``connect`` or
``create_pool`` itself."""

from __future__ import annotations

from collections.abc import Coroutine, Mapping
from typing import TYPE_CHECKING, Any, TypeAlias

import asyncpg

__all__ = ("MARK", "Connection", "Row", "marked_connection", "marked_pool", "ping", "returned")

if TYPE_CHECKING:
    from asyncpg.pool import PoolConnectionProxy

    Connection: TypeAlias = asyncpg.Connection[asyncpg.Record] | PoolConnectionProxy[asyncpg.Record]
else:
    Connection = asyncpg.Connection

MARK = "hookyard"
"""The ``application_name`` of hookyard's connections. Given as a startup setting, it overrides one in the
DSN (``?application_name=``, asyncpg lets the explicit ``server_settings`` win) and any role or database
default, and a pool's ``RESET ALL`` returns to it; hookyard never ``SET``s it. The horizon counts a
transaction of this database whose backend shows a name not starting with it as unable to store events."""
_SETTINGS = {"application_name": MARK}


def marked_connection(dsn: str, *, timeout: float = 60) -> Coroutine[Any, Any, asyncpg.Connection[asyncpg.Record]]:
    """A connection (awaited by the caller) of hookyard's (``MARK``): the only way the product opens one
    outside a pool. ``timeout`` bounds the connect, as asyncpg's own does."""
    return asyncpg.connect(dsn, timeout=timeout, server_settings=dict(_SETTINGS))


def marked_pool(dsn: str, **options: Any) -> asyncpg.Pool[asyncpg.Record]:
    """A pool (awaited by the caller) whose every connection carries ``MARK``."""
    return asyncpg.create_pool(dsn, server_settings=dict(_SETTINGS), **options)


async def ping(conn: Connection) -> None:
    """A round trip that needs nothing of the schema: the health check's proof that Postgres answers."""
    await conn.fetchval("SELECT 1")


def returned(row: asyncpg.Record | None) -> asyncpg.Record:
    """The row of a statement that always gives one (``INSERT ... RETURNING``, a row this transaction just
    wrote or holds locked): ``None`` there would be a bug, named here rather than failing later on ``None``."""
    if row is None:
        raise LookupError("the statement returned no row")
    return row


Row: TypeAlias = asyncpg.Record | Mapping[str, Any]
"""A row read by column name: an ``asyncpg.Record`` or a mapping built in code (the stubs do not make the
record a ``Mapping``), for the functions that take either."""
