"""Dead letters keep whole captured requests, bodies included: the retention sweep removes each once its
request is older than its endpoint's ``body_retention_days`` (the instance's retention without one), so a body
does not outlive its lifetime in Redis. The dead letters are made by the real flush (records Postgres
refuses), on the test's stream."""

from __future__ import annotations

import time

from control.db.context import Context
from control.support import dead_letters
from control.workers.flush import Flush
from control.workers.sweep.loop import Sweep
from tests.conftest import ingest_record
from tests.workers.conftest import drain, endpoint_row, xadd

DAY_US = 86_400 * 1_000_000


def _ago_us(days: float) -> int:
    return int(time.time() * 1_000_000 - days * DAY_US)


async def test_the_sweep_removes_dead_letters_past_their_body_retention(ctx: Context, flush: Flush) -> None:
    short, plain = await endpoint_row(ctx), await endpoint_row(ctx)
    async with ctx.pool.acquire() as conn:
        await conn.execute("UPDATE endpoints SET body_retention_days = 1 WHERE id = $1", short)
    instance_days = ctx.settings.retention_days
    # an undecodable entry that was dead-lettered long ago: the instance's retention from its own time
    old_ms = int(time.time() * 1000) - (instance_days + 1) * 86_400_000
    await ctx.redis.xadd(
        ctx.keys.dead_letter_stream(0), dead_letters.fields_for(b"\xc1garbage", "undecodable", "1-0"), id=f"{old_ms}-0"
    )
    poison = {"source_ip": "not-an-address"}  # Postgres refuses it: the flush dead-letters the record
    records = {
        "short_old": ingest_record(short, b'{"card": "4242"}', at_us=_ago_us(2), **poison),
        "short_new": ingest_record(short, at_us=_ago_us(0.5), **poison),
        "plain_2_days": ingest_record(plain, at_us=_ago_us(2), **poison),
        "plain_past_instance": ingest_record(plain, at_us=_ago_us(instance_days + 1), **poison),
    }
    await xadd(ctx, list(records.values()))
    await drain(flush)
    dead = await dead_letters.list_dead_letters(ctx.redis, ctx.keys)
    assert len(dead) == 5

    await Sweep(ctx).step()

    kept = await dead_letters.list_dead_letters(ctx.redis, ctx.keys)
    assert sorted(d.event_id for d in kept) == sorted(records[k].id for k in ("short_new", "plain_2_days"))
    await Sweep(ctx).step()  # nothing more is due
    assert len(await dead_letters.list_dead_letters(ctx.redis, ctx.keys)) == 2
