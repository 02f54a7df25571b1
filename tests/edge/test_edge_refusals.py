"""The edge counts the requests it refuses (a rejected signature by reason, a source not on
the allowlist) per endpoint, in process, and adds the counts to Redis about once a second and at shutdown;
a Redis that is away keeps them for the next round. The edge app runs in this process against the test
Redis (as in ``test_edge_ingest.py``); the stats that read these counts: ``test_stats_refused.py``.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from typing import Any

import pytest
import redis.asyncio as aioredis
import stripe
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError

from edge.refusals import Refusals
from shared import redis_client
from shared.ids import ingest_token, new_id
from shared.keys import Keys
from shared.refusals import expires_at, field
from shared.settings import Settings, load_settings
from shared.wire import EdgeAuth, EdgeEndpoint, encode
from tests.edge.support import http, started_edge
from tests.helpers import (
    assert_error,
    redis_connection,  # noqa: F401 - the `redis` fixture
    wait_for,
)
from tests.redis_relay import RedisRelay
from tests.stack import free_port

SECRET = "whsec_the_providers_own_secret"
BODY = b'{"id":"evt_1","type":"invoice.paid"}'


async def put_endpoint(
    redis: aioredis.Redis, settings: Settings, allowlist: tuple[str, ...] = (), **auth: Any
) -> tuple[str, str]:
    """A token the edge serves and its endpoint id: the config written where control writes it, in its format."""
    token, endpoint_id = ingest_token(), new_id("ep")
    config = EdgeEndpoint(
        endpoint_id=endpoint_id,
        account_id=new_id("acct"),
        environment="production",
        auth=EdgeAuth(**auth),
        allowlist=allowlist,
    )
    await redis.set(Keys(settings.redis_prefix).endpoint_config(token), encode(config))
    return token, endpoint_id


def signed(secret: str, timestamp: int | None = None) -> dict[str, str]:
    header = stripe.WebhookSignature.generate_signature_header(BODY.decode(), secret, timestamp=timestamp)
    return {"stripe-signature": header}


async def counted(redis: aioredis.Redis, settings: Settings, endpoint_id: str) -> dict[str, int]:
    """Every count in the endpoint's hashes of this hour and the one before, by reason."""
    keys, hour = Keys(settings.redis_prefix), int(time.time()) // 3600
    out: dict[str, int] = {}
    for h in (hour - 1, hour):
        for name, value in (await redis.hgetall(keys.edge_refusals(endpoint_id, h))).items():
            reason = name.decode().partition(":")[2]
            out[reason] = out.get(reason, 0) + int(value)
    return out


