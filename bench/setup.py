"""Bench fixtures made through the same service functions the API uses."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from control.db import connect, create_pool
from control.db.context import Context, Principal
from control.records.endpoints import EndpointCreate
from control.service.accounts import create_account
from control.service.endpoints import create_endpoint as create
from control.support import edge_config
from shared import ids, redis_client
from shared.keys import Keys
from shared.settings import Settings

__all__ = ("BenchEndpoint", "create_endpoint", "create_endpoints_to_sink")


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


async def create_endpoints_to_sink(settings: Settings, count: int, url: str) -> list[BenchEndpoint]:
    """``count`` endpoints in one account, made through the service as the API makes them (their edge configs
    in Redis included), each with a destination at ``url`` and a forward-all rule to it. The routes are written
    in three statements for all of them (the rows the destinations API writes), where one by one they took
    longer than the run they prepare."""
    conn = await connect(settings.database_url)
    account_id, key = await create_account(conn, email=None, endpoint_quota=count)  # the default quota is 1,000
    pool = await create_pool(settings.database_url, max_size=8)
    redis = await redis_client.open_client(settings.redis_url)
    keys = Keys(settings.redis_prefix, settings.stream_shards, cluster=redis_client.is_cluster_client(redis))
    ctx = Context(settings=settings, pool=pool, redis=redis, keys=keys)
    principal = Principal(account_id=account_id, key_id="bench", kind="live")
    made = []
    try:
        for start in range(0, count, 50):
            made += await asyncio.gather(
                *(
                    create(ctx, principal, EndpointCreate(name=f"bench {i}"))
                    for i in range(start, min(count, start + 50))
                )
            )
        endpoint_ids = [e.id for e in made]
        destination_ids = [ids.new_id("dst") for _ in made]
        rule_ids = [ids.new_id("rule") for _ in made]
        await conn.execute(
            """INSERT INTO destinations (id, endpoint_id, name, url)
               SELECT d, e, 'sink', $3 FROM unnest($1::text[], $2::text[]) AS u(d, e)""",
            destination_ids,
            endpoint_ids,
            url,
        )
        await conn.execute(
            """INSERT INTO rules (id, endpoint_id, name, condition_tree)
               SELECT r, e, 'all', '{"op": "AND", "children": []}'::jsonb
                 FROM unnest($1::text[], $2::text[]) AS u(r, e)""",
            rule_ids,
            endpoint_ids,
        )
        await conn.execute(
            """INSERT INTO rule_destinations (rule_id, destination_id)
               SELECT r, d FROM unnest($1::text[], $2::text[]) AS u(r, d)""",
            rule_ids,
            destination_ids,
        )
        async with pool.acquire() as c:
            await edge_config.sync(ctx, c, endpoint_ids)  # the rules changed the endpoints' config versions
    finally:
        await conn.close()
        await redis.aclose()
        await pool.close()
    return [
        BenchEndpoint(id=e.id, token=e.ingest_url.rsplit("/", 1)[-1], api_key=key, account_id=account_id) for e in made
    ]
