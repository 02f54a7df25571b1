"""The flush worker against real Redis and Postgres: at least once, never duplicated, nothing lost."""

from __future__ import annotations

import asyncio
import time

import pytest

from control.service import Context
from control.service.accounts import create_account
from control.workers.flush import Flush
from shared import ids
from shared.keys import FLUSH_GROUP
from shared.wire import IngestRecord, encode_records
from tests.conftest import Servers
from tests.helpers import refusing_connections


async def _endpoint(ctx: Context) -> str:
    async with ctx.pool.acquire() as conn:
        account_id, _ = await create_account(conn, email=None)
        endpoint_id = ids.new_id("ep")
        await conn.execute(
            """INSERT INTO endpoints (id, account_id, name, environment, ingest_token, signing_secret)
               VALUES ($1, $2, 'e', 'production', $3, 's')""",
            endpoint_id,
            account_id,
            ids.ingest_token(),
        )
    return endpoint_id


def _record(endpoint_id: str, body: bytes = b'{"a":1}', **kw: object) -> IngestRecord:
    """A captured request as the edge writes it."""
    now = time.time()
    return IngestRecord(
        id=ids.new_id("evt", int(now * 1000)),
        endpoint_id=endpoint_id,
        received_at_us=int(now * 1_000_000),
        method="POST",
        path="",
        query="",
        headers=[(b"content-type", b"application/json"), (b"x-dup", b"1"), (b"x-dup", b"2")],
        body=body,
        source_ip="127.0.0.1",
        **kw,
    )


async def _xadd(ctx: Context, records: list[IngestRecord]) -> str:
    entry = await ctx.redis.xadd(ctx.keys.ingest_stream(0), {"r": encode_records(records)})
    return entry.decode()


async def _drain(flush: Flush) -> int:
    total = 0
    while n := await flush.step():
        total += n
    return total


async def _count(ctx: Context, endpoint_id: str) -> tuple[int, int]:
    async with ctx.pool.acquire() as conn:
        row = await conn.fetchrow(
            "SELECT count(*) AS n, count(DISTINCT id) AS d FROM events WHERE endpoint_id = $1", endpoint_id
        )
    return row["n"], row["d"]


@pytest.fixture
def flush(ctx: Context) -> Flush:
    return Flush(ctx, consumer="c1", block_ms=5, claim_every_s=0, claim_idle_ms=60_000)


async def test_flush_stores_records_exactly_and_empties_the_stream(ctx: Context, flush: Flush) -> None:
    endpoint_id = await _endpoint(ctx)
    await flush.ensure_groups()
    pubsub = ctx.redis.pubsub()
    await pubsub.subscribe(ctx.keys.event_channel(endpoint_id))
    records = [_record(endpoint_id, body=bytes([i, 0xFF, 0])) for i in range(50)]
    await _xadd(ctx, records[:20])
    await _xadd(ctx, records[20:])

    assert await _drain(flush) == 50

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
    endpoint_id = await _endpoint(ctx)
    await flush.ensure_groups()
    records = [_record(endpoint_id) for _ in range(5)]
    await _xadd(ctx, records)
    await _drain(flush)
    await _xadd(ctx, records)  # the same records again, as after a crash between commit and XACK
    await _drain(flush)
    assert await _count(ctx, endpoint_id) == (5, 5)


async def test_entries_of_a_dead_consumer_are_taken_over(ctx: Context) -> None:
    endpoint_id = await _endpoint(ctx)
    dead = Flush(ctx, consumer="dead", block_ms=5)
    await dead.ensure_groups()
    records = [_record(endpoint_id) for _ in range(10)]
    await _xadd(ctx, records)
    # The dead consumer read the entry and died before committing anything.
    read = await ctx.redis.xreadgroup(FLUSH_GROUP, "dead", {ctx.keys.ingest_stream(0): ">"}, count=10)
    assert read
    survivor = Flush(ctx, consumer="alive", block_ms=5, claim_idle_ms=0, claim_every_s=0)
    assert await _drain(survivor) == 10
    assert await _count(ctx, endpoint_id) == (10, 10)
    assert (await ctx.redis.xpending(ctx.keys.ingest_stream(0), FLUSH_GROUP))["pending"] == 0


