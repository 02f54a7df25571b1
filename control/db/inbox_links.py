"""The one stored fact about an endpoint's inbox links: the generation signed into them (``endpoints.
inbox_generation``, migration 0016). Links and cookies themselves are never stored."""

from __future__ import annotations

from control.db.connection import Connection

__all__ = ("generation", "rotate")


async def generation(conn: Connection, endpoint_id: str) -> int | None:
    """The endpoint's current generation; None when there is no such endpoint."""
    found: int | None = await conn.fetchval("SELECT inbox_generation FROM endpoints WHERE id = $1", endpoint_id)
    return found


async def rotate(conn: Connection, account_id: str, endpoint_id: str) -> int | None:
    """The next generation, which every link and cookie signed before no longer matches; None when the
    account has no such endpoint."""
    found: int | None = await conn.fetchval(
        "UPDATE endpoints SET inbox_generation = inbox_generation + 1 WHERE id = $1 AND account_id = $2 "
        "RETURNING inbox_generation",
        endpoint_id,
        account_id,
    )
    return found