async def test_refused_requests_are_counted_by_endpoint_and_reason(redis, edge_settings: Settings) -> None:
    elsewhere = ("192.0.2.0/24",)  # the test client's address (127.0.0.1) is not on the list
    checked, checked_id = await put_endpoint(redis, edge_settings, hmac_enabled=True, secret=SECRET)
    logged, logged_id = await put_endpoint(
        redis, edge_settings, hmac_enabled=True, secret=SECRET, on_failure="accept_log"
    )
    blocked, blocked_id = await put_endpoint(redis, edge_settings, elsewhere)
    kept, kept_id = await put_endpoint(redis, edge_settings, elsewhere, log_blocked_ips=True)

    async with started_edge(edge_settings) as app, http(app) as client:
        assert (await client.post(f"/h/{checked}", content=BODY, headers=signed(SECRET))).status_code == 200
        for _ in range(2):
            assert_error(await client.post(f"/h/{checked}", content=BODY), 401, "signature_invalid")
        wrong = await client.post(f"/h/{checked}", content=BODY, headers=signed("whsec_someone_elses_secret"))
        assert_error(wrong, 401, "signature_invalid")
        late = await client.post(f"/h/{checked}", content=BODY, headers=signed(SECRET, int(time.time()) - 3600))
        assert_error(late, 401, "signature_invalid")
        assert (await client.post(f"/h/{logged}", content=BODY)).status_code == 200  # stored as failed, not refused
        for _ in range(3):
            assert_error(await client.post(f"/h/{blocked}", content=BODY), 403, "ip_not_allowed")
        assert_error(await client.post(f"/h/{kept}", content=BODY), 403, "ip_not_allowed")  # stored and refused

        # the lifespan's task writes them within about a second
        async def written() -> bool:
            return await counted(redis, edge_settings, blocked_id) == {"ip_not_allowed": 3}

        await wait_for(written, timeout=10)
        assert await counted(redis, edge_settings, checked_id) == {
            "missing_header": 2,
            "signature_mismatch": 1,
            "timestamp_out_of_tolerance": 1,
        }
        assert await counted(redis, edge_settings, kept_id) == {"ip_not_allowed": 1}
        assert await counted(redis, edge_settings, logged_id) == {}
        assert app.refusals.counts == {}
    # each hash lives until KEEP_S after its hour (this hour's, or the last one's if the hour just turned)
    now, found = int(time.time()), 0
    for hour in (now // 3600 - 1, now // 3600):
        ttl = await redis.ttl(Keys(edge_settings.redis_prefix).edge_refusals(blocked_id, hour))
        assert ttl == -2 or abs(ttl - (expires_at(hour) - now)) <= 2, (hour, ttl)
        found += ttl > 0
    assert found


async def test_shutdown_writes_what_the_last_round_left(redis, edge_settings: Settings) -> None:
    token, endpoint_id = await put_endpoint(redis, edge_settings, hmac_enabled=True, secret=SECRET)
    async with started_edge(edge_settings) as app, http(app) as client:
        app.refusals._task.cancel()  # no round runs: only the shutdown can write it
        assert_error(await client.post(f"/h/{token}", content=BODY), 401, "signature_invalid")
        assert app.refusals.counts
    assert await counted(redis, edge_settings, endpoint_id) == {"missing_header": 1}


async def test_a_round_cut_short_by_shutdown_is_counted_once(redis, edge_settings: Settings) -> None:
    """Shutdown while a round's pipeline is applied in Redis and its reply still on the way: the counts are
    there once. The edge used to cancel that round, put its counts back and write them again at shutdown
    (an endpoint's refusals counted twice in a suite run)."""
    keys = Keys(edge_settings.redis_prefix)
    refusals = Refusals(keys)
    endpoint_id = new_id("ep")
    for _ in range(3):
        refusals.add(endpoint_id, "missing_header", time.time())
    async with RedisRelay(edge_settings.redis_url) as relay:
        client = aioredis.Redis.from_url(relay.url)
        try:
            assert await client.ping()  # connected before replies are held: the pipeline is one round trip
            relay.reply_delay_s = 0.5
            refusals.start(client, every_s=0.01)

            async def applied() -> bool:  # in Redis, the reply not yet back to the edge
                return await counted(redis, edge_settings, endpoint_id) == {"missing_header": 3}

            await wait_for(applied, timeout=5)
            await refusals.close(client)
        finally:
            await client.aclose()
    assert await counted(redis, edge_settings, endpoint_id) == {"missing_header": 3}
    assert refusals.counts == {}


async def test_shutdown_gives_up_on_a_redis_slower_than_its_limit(redis, edge_settings: Settings, caplog) -> None:
    """Redis answers a round later than shutdown waits (``close``'s limit): the edge stops on time, and says the
    counts of that round may be lost, rather than hanging its shutdown on Redis."""
    caplog.set_level(logging.WARNING, logger="hookyard.edge")
    refusals = Refusals(Keys(edge_settings.redis_prefix))
    refusals.add(new_id("ep"), "missing_header", time.time())
    async with RedisRelay(edge_settings.redis_url) as relay:
        client = aioredis.Redis.from_url(relay.url)
        try:
            assert await client.ping()
            relay.reply_delay_s = 2.0  # past the limit below
            refusals.start(client, every_s=0.01)
            await asyncio.sleep(0.1)  # the round is out, its reply held
            started = time.monotonic()
            await refusals.close(client, timeout_s=0.3)
            took = time.monotonic() - started
        finally:
            relay.reply_delay_s = 0.0
            await client.aclose()
    assert took < 1.0
    assert "refusal counts lost at shutdown" in caplog.text


async def test_counts_are_kept_while_redis_is_away(redis, edge_settings: Settings) -> None:
    keys = Keys(edge_settings.redis_prefix)
    refusals = Refusals(keys)
    endpoint_id, now = new_id("ep"), time.time()
    refusals.add(endpoint_id, "signature_mismatch", now)
    refusals.add(endpoint_id, "signature_mismatch", now)
    refusals.add(endpoint_id, "ip_not_allowed", now - 26 * 3600)  # older than any window: dropped on failure
    # No retries: each failed round is the one refused connection, not redis-py's backed-off retries (~3 s each).
    away = aioredis.Redis(host="127.0.0.1", port=free_port(), socket_connect_timeout=1, retry=Retry(NoBackoff(), 0))
    try:
        for _ in range(2):  # twice: what one failed round put back, the next failed round keeps
            with pytest.raises(RedisConnectionError):
                await refusals.flush(away)
    finally:
        await away.aclose()
    minute = int(now) // 60
    assert refusals.counts == {(endpoint_id, "signature_mismatch", minute): 2}
    assert await refusals.flush(redis) == 2
    assert refusals.counts == {}
    stored = await redis.hgetall(keys.edge_refusals(endpoint_id, minute // 60))
    assert stored == {field(minute, "signature_mismatch").encode(): b"2"}


async def test_on_a_redis_cluster(redis_cluster: Any) -> None:
    """The edge's client is a cluster client there: the counts go through its pipeline, to the slot of the
    endpoint's tag, and read back from the cluster."""
    settings = load_settings({}, redis_url=redis_cluster.url, redis_prefix=f"hyt:{uuid.uuid4().hex[:12]}:")
    client = await redis_client.open_client(redis_cluster.url)
    try:
        token, endpoint_id = await put_endpoint(client, settings, hmac_enabled=True, secret=SECRET)
        async with started_edge(settings) as app, http(app) as sender:
            for _ in range(3):
                assert_error(await sender.post(f"/h/{token}", content=BODY), 401, "signature_invalid")

            async def written() -> bool:
                return await counted(client, settings, endpoint_id) == {"missing_header": 3}

            await wait_for(written, timeout=10)
    finally:
        found = [k async for k in client.scan_iter(match=settings.redis_prefix + "*", count=1000)]
        for key in found:
            await client.delete(key)
        await client.aclose()
