"""The shared state of delivery shaping on a real three-master Redis Cluster (``tests/redis_cluster.py``):
the rate limit and the pause (one key per destination, tagged, so the limiter's script touches one slot),
and the stream watermarks FIFO claims wait for, read from every shard's node. (The deliver workers' use of
them is tested on one Redis: tests/delivery_shaping/test_rate_limit.py and test_fifo.py.)"""

from __future__ import annotations

import pytest

from bench.redis_cluster import ClusterNodes
from control.db.context import Context
from control.db.ordering import entry_position
from control.delivery import ordering, throttle
from shared.keys import FLUSH_GROUP, Keys

pytestmark = pytest.mark.slow


@pytest.fixture
def redis_url(redis_cluster: ClusterNodes) -> str:
    return redis_cluster.url


async def test_starts_are_shared_by_every_client_of_the_cluster(ctx: Context) -> None:
    assert ctx.keys.cluster
    key, clock = ctx.keys.delivery_rate("dst_cluster"), throttle.Clock()
    first = await throttle.reserve(ctx.redis, key, clock, rate_per_s=10, wanted=5, horizon_s=0.25)
    second = await throttle.reserve(ctx.redis, key, clock, rate_per_s=10, wanted=5, horizon_s=0.25)
    assert (first.count, second.count) == (3, 0)  # 0, 0.105 and 0.21 s; then nothing within the horizon
    assert 0.3 < second.first_at - first.first_at <= 0.33  # the next free start: three intervals of 1/9.5 s
    await throttle.pause(ctx.redis, key, 5.0)
    assert (await throttle.reserve(ctx.redis, key, clock, rate_per_s=10, wanted=1, horizon_s=1.0)).count == 0


async def test_watermarks_come_from_every_shard(ctx: Context) -> None:
    keys = Keys(ctx.keys.prefix, shards=3, cluster=True)
    redis = ctx.redis
    assert await ordering.watermarks(redis, keys) == [None, None, None]  # no stream, no flush group yet
    ids = {}
    for shard, stream in enumerate(keys.ingest_streams()):
        await redis.xgroup_create(stream, FLUSH_GROUP, id="0", mkstream=True)
        ids[shard] = [await redis.xadd(stream, {"r": b"x"}) for _ in range(2)]
    await redis.xreadgroup(FLUSH_GROUP, "lane", {keys.ingest_stream(0): ">"}, count=2)  # read, not acknowledged
    await redis.xreadgroup(FLUSH_GROUP, "lane", {keys.ingest_stream(1): ">"}, count=2)
    await redis.xack(keys.ingest_stream(1), FLUSH_GROUP, *ids[1])  # committed and acknowledged
    marks = await ordering.watermarks(redis, keys)
    text = {shard: [entry_position(i.decode() if isinstance(i, bytes) else i) for i in ids[shard]] for shard in ids}
    assert marks[0] == text[0][0]  # its oldest pending entry: nothing after it may go
    assert marks[1] == text[1][1]  # all read and acknowledged: up to the last delivered
    assert marks[2] == entry_position("0-0")  # nothing read yet: nothing of it is committed
