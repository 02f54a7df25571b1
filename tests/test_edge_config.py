"""The edge's view of endpoints in Redis follows every change in Postgres, and the sweep heals it."""

from __future__ import annotations

import uuid

import pytest
import redis.asyncio as aioredis

from control.db import create_pool
from control.service import Context
from control.service import edge_config as edge_config_service
from control.workers.sweep import Sweep
from shared.keys import Keys
from shared.wire import EdgeEndpoint, decode_edge_endpoint
from tests.helpers import (  # noqa: F401 - redis_connection is the redis fixture
    create_endpoint,
    db,
    next_messages,
    redis_connection,
    subscribed,
    token_of,
)


async def edge_config(redis: aioredis.Redis, keys: Keys, token: str) -> EdgeEndpoint | None:
    raw = await redis.get(keys.endpoint_config(token))
    return None if raw is None else decode_edge_endpoint(raw)


async def test_create_patch_delete_keep_the_edge_config_in_step(client, account, settings, redis):
    keys = Keys(settings.redis_prefix)
    async with subscribed(redis, keys.config_channel) as pubsub:
        made = await create_endpoint(client, account.headers, environment="staging")
        token = token_of(made["ingest_url"])
        assert await next_messages(pubsub, 1) == [token]
        config = await edge_config(redis, keys, token)
        assert config is not None
        assert (config.endpoint_id, config.account_id, config.environment) == (made["id"], account.id, "staging")
        assert config.expires_at is None
        assert config.allowlist == ()
        assert config.auth.hmac_enabled is False

        resp = await client.patch(
            f"/v1/endpoints/{made['id']}", json={"environment": "development"}, headers=account.headers
        )
        assert resp.status_code == 200
        assert await next_messages(pubsub, 1) == [token]
        config = await edge_config(redis, keys, token)
        assert config is not None
        assert config.environment == "development"
        assert config.endpoint_id == made["id"]

        resp = await client.delete(f"/v1/endpoints/{made['id']}", headers=account.headers)
        assert resp.status_code == 200
        assert await next_messages(pubsub, 1) == [token]
        assert await redis.exists(keys.endpoint_config(token)) == 0


async def test_failed_writes_leave_the_edge_config_alone(client, account, other_account, settings, redis):
    keys = Keys(settings.redis_prefix)
    made = await create_endpoint(client, account.headers, external_ref="a")
    await create_endpoint(client, account.headers, external_ref="b")
    token = token_of(made["ingest_url"])
    before = await redis.get(keys.endpoint_config(token))
    assert before is not None

    assert (
        await client.post("/v1/endpoints", json={"name": "x", "external_ref": "a"}, headers=account.headers)
    ).status_code == 409
    assert (await client.delete(f"/v1/endpoints/{made['id']}", headers=other_account.headers)).status_code == 404
    assert (
        await client.patch(
            f"/v1/endpoints/{made['id']}", json={"environment": "sandbox"}, headers=other_account.headers
        )
    ).status_code == 404
    assert await redis.get(keys.endpoint_config(token)) == before
    assert len([k async for k in redis.scan_iter(match=keys.endpoint_config_pattern())]) == 2


async def test_sweep_rebuilds_lost_configs_and_removes_stale_ones_of_its_prefix_only(client, account, settings, redis):
    keys = Keys(settings.redis_prefix)
    a = await create_endpoint(client, account.headers, environment="sandbox")
    b = await create_endpoint(client, account.headers)
    token_a, token_b = token_of(a["ingest_url"]), token_of(b["ingest_url"])
    good_b = await redis.get(keys.endpoint_config(token_b))

    # Redis loses one config, holds a corrupt one and a stale one; another deployment shares the server.
    await redis.delete(keys.endpoint_config(token_a))
    await redis.set(keys.endpoint_config(token_b), b"garbage")
    await redis.set(keys.endpoint_config("gone0000000000000000000000"), b"{}")
    foreign = Keys(f"hyt:{uuid.uuid4().hex[:12]}:")
    foreign_key = foreign.endpoint_config("someone-elses-token-0000000")
    await redis.set(foreign_key, b"theirs")

    pool = await create_pool(settings.database_url, max_size=2)
    try:
        ctx = Context(settings=settings, pool=pool, redis=redis, keys=keys)
        async with subscribed(redis, keys.config_channel) as pubsub:
            assert await Sweep(ctx).step() == 0
            assert await next_messages(pubsub, 1) == ["*"]
    finally:
        await pool.close()
        theirs = await redis.get(foreign_key)
        await redis.delete(foreign_key)

    assert theirs == b"theirs", "the sweep touched another prefix's keys"
    restored = await edge_config(redis, keys, token_a)
    assert restored is not None
    assert (restored.endpoint_id, restored.environment, restored.account_id) == (a["id"], "sandbox", account.id)
    assert await redis.get(keys.endpoint_config(token_b)) == good_b
    assert await redis.exists(keys.endpoint_config("gone0000000000000000000000")) == 0
    remaining = sorted([k.decode() async for k in redis.scan_iter(match=keys.endpoint_config_pattern())])
    assert remaining == sorted([keys.endpoint_config(token_a), keys.endpoint_config(token_b)])