async def test_undecodable_entry_goes_to_dead_letters_and_the_rest_flows(ctx: Context, flush: Flush) -> None:
    endpoint_id = await _endpoint(ctx)
    await flush.ensure_groups()
    await ctx.redis.xadd(ctx.keys.ingest_stream(0), {"r": b"\xc1 not msgpack"})
    await _xadd(ctx, [_record(endpoint_id)])
    await _drain(flush)
    assert await _count(ctx, endpoint_id) == (1, 1)
    dead = await ctx.redis.xrange(ctx.keys.dead_letter_stream(0))
    assert len(dead) == 1
    assert dead[0][1][b"r"] == b"\xc1 not msgpack"
    assert b"undecodable" in dead[0][1][b"error"]


async def test_a_record_postgres_rejects_is_isolated(ctx: Context, flush: Flush) -> None:
    endpoint_id = await _endpoint(ctx)
    await flush.ensure_groups()
    good = [_record(endpoint_id) for _ in range(3)]
    bad = _record(endpoint_id, signature_failure_reason="not_a_reason")  # violates the CHECK constraint
    await _xadd(ctx, good[:2])
    await _xadd(ctx, [bad])
    await _xadd(ctx, good[2:])
    await _drain(flush)
    assert await _count(ctx, endpoint_id) == (3, 3)
    assert len(await ctx.redis.xrange(ctx.keys.dead_letter_stream(0))) == 1


async def test_events_of_a_deleted_endpoint_are_dropped_not_blocking(ctx: Context, flush: Flush) -> None:
    kept, gone = await _endpoint(ctx), await _endpoint(ctx)
    await flush.ensure_groups()
    await _xadd(ctx, [_record(kept), _record(gone)])
    async with ctx.pool.acquire() as conn:
        await conn.execute("DELETE FROM endpoints WHERE id = $1", gone)
    assert await _drain(flush) == 2
    assert await _count(ctx, kept) == (1, 1)
    assert await _count(ctx, gone) == (0, 0)
    assert await ctx.redis.xlen(ctx.keys.ingest_stream(0)) == 0


async def test_lost_consumer_group_is_recreated(ctx: Context, flush: Flush) -> None:
    endpoint_id = await _endpoint(ctx)
    await flush.ensure_groups()
    await ctx.redis.delete(ctx.keys.ingest_stream(0))  # Redis restarted without persistence
    assert await flush.step() == 0
    await _xadd(ctx, [_record(endpoint_id)])
    await _drain(flush)
    assert await _count(ctx, endpoint_id) == (1, 1)


async def test_postgres_outage_outlasting_every_limit_loses_nothing(
    ctx: Context, servers: Servers, database_url: str
) -> None:
    """Far more failed steps than any retry limit ever was, and longer than the takeover idle time: the
    batch is held, not re-read (Redis's delivery count stays 1), not taken over, not dead-lettered."""
    endpoint_id = await _endpoint(ctx)
    flush = Flush(ctx, consumer="c1", block_ms=5, claim_every_s=0, claim_idle_ms=300)
    rival = Flush(ctx, consumer="c2", block_ms=5, claim_every_s=0, claim_idle_ms=300)
    await flush.ensure_groups()
    stream = ctx.keys.ingest_stream(0)
    records = [_record(endpoint_id) for _ in range(20)]
    await _xadd(ctx, records[:10])
    await _xadd(ctx, records[10:])
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
    assert await _drain(flush) == 20
    assert await _count(ctx, endpoint_id) == (20, 20)
    assert await ctx.redis.xlen(ctx.keys.dead_letter_stream(0)) == 0
    assert (await ctx.redis.xpending(stream, FLUSH_GROUP))["pending"] == 0


async def test_entries_read_again_and_again_are_never_dead_lettered(ctx: Context) -> None:
    """Redis's delivery counter grows with every re-read and takeover (restarts, crashes): it is not a
    verdict on the record, so any count still ends in storage."""
    endpoint_id = await _endpoint(ctx)
    flush = Flush(ctx, consumer="c1", block_ms=5, claim_every_s=3600)
    await flush.ensure_groups()
    await _xadd(ctx, [_record(endpoint_id)])
    for start in (">", *["0"] * 20):  # read, "crash", re-read, "crash"...
        assert await ctx.redis.xreadgroup(FLUSH_GROUP, "c1", {ctx.keys.ingest_stream(0): start})
    await _drain(flush)
    assert await _count(ctx, endpoint_id) == (1, 1)
    assert await ctx.redis.xlen(ctx.keys.dead_letter_stream(0)) == 0
