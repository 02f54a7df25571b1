"""The flush worker against real Redis and Postgres: at least once, never duplicated, nothing lost."""

from __future__ import annotations

import asyncio
import time

import pytest

from control.db.context import Context
from control.workers.flush import Flush
from shared.keys import FLUSH_GROUP
from shared.wire import IngestRecord
from tests.conftest import Servers, ingest_record
from tests.helpers import refusing_connections
from tests.workers.conftest import drain, endpoint_row, event_count, xadd

DUP_HEADERS = [(b"content-type", b"application/json"), (b"x-dup", b"1"), (b"x-dup", b"2")]
"""A header sent twice, as HTTP allows: stored joined, in order."""


def _record(endpoint_id: str, body: bytes = b'{"a":1}', **kw: object) -> IngestRecord:
    """The room's ingest record with a repeated header."""
    return ingest_record(endpoint_id, body, headers=DUP_HEADERS, **kw)


@pytest.fixture
def flush(ctx: Context) -> Flush:
    """Unlike the room's ``flush``: entries idle for a minute only are taken over (no test here waits that
    long unless it asks with its own), and each test makes the groups itself when it needs them."""
    return Flush(ctx, consumer="c1", block_ms=5, claim_every_s=0, claim_idle_ms=60_000)


async def test_flush_stores_records_exactly_and_empties_the_stream(ctx: Context, flush: Flush) -> None:
    endpoint_id = await endpoint_row(ctx)
    await flush.ensure_groups()
    pubsub = ctx.redis.pubsub()
    await pubsub.subscribe(ctx.keys.event_channel(endpoint_id))
    records = [_record(endpoint_id, body=bytes([i, 0xFF, 0])) for i in range(50)]
    await xadd(ctx, records[:20])
    await xadd(ctx, records[20:])

    assert await drain(flush) == 50

    async with ctx.pool.acquire() as conn:
        rows = await conn.fetch("SELECT * FROM events WHERE endpoint_id = $1 ORDER BY id", endpoint_id)
    assert [r["id"] for r in rows] == sorted(r.id for r in records)
    by_id = {r.id: r for r in records}
    for row in rows:
        record = by_id[row["id"]]
        assert bytes(row["body"]) == record.body
        assert row["body_is_utf8"] is False
        assert row["headers"] == {"content-type": "application/json", "x-dup": "1, 2"}
        assert row["received_at"].timestamp() == pytest.approx(record.received_at_us / 1e6)
    stream = ctx.keys.ingest_stream(0)
    assert await ctx.redis.xlen(stream) == 0
    assert (await ctx.redis.xpending(stream, FLUSH_GROUP))["pending"] == 0
    published = set()
    async with asyncio.timeout(5):
        while len(published) < 50:
            message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=1)
            if message:
                published.update(message["data"].decode().split(","))
    assert published == {r.id for r in records}
    await pubsub.aclose()


async def test_reprocessing_an_entry_never_duplicates(ctx: Context, flush: Flush) -> None:
    endpoint_id = await endpoint_row(ctx)
    await flush.ensure_groups()
    records = [_record(endpoint_id) for _ in range(5)]
    await xadd(ctx, records)
    await drain(flush)
    await xadd(ctx, records)  # the same records again, as after a crash between commit and XACK
    await drain(flush)
    assert await event_count(ctx, endpoint_id) == (5, 5)


async def test_entries_of_a_dead_consumer_are_taken_over(ctx: Context) -> None:
    endpoint_id = await endpoint_row(ctx)
    dead = Flush(ctx, consumer="dead", block_ms=5)
    await dead.ensure_groups()
    records = [_record(endpoint_id) for _ in range(10)]
    await xadd(ctx, records)
    # The dead consumer read the entry and died before committing anything.
    read = await ctx.redis.xreadgroup(FLUSH_GROUP, "dead", {ctx.keys.ingest_stream(0): ">"}, count=10)
    assert read
    survivor = Flush(ctx, consumer="alive", block_ms=5, claim_idle_ms=0, claim_every_s=0)
    assert await drain(survivor) == 10
    assert await event_count(ctx, endpoint_id) == (10, 10)
    assert (await ctx.redis.xpending(ctx.keys.ingest_stream(0), FLUSH_GROUP))["pending"] == 0


async def test_undecodable_entry_goes_to_dead_letters_and_the_rest_flows(ctx: Context, flush: Flush) -> None:
    endpoint_id = await endpoint_row(ctx)
    await flush.ensure_groups()
    await ctx.redis.xadd(ctx.keys.ingest_stream(0), {"r": b"\xc1 not msgpack"})
    await xadd(ctx, [_record(endpoint_id)])
    await drain(flush)
    assert await event_count(ctx, endpoint_id) == (1, 1)
    dead = await ctx.redis.xrange(ctx.keys.dead_letter_stream(0))
    assert len(dead) == 1
    assert dead[0][1][b"r"] == b"\xc1 not msgpack"
    assert b"undecodable" in dead[0][1][b"error"]


