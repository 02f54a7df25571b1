"""Keeps the edge's view of every endpoint (Redis) in step with Postgres, the source of truth.

Control calls ``sync`` after committing a change and ``remove`` after a delete; each also publishes the
token on the config channel so every edge node drops its cached copy at once. ``resync_all`` rebuilds the
whole picture (at start and from the sweep), so a Redis that lost its data, or a write lost between the
commit and Redis, heals within one sweep interval.
"""

from __future__ import annotations

import asyncpg

from control.db import endpoints as db_endpoints
from control.service import Context
from shared.wire import EdgeAuth, EdgeEndpoint, encode

__all__ = ("remove", "resync_all", "sync")


def _record(row: asyncpg.Record) -> EdgeEndpoint:
    return EdgeEndpoint(
        endpoint_id=row["id"],
        account_id=row["account_id"],
        environment=row["environment"],
        expires_at=row["expires_at"].timestamp() if row["expires_at"] else None,
        auth=EdgeAuth(
            hmac_enabled=row["hmac_enabled"],
            # The provider's own secret when set; else the platform secret, which verifies what hookyard signed.
            secret=row["secret"] or row["signing_secret"],
            header_name=row["header_name"],
            tolerance_seconds=row["tolerance_seconds"],
            on_failure=row["on_failure"],
            log_blocked_ips=row["log_blocked_ips"],
        ),
        allowlist=tuple(row["allowlist"]),
    )


async def sync(ctx: Context, conn: asyncpg.Connection, endpoint_ids: list[str]) -> None:
    rows = await db_endpoints.edge_rows(conn, endpoint_ids)
    if not rows:
        return
    async with ctx.redis.pipeline(transaction=False) as pipe:
        for row in rows:
            pipe.set(ctx.keys.endpoint_config(row["ingest_token"]), encode(_record(row)))
            pipe.publish(ctx.keys.config_channel, row["ingest_token"])
        await pipe.execute()
    await _drop_vanished(ctx, conn, [row["ingest_token"] for row in rows])


async def _drop_vanished(ctx: Context, conn: asyncpg.Connection, written: list[str]) -> int:
    """Deletes the configs just written whose endpoint was deleted meanwhile.

    A delete commits, then removes the config. Had that removal run between our read and our write, the
    write would bring a deleted endpoint back to the edge, which would acknowledge events the flush then
    drops. Reading again after the write closes that window: a delete that commits before this read is
    undone here, and one that commits after it removes the config itself.
    """
    if not written:
        return 0
    vanished = set(written) - await db_endpoints.existing_tokens(conn, written)
    if vanished:
        async with ctx.redis.pipeline(transaction=False) as pipe:
            for token in vanished:
                pipe.delete(ctx.keys.endpoint_config(token))
                pipe.publish(ctx.keys.config_channel, token)
            await pipe.execute()
    return len(vanished)


async def remove(ctx: Context, ingest_token: str) -> None:
    async with ctx.redis.pipeline(transaction=False) as pipe:
        pipe.delete(ctx.keys.endpoint_config(ingest_token))
        pipe.publish(ctx.keys.config_channel, ingest_token)
        await pipe.execute()


async def resync_all(ctx: Context) -> tuple[int, int]:
    """Writes every endpoint's config and deletes configs of endpoints that no longer exist.

    Returns (written, removed). Tokens whose value did not change are rewritten too: SET is idempotent
    and comparing would cost the same round trip.
    """
    # Redis is scanned before Postgres is read: a config written after the scan (an endpoint created
    # meanwhile) is then never mistaken for stale, while a scanned key whose endpoint is gone by the read is.
    seen = [key async for key in ctx.redis.scan_iter(match=ctx.keys.endpoint_config_pattern(), count=1000)]
    async with ctx.pool.acquire() as conn:
        rows = await db_endpoints.edge_rows(conn)
        wanted = {ctx.keys.endpoint_config(row["ingest_token"]): encode(_record(row)) for row in rows}
        stale = [k for k in seen if (k.decode() if isinstance(k, bytes) else k) not in wanted]
        async with ctx.redis.pipeline(transaction=False) as pipe:
            for key, value in wanted.items():
                pipe.set(key, value)
            if stale:
                pipe.delete(*stale)
            pipe.publish(ctx.keys.config_channel, "*")
            await pipe.execute()
        vanished = await _drop_vanished(ctx, conn, [row["ingest_token"] for row in rows])
    return len(wanted) - vanished, len(stale) + vanished
