"""The edge's view of endpoints in Redis follows every change in Postgres, never goes back to an older
config, keeps deleted endpoints deleted (tombstones), and the sweep heals it."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import msgspec
import pytest
import redis.asyncio as aioredis

from control.db import create_pool
from control.db.context import Context
from control.support import edge_config as edge_config_service
from control.workers.sweep.loop import Sweep
from shared.keys import CONFIGS_COMPLETE, Keys
from shared.settings import Settings
from shared.wire import EdgeEndpoint, decode_config_notice, decode_edge_endpoint, encode
from tests.helpers import (  # noqa: F401 - redis_connection is the redis fixture
    create_endpoint,
    db,
    next_messages,
    redis_connection,
    subscribed,
    token_of,
    wait_for,
)


@pytest.fixture
def settings(settings: Settings) -> Settings:
    # The test's subscriber stands in for an edge but does not confirm: control must not wait for it.
    return msgspec.structs.replace(settings, config_ack_timeout_s=0.0)


@pytest.fixture
async def sweep_ctx(settings: Settings, redis: aioredis.Redis):
    pool = await create_pool(settings.database_url, max_size=2)
    try:
        yield Context(settings=settings, pool=pool, redis=redis, keys=Keys(settings.redis_prefix))
    finally:
        await pool.close()


async def edge_config(redis: aioredis.Redis, keys: Keys, token: str) -> EdgeEndpoint | None:
    raw = await redis.get(keys.endpoint_config(token))
    return None if raw is None else decode_edge_endpoint(raw)


async def notices(pubsub: Any, count: int) -> list[tuple[str, ...]]:
    return [decode_config_notice(m.encode()).tokens for m in await next_messages(pubsub, count)]


async def test_create_patch_delete_keep_the_edge_config_in_step(client, account, settings, redis):
    keys = Keys(settings.redis_prefix)
    async with subscribed(redis, keys.config_channel) as pubsub:
        made = await create_endpoint(client, account.headers, environment="staging")
        token = token_of(made["ingest_url"])
        assert await notices(pubsub, 1) == [(token,)]
        config = await edge_config(redis, keys, token)
        assert config is not None
        assert (config.endpoint_id, config.account_id, config.environment) == (made["id"], account.id, "staging")
        assert config.expires_at is None
        assert config.allowlist == ()
        assert config.auth.hmac_enabled is False
        assert not config.deleted
        created_version = config.version

        resp = await client.patch(
            f"/v1/endpoints/{made['id']}", json={"environment": "development"}, headers=account.headers
        )
        assert resp.status_code == 200
        assert await notices(pubsub, 1) == [(token,)]
        config = await edge_config(redis, keys, token)
        assert config is not None
        assert config.environment == "development"
        assert config.endpoint_id == made["id"]
        assert config.version > created_version

        resp = await client.delete(f"/v1/endpoints/{made['id']}", headers=account.headers)
        assert resp.status_code == 200
        assert await notices(pubsub, 1) == [(token,)]
        tombstone = await edge_config(redis, keys, token)
        assert tombstone is not None
        assert tombstone.deleted
        assert tombstone.version > config.version
        ttl = await redis.pttl(keys.endpoint_config(token))
        assert 0 < ttl <= edge_config_service.TOMBSTONE_TTL_MS


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


# -- the compare-and-set ------------------------------------------------------------------------------


def _config(version: int, environment: str = "production", **kw: Any) -> EdgeEndpoint:
    return EdgeEndpoint(endpoint_id="ep_x", account_id="acct_x", environment=environment, version=version, **kw)


async def test_the_write_never_replaces_a_newer_config(settings, redis, sweep_ctx):
    keys = sweep_ctx.keys
    token = "cas0000000000000000000000"
    write = edge_config_service.write
    assert await write(sweep_ctx, [(token, _config(5, "staging"))]) == [token]
    assert await write(sweep_ctx, [(token, _config(4, "sandbox"))]) == []  # older: refused
    assert await write(sweep_ctx, [(token, _config(5, "staging"))]) == []  # this very one: nothing to do
    assert (await edge_config(redis, keys, token)).environment == "staging"
    # The same version in another encoding (a deploy that added a field) is written.
    assert await write(sweep_ctx, [(token, _config(5, "staging", allowlist=("10.0.0.0/8",)))]) == [token]
    assert await write(sweep_ctx, [(token, _config(6, "development"))]) == [token]
    assert (await edge_config(redis, keys, token)).environment == "development"
    assert await redis.pttl(keys.endpoint_config(token)) == -1  # a live config does not expire

    tombstone = EdgeEndpoint(endpoint_id="", account_id="", environment="", version=9, deleted=True)
    assert await write(sweep_ctx, [(token, tombstone)]) == [token]
    ttl = await redis.pttl(keys.endpoint_config(token))
    assert await write(sweep_ctx, [(token, _config(8))]) == []  # a read from before the delete
    later = msgspec.structs.replace(tombstone, version=12)
    await redis.pexpire(keys.endpoint_config(token), 1000)
    assert await write(sweep_ctx, [(token, later)]) == []  # a tombstone is not renewed: it expires
    assert 0 < await redis.pttl(keys.endpoint_config(token)) <= 1000 < ttl
    assert (await edge_config(redis, keys, token)).deleted

    # Unreadable values are replaced, and a record from before versions existed counts as version 0.
    for stored in (b"garbage", b"[1]", encode(msgspec.structs.replace(_config(0), version=0))):
        await redis.set(keys.endpoint_config(token), stored)
        assert await write(sweep_ctx, [(token, _config(1))]) == [token]


# -- the sweep ----------------------------------------------------------------------------------------


async def test_sweep_rebuilds_lost_configs_and_buries_stale_ones_of_its_prefix_only(
    client, account, settings, redis, sweep_ctx
):
    keys = sweep_ctx.keys
    a = await create_endpoint(client, account.headers, environment="sandbox")
    b = await create_endpoint(client, account.headers)
    token_a, token_b = token_of(a["ingest_url"]), token_of(b["ingest_url"])
    good_b = await redis.get(keys.endpoint_config(token_b))

    # Redis loses one config, holds a corrupt one and a stale one; another deployment shares the server.
    gone = "gone0000000000000000000000"
    await redis.delete(keys.endpoint_config(token_a))
    await redis.set(keys.endpoint_config(token_b), b"garbage")
    await redis.set(keys.endpoint_config(gone), encode(_config(1)))
    foreign = Keys(f"hyt:{uuid.uuid4().hex[:12]}:")
    foreign_key = foreign.endpoint_config("someone-elses-token-0000000")
    await redis.set(foreign_key, b"theirs")
    try:
        async with subscribed(redis, keys.config_channel) as pubsub:
            assert await Sweep(sweep_ctx).step() == 0
            (announced,) = await notices(pubsub, 1)
            assert sorted(announced) == sorted([token_a, token_b, gone])
            # A second round finds everything as it should be: it writes and announces nothing. The sentinel is
            # published once that round returned, so a notice of the round would have arrived before it.
            await Sweep(sweep_ctx).step()
            await redis.publish(keys.config_channel, "sentinel")
            assert await next_messages(pubsub, 1) == ["sentinel"]
    finally:
        theirs = await redis.get(foreign_key)
        await redis.delete(foreign_key)

    assert theirs == b"theirs", "the sweep touched another prefix's keys"
    restored = await edge_config(redis, keys, token_a)
    assert restored is not None
    assert (restored.endpoint_id, restored.environment, restored.account_id) == (a["id"], "sandbox", account.id)
    assert await redis.get(keys.endpoint_config(token_b)) == good_b
    buried = await edge_config(redis, keys, gone)
    assert buried is not None
    assert buried.deleted
    assert 0 < await redis.pttl(keys.endpoint_config(gone)) <= edge_config_service.TOMBSTONE_TTL_MS


async def test_edge_config_carries_auth_config_allowlist_and_expiry(client, account, redis, database_url, sweep_ctx):
    """Changes made in Postgres by any route bump the version, so the next sync (here: the sweep) writes them."""
    keys = sweep_ctx.keys
    made = await create_endpoint(client, account.headers)
    token = token_of(made["ingest_url"])
    before = await edge_config(redis, keys, token)
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
    await Sweep(sweep_ctx).step()
    config = await edge_config(redis, keys, token)
    assert config is not None
    assert config.version > before.version
    auth = config.auth
    assert (auth.hmac_enabled, auth.secret, auth.header_name) == (True, "whsec_abcdefghijklmnop", "x-sig")
    assert (auth.tolerance_seconds, auth.on_failure, auth.log_blocked_ips) == (60, "accept_log", True)
    assert config.allowlist == ("10.1.2.3/32", "2001:db8::/32")
    assert config.expires_at == pytest.approx(expires.timestamp())


async def test_sweep_notices_lost_data_at_its_next_check_not_its_next_round(client, account, redis, sweep_ctx):
    keys = sweep_ctx.keys
    made = await create_endpoint(client, account.headers)
    token = token_of(made["ingest_url"])
    sweep = Sweep(sweep_ctx, interval_s=3600)
    await sweep.step()  # the round at start
    assert await redis.get(keys.config_marker) == CONFIGS_COMPLETE
    await redis.delete(keys.endpoint_config(token))
    await sweep.step()  # marker still there: a check, no rebuild
    assert await edge_config(redis, keys, token) is None
    await redis.delete(keys.endpoint_config(token), keys.config_marker)  # what a Redis restart does
    await sweep.step()
    assert (await edge_config(redis, keys, token)).endpoint_id == made["id"]
    assert await redis.get(keys.config_marker) == CONFIGS_COMPLETE
    # A rebuild that never finished (its worker died: its token stays) and the marker of an older version are
    # not complete either: the next check rebuilds.
    for marker in (b"rebuilding:of-a-dead-worker", b"1"):
        await redis.set(keys.config_marker, marker)
        await redis.delete(keys.endpoint_config(token))
        await sweep.step()
        assert (await edge_config(redis, keys, token)).endpoint_id == made["id"], marker
        assert await redis.get(keys.config_marker) == CONFIGS_COMPLETE, marker


@pytest.mark.parametrize("meanwhile", ["lost", "another rebuild"])
async def test_a_rebuild_overtaken_by_a_loss_or_another_rebuild_does_not_mark_the_configs_whole(
    client, account, redis, sweep_ctx, meanwhile
) -> None:
    """The marker turns complete only if it still holds this rebuild's token when its writes are done: had
    Redis lost its data meanwhile, some of them may be gone with it; had another rebuild begun, that one
    completes it. The rebuild is held at its read of Postgres (a lock on ``endpoints``) while that happens."""
    keys = sweep_ctx.keys
    await create_endpoint(client, account.headers)
    async with db(sweep_ctx.settings.database_url) as conn:
        async with conn.transaction():
            await conn.execute("LOCK TABLE endpoints IN ACCESS EXCLUSIVE MODE")
            rebuilding = asyncio.create_task(edge_config_service.rebuild_all(sweep_ctx))
            ours = await wait_for(lambda: _rebuild_token(redis, keys))
            if meanwhile == "lost":
                await redis.delete(keys.config_marker)
            else:
                await redis.set(keys.config_marker, b"rebuilding:another")
        await rebuilding
    assert ours.startswith(b"rebuilding:")
    assert await redis.get(keys.config_marker) == (None if meanwhile == "lost" else b"rebuilding:another")
    await edge_config_service.rebuild_all(sweep_ctx)  # a rebuild nobody overtakes
    assert await redis.get(keys.config_marker) == CONFIGS_COMPLETE


async def _rebuild_token(redis: aioredis.Redis, keys: Keys) -> bytes | None:
    marker = await redis.get(keys.config_marker)
    return marker if marker and marker.startswith(b"rebuilding:") else None


async def test_sweep_never_buries_the_config_of_an_endpoint_created_while_it_runs(
    client, account, redis, monkeypatch, sweep_ctx
):
    """Control creates an endpoint (row committed, config written) at any moment of a sweep: its config stays."""
    keys = sweep_ctx.keys
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

    for patch in (
        (edge_config_service.db_endpoints, "edge_rows", edge_rows_then_create),
        (redis, "scan_iter", scan_then_create),
    ):
        newcomer.clear()
        with monkeypatch.context() as m:
            m.setattr(*patch)
            await Sweep(sweep_ctx).step()
        assert newcomer, "the interleaving did not happen"
        config = await edge_config(redis, keys, token_of(newcomer["ingest_url"]))
        assert config is not None, f"the sweep removed a live endpoint's config ({patch[1]})"
        assert not config.deleted, patch[1]
        assert config.endpoint_id == newcomer["id"]


async def test_a_delete_between_the_read_and_the_write_never_brings_the_config_back(
    client, account, redis, monkeypatch, sweep_ctx
):
    """Control deletes an endpoint after a sweep (or a PATCH's sync) read it and before that write landed:
    the edge must not serve the endpoint again (it would acknowledge events the flush drops). The stale write
    meets the delete's tombstone, whose version is above anything read before the delete."""
    keys = sweep_ctx.keys
    real_edge_rows = edge_config_service.db_endpoints.edge_rows
    for writer in ("sweep", "sync"):
        made = await create_endpoint(client, account.headers, name=f"deleted during the {writer}")
        deleted: list[str] = []

        async def edge_rows_then_delete(conn, endpoint_ids=None, made=made, deleted=deleted):
            rows = await real_edge_rows(conn, endpoint_ids)
            if not deleted:  # what DELETE /v1/endpoints/{id} does: commit, then write the tombstone
                async with sweep_ctx.pool.acquire() as other:
                    gone = await edge_config_service.db_endpoints.delete(other, account.id, made["id"])
                await edge_config_service.remove(sweep_ctx, gone.ingest_token, gone.tombstone_version)
                deleted.append(gone.ingest_token)
            return rows

        with monkeypatch.context() as m:
            m.setattr(edge_config_service.db_endpoints, "edge_rows", edge_rows_then_delete)
            if writer == "sweep":
                await Sweep(sweep_ctx).step()
            else:  # what every PATCH does after its commit
                async with sweep_ctx.pool.acquire() as conn:
                    await edge_config_service.sync(sweep_ctx, conn, [made["id"]])
        assert deleted == [token_of(made["ingest_url"])], "the interleaving did not happen"
        config = await edge_config(redis, keys, token_of(made["ingest_url"]))
        assert config is not None
        assert config.deleted, writer
