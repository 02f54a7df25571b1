"""The deployment's own secret keys (table ``instance_keys``): read, or made once by the first caller.

The values are stored as the service layer hands them over: sealed (``control.support.sealing``), or clear
base64 on a deployment without encryption keys. This module neither seals nor opens them."""

from __future__ import annotations

from control.db.connection import Connection

__all__ = ("get_or_create",)


async def get_or_create(conn: Connection, name: str, candidate: str) -> str:
    """The stored key called ``name``; ``candidate`` becomes it when there is none yet.

    Two statements, not one: when two processes race, the loser's INSERT waits for the winner's commit and
    does nothing, and only a new statement's snapshot sees the winner's row."""
    await conn.execute(
        "INSERT INTO instance_keys (name, secret) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING", name, candidate
    )
    found: str = await conn.fetchval("SELECT secret FROM instance_keys WHERE name = $1", name)
    return found