async def test_a_record_postgres_rejects_is_isolated(ctx: Context, flush: Flush) -> None:
    endpoint_id = await endpoint_row(ctx)
    await flush.ensure_groups()
    good = [_record(endpoint_id) for _ in range(3)]
    bad = _record(endpoint_id, signature_failure_reason="not_a_reason")  # violates the CHECK constraint
    await xadd(ctx, good[:2])
    await xadd(ctx, [bad])
    await xadd(ctx, good[2:])
    await drain(flush)
    assert await event_count(ctx, endpoint_id) == (3, 3)
    assert len(await ctx.redis.xrange(ctx.keys.dead_letter_stream(0))) == 1


async def test_events_of_a_deleted_endpoint_are_dropped_not_blocking(ctx: Context, flush: Flush) -> None:
    kept, gone = await endpoint_row(ctx), await endpoint_row(ctx)
    await flush.ensure_groups()
    await xadd(ctx, [_record(kept), _record(gone)])
    async with ctx.pool.acquire() as conn:
        await conn.execute("DELETE FROM endpoints WHERE id = $1", gone)
    assert await drain(flush) == 2
    assert await event_count(ctx, kept) == (1, 1)
    assert await event_count(ctx, gone) == (0, 0)
    assert await ctx.redis.xlen(ctx.keys.ingest_stream(0)) == 0


async def test_lost_consumer_group_is_recreated(ctx: Context, flush: Flush) -> None:
    endpoint_id = await endpoint_row(ctx)
    await flush.ensure_groups()
    await ctx.redis.delete(ctx.keys.ingest_stream(0))  # Redis restarted without persistence
    assert await flush.step() == 0
    await xadd(ctx, [_record(endpoint_id)])
    await drain(flush)
    assert await event_count(ctx, endpoint_id) == (1, 1)


async def test_postgres_outage_outlasting_every_limit_loses_nothing(
    ctx: Context, servers: Servers, database_url: str
) -> None:
    """Far more failed steps than any retry limit ever was, and longer than the takeover idle time: the
    batch is held, not re-read (Redis's delivery count stays 1), not taken over, not dead-lettered."""
    endpoint_id = await endpoint_row(ctx)
    flush = Flush(ctx, consumer="c1", block_ms=5, claim_every_s=0, claim_idle_ms=300)
    rival = Flush(ctx, consumer="c2", block_ms=5, claim_every_s=0, claim_idle_ms=300)
    await flush.ensure_groups()
    stream = ctx.keys.ingest_stream(0)
    records = [_record(endpoint_id) for _ in range(20)]
    await xadd(ctx, records[:10])
    await xadd(ctx, records[10:])
    async with refusing_connections(servers, database_url):
        failed, started = 0, time.monotonic()
        while failed < 15 or time.monotonic() - started < 2.0:  # 15 steps and > 6 x the takeover idle time
            with pytest.raises(Exception):  # noqa: B017, PT011 - whatever the driver raises while the DB is away
                await flush.step()
            failed += 1
            assert await rival.step() == 0  # nothing to read, nothing idle enough to take over
            await asyncio.sleep(0.05)  # the outage lasting: time passing is the point, not synchronisation
        pending = await ctx.redis.xpending_range(stream, FLUSH_GROUP, min="-", max="+", count=10)
        assert [(p["consumer"], p["times_delivered"]) for p in pending] == [(b"c1", 1), (b"c1", 1)]
    assert await drain(flush) == 20
    assert await event_count(ctx, endpoint_id) == (20, 20)
    assert await ctx.redis.xlen(ctx.keys.dead_letter_stream(0)) == 0
    assert (await ctx.redis.xpending(stream, FLUSH_GROUP))["pending"] == 0


async def test_entries_read_again_and_again_are_never_dead_lettered(ctx: Context) -> None:
    """Redis's delivery counter grows with every re-read and takeover (restarts, crashes): it is not a
    verdict on the record, so any count still ends in storage."""
    endpoint_id = await endpoint_row(ctx)
    flush = Flush(ctx, consumer="c1", block_ms=5, claim_every_s=3600)
    await flush.ensure_groups()
    await xadd(ctx, [_record(endpoint_id)])
    for start in (">", *["0"] * 20):  # read, "crash", re-read, "crash"...
        assert await ctx.redis.xreadgroup(FLUSH_GROUP, "c1", {ctx.keys.ingest_stream(0): start})
    await drain(flush)
    assert await event_count(ctx, endpoint_id) == (1, 1)
    assert await ctx.redis.xlen(ctx.keys.dead_letter_stream(0)) == 0
