"""Bench fixtures made through the same service functions the API uses."""

from __future__ import annotations

from dataclasses import dataclass

from control.db import connect, create_pool
from control.records.endpoints import EndpointCreate
from control.service import Context, Principal, edge_config
from control.service.accounts import create_account
from control.service.endpoints import create_endpoint as create
from shared import redis_client
from shared.keys import Keys
from shared.settings import Settings

__all__ = ("BenchEndpoint", "create_endpoint")


@dataclass
class BenchEndpoint:
    id: str
    token: str
    api_key: str
    account_id: str


async def create_endpoint(
    settings: Settings,
    *,
    secret: str | None = None,
    tolerance_s: int = 300,
    account: tuple[str, str] | None = None,
) -> BenchEndpoint:
    """An endpoint (in ``account`` = (account_id, api_key), else in a new account), verifying with
    ``secret`` when given."""
    if account is None:
        conn = await connect(settings.database_url)
        account = await create_account(conn, email=None)
        await conn.close()
    account_id, key = account
    pool = await create_pool(settings.database_url, max_size=2)
    redis = await redis_client.open_client(settings.redis_url)  # a cluster client on a Redis Cluster
    keys = Keys(settings.redis_prefix, settings.stream_shards, cluster=redis_client.is_cluster_client(redis))
    ctx = Context(settings=settings, pool=pool, redis=redis, keys=keys)
    try:
        created = await create(
            ctx, Principal(account_id=account_id, key_id="bench", kind="live"), EndpointCreate(name="bench")
        )
        if secret is not None:
            async with pool.acquire() as c:
                await c.execute(
                    """UPDATE auth_configs SET hmac_enabled = true, secret = $2, tolerance_seconds = $3
                        WHERE endpoint_id = $1""",
                    created.id,
                    secret,
                    tolerance_s,
                )
                await edge_config.sync(ctx, c, [created.id])
    finally:
        await redis.aclose()
        await pool.close()
    return BenchEndpoint(id=created.id, token=created.ingest_url.rsplit("/", 1)[-1], api_key=key, account_id=account_id)
