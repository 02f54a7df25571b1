"""Temporary endpoints past their ``expires_at`` go, and anonymous accounts left without endpoints after them.

The edge answers 410 ``endpoint_expired`` from the expiry in its config, and every control route that names
the endpoint or an object of it does too (``control.service.endpoints.require_endpoint``; lists leave it out),
so the rows that wait here are already unreachable and nothing here is urgent: the sweep calls
:func:`expire_temporary` once a round, and an endpoint goes only ``expired_grace_s`` (a day) after it expired,
so a sender retrying for a while keeps learning that it expired (410) rather than that it never existed (404).
An expired endpoint is deleted with everything that hangs off it (events, deliveries, destinations, rules,
delivery tasks: the cascade of an endpoint delete); learned schemas belong to the account and stay while it
does. Its edge config becomes a tombstone, as after a delete, so the ingest URL then answers 404. An anonymous
account without endpoints (the last one expired, or was deleted over MCP) goes too, with its sessions, tokens
and schemas: nobody can reach it any more.

A crash between the delete and the tombstone leaves a config that still says "expired" (410); the sweep's
rebuild of the edge configs tombstones it within a round.
"""

from __future__ import annotations

from typing import NamedTuple

from control.db import accounts as db_accounts
from control.db import endpoints as db_endpoints
from control.db.context import Context
from control.support import edge_config

__all__ = ("Expired", "expire_temporary")

_BATCH = 200


class Expired(NamedTuple):
    endpoints: int
    accounts: int


async def expire_temporary(ctx: Context, *, batch: int = _BATCH) -> Expired:
    """Removes every expired temporary endpoint (in batches of ``batch``), then empty anonymous accounts."""
    endpoints = accounts = 0
    while True:
        async with ctx.pool.acquire() as conn:
            gone = await db_endpoints.delete_expired(conn, limit=batch, grace_s=ctx.settings.expired_grace_s)
        for deleted in gone:
            await edge_config.remove(ctx, deleted.ingest_token, deleted.tombstone_version)
        endpoints += len(gone)
        if len(gone) < batch:
            break
    while True:
        async with ctx.pool.acquire() as conn:
            removed = await db_accounts.delete_empty_anonymous(conn, limit=batch)
        accounts += removed
        if removed < batch:
            break
    return Expired(endpoints, accounts)
