"""The connection type SQL functions take: a plain connection, or the pool's proxy of one (``pool.acquire()``).

asyncpg's proxy forwards every call of the connection it wraps, and ``isinstance`` of it against
``asyncpg.Connection`` holds; the type stubs (asyncpg-stubs) declare the two as unrelated classes with the same
methods, so type checkers are given their union."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeAlias

import asyncpg

__all__ = ("Connection", "Row", "ping", "returned")

if TYPE_CHECKING:
    from asyncpg.pool import PoolConnectionProxy

    Connection: TypeAlias = asyncpg.Connection[asyncpg.Record] | PoolConnectionProxy[asyncpg.Record]
else:
    Connection = asyncpg.Connection


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
