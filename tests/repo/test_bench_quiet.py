"""``bench.quiet``, what the fault ledger and the pipeline bench wait on before they count: a real flush on
real Redis and Postgres, and a delivery task finished by hand. Each state below holds still while it is
looked at (nothing runs in between), so a ``False`` here is the state's, not a clock's."""

from __future__ import annotations

from bench.quiet import wait_quiet
from control.db.context import Context
from control.workers.flush import Flush
from shared.wire import encode_records
from tests.conftest import ingest_record
from tests.destination import add_endpoint, make_task


async def _quiet(ctx: Context) -> bool:
    s = ctx.settings
    return await wait_quiet(s.database_url or "", s.redis_url or "", ctx.keys, timeout_s=0.3)


async def test_quiet_once_the_stream_is_stored_and_no_task_is_unfinished(ctx: Context) -> None:
    assert await _quiet(ctx)  # no stream yet, no task
    async with ctx.pool.acquire() as conn:
        endpoint = await add_endpoint(conn)
    flush = Flush(ctx, consumer="c1", block_ms=5, claim_every_s=0)
    await flush.ensure_groups()
    try:
        await ctx.redis.xadd(ctx.keys.ingest_stream(0), {"r": encode_records([ingest_record(endpoint)])})
        assert not await _quiet(ctx)  # in the stream, not stored
        assert await flush.step()
        while await flush.step():
            pass
    finally:
        await flush.close()
    assert await _quiet(ctx)

    made = await make_task(ctx, "http://127.0.0.1:9/")
    assert not await _quiet(ctx)  # pending
    async with ctx.pool.acquire() as conn:
        await conn.execute("UPDATE delivery_tasks SET status = 'in_flight' WHERE id = $1", made["task"])
        assert not await _quiet(ctx)
        await conn.execute("UPDATE delivery_tasks SET status = 'succeeded' WHERE id = $1", made["task"])
    assert await _quiet(ctx)
