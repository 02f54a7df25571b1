"""Storage: asyncpg pools and every SQL statement hookyard runs (one module per table family)."""

from __future__ import annotations

import asyncpg
import msgspec

from control.db.connection import Connection, marked_connection, marked_pool

__all__ = ("connect", "create_pool", "init_connection")

_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder()


async def init_connection(conn: Connection) -> None:
    """jsonb in and out as Python objects via msgspec (binary jsonb is a 0x01 version byte + JSON text)."""
    await conn.set_type_codec(
        "jsonb",
        schema="pg_catalog",
        format="binary",
        encoder=lambda v: b"\x01" + _encoder.encode(v),
        decoder=lambda b: _decoder.decode(b[1:]),
    )


async def _keep_session(conn: Connection) -> None:
    """No reset query on release: asyncpg rolls back an open transaction and drops listeners itself first."""


async def create_pool(dsn: str, *, max_size: int = 10, min_size: int = 0, reset_sessions: bool = True) -> asyncpg.Pool:
    """``min_size=0``: connections open on first use, so a process starts (and reports itself unready)
    while Postgres is away instead of dying, and the worker loops' backoff rides out the outage.

    ``reset_sessions=False`` (the workers' pool): a released connection gets no ``RESET ALL; UNLISTEN *;
    ...`` query, one round trip saved per use (per claim and per batch of results, for the deliver
    worker). Right only where no statement leaves session state behind: the workers set nothing but
    ``SET LOCAL`` and transaction-scoped advisory locks, and LISTEN on connections of their own."""
    return await marked_pool(
        dsn,
        min_size=min_size,
        max_size=max_size,
        init=init_connection,
        reset=None if reset_sessions else _keep_session,
        command_timeout=60,
        max_inactive_connection_lifetime=300,
    )


async def connect(dsn: str) -> Connection:
    conn = await marked_connection(dsn)
    await init_connection(conn)
    return conn