async def test_edge_config_carries_auth_config_allowlist_and_expiry(client, account, settings, redis, database_url):
    """What later issues set through their own routes reaches the edge on the next sync (here: the sweep)."""
    keys = Keys(settings.redis_prefix)
    made = await create_endpoint(client, account.headers)
    token = token_of(made["ingest_url"])
    async with db(database_url) as conn:
        await conn.execute(
            """UPDATE auth_configs SET hmac_enabled = true, secret = 'whsec_abcdefghijklmnop', header_name = 'x-sig',
                      tolerance_seconds = 60, on_failure = 'accept_log', log_blocked_ips = true
                WHERE endpoint_id = $1""",
            made["id"],
        )
        await conn.execute(
            """INSERT INTO allowlist_entries (id, endpoint_id, cidr, created_at)
               VALUES ('al_1', $1, '10.1.2.3', now() - interval '1 minute'), ('al_2', $1, '2001:db8::/32', now())""",
            made["id"],
        )
        expires = await conn.fetchval(
            "UPDATE endpoints SET expires_at = now() + interval '3 days' WHERE id = $1 RETURNING expires_at", made["id"]
        )
    pool = await create_pool(settings.database_url, max_size=2)
    try:
        await Sweep(Context(settings=settings, pool=pool, redis=redis, keys=keys)).step()
    finally:
        await pool.close()
    config = await edge_config(redis, keys, token)
    assert config is not None
    auth = config.auth
    assert (auth.hmac_enabled, auth.secret, auth.header_name) == (True, "whsec_abcdefghijklmnop", "x-sig")
    assert (auth.tolerance_seconds, auth.on_failure, auth.log_blocked_ips) == (60, "accept_log", True)
    assert config.allowlist == ("10.1.2.3/32", "2001:db8::/32")
    assert config.expires_at == pytest.approx(expires.timestamp())


async def test_sweep_never_removes_the_config_of_an_endpoint_created_while_it_runs(
    client, account, settings, redis, monkeypatch
):
    """Control creates an endpoint (row committed, config written) at any moment of a sweep: its config stays."""
    keys = Keys(settings.redis_prefix)
    await create_endpoint(client, account.headers)
    newcomer: dict[str, str] = {}
    real_edge_rows = edge_config_service.db_endpoints.edge_rows
    real_scan_iter = redis.scan_iter

    async def create_now() -> None:
        if not newcomer:
            newcomer.update(await create_endpoint(client, account.headers, name="created mid-sweep"))

    async def edge_rows_then_create(conn, endpoint_ids=None):
        rows = await real_edge_rows(conn, endpoint_ids)
        if endpoint_ids is None:  # the sweep's read of every endpoint, not the create's own sync
            await create_now()  # after Postgres was read...
        return rows

    async def scan_then_create(*args, **kwargs):
        async for key in real_scan_iter(*args, **kwargs):
            yield key
        await create_now()  # ...or after Redis was scanned

    pool = await create_pool(settings.database_url, max_size=2)
    try:
        ctx = Context(settings=settings, pool=pool, redis=redis, keys=keys)
        for patch in (
            (edge_config_service.db_endpoints, "edge_rows", edge_rows_then_create),
            (redis, "scan_iter", scan_then_create),
        ):
            newcomer.clear()
            with monkeypatch.context() as m:
                m.setattr(*patch)
                await Sweep(ctx).step()
            assert newcomer, "the interleaving did not happen"
            config = await edge_config(redis, keys, token_of(newcomer["ingest_url"]))
            assert config is not None, f"the sweep removed a live endpoint's config ({patch[1]})"
            assert config.endpoint_id == newcomer["id"]
    finally:
        await pool.close()


async def test_a_delete_between_the_read_and_the_write_never_brings_the_config_back(
    client, account, settings, redis, monkeypatch
):
    """Control deletes an endpoint after a sweep (or a PATCH's sync) read it and before that write landed:
    the edge must not serve the endpoint again (it would acknowledge events the flush drops)."""
    keys = Keys(settings.redis_prefix)
    real_edge_rows = edge_config_service.db_endpoints.edge_rows
    pool = await create_pool(settings.database_url, max_size=2)
    try:
        ctx = Context(settings=settings, pool=pool, redis=redis, keys=keys)
        for writer in ("sweep", "sync"):
            made = await create_endpoint(client, account.headers, name=f"deleted during the {writer}")
            deleted: list[str] = []

            async def edge_rows_then_delete(conn, endpoint_ids=None, made=made, deleted=deleted):
                rows = await real_edge_rows(conn, endpoint_ids)
                if not deleted:  # what DELETE /v1/endpoints/{id} does: commit, then remove the config
                    async with pool.acquire() as other:
                        token = await edge_config_service.db_endpoints.delete(other, account.id, made["id"])
                    await edge_config_service.remove(ctx, token)
                    deleted.append(token)
                return rows

            with monkeypatch.context() as m:
                m.setattr(edge_config_service.db_endpoints, "edge_rows", edge_rows_then_delete)
                if writer == "sweep":
                    await Sweep(ctx).step()
                else:  # what every PATCH does after its commit
                    async with pool.acquire() as conn:
                        await edge_config_service.sync(ctx, conn, [made["id"]])
            assert deleted == [token_of(made["ingest_url"])], "the interleaving did not happen"
            assert await edge_config(redis, keys, token_of(made["ingest_url"])) is None, writer
    finally:
        await pool.close()
