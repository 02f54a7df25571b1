"""A flush batch and its endpoint's deletion at the same time, without a foreign key from events to endpoints
(migration 0027): the flush's join locks the endpoint as the key's check did, so whichever comes second waits
for the first. A batch never fails for it, and no event outlives its endpoint."""

from __future__ import annotations

import asyncio

import asyncpg

from control.db.context import Context
from control.db.flush import store_batch
from control.records.storable import event_row
from tests.conftest import ingest_record
from tests.destination import add_endpoint
from tests.helpers import blocked_by

_BODY = b'{"type":"order.paid","amount":2000}'


async def _events(conn: asyncpg.Connection, endpoint_id: str) -> int:
    return await conn.fetchval("SELECT count(*) FROM events WHERE endpoint_id = $1", endpoint_id)


async def test_an_endpoint_deleted_while_a_batch_stores_its_events_takes_them_along(ctx: Context) -> None:
    async with ctx.pool.acquire() as flusher, ctx.pool.acquire() as deleter, ctx.pool.acquire() as observer:
        endpoint_id = await add_endpoint(flusher)
        async with flusher.transaction():
            stored = await store_batch(flusher, [event_row(ingest_record(endpoint_id, _BODY)) for _ in range(3)], [])
            assert stored.events == 3
            deleting = asyncio.create_task(deleter.execute("DELETE FROM endpoints WHERE id = $1", endpoint_id))
            await blocked_by(observer, flusher)
            assert not deleting.done(), "the deletion waits for the batch's commit"
        assert await deleting == "DELETE 1"
        assert await _events(flusher, endpoint_id) == 0


async def test_a_batch_meeting_an_endpoint_being_deleted_waits_and_stores_only_the_others(ctx: Context) -> None:
    """With the key, the batch failed on it once the deletion committed (and was split to find the record)."""
    async with ctx.pool.acquire() as flusher, ctx.pool.acquire() as deleter, ctx.pool.acquire() as observer:
        gone, kept = await add_endpoint(flusher), await add_endpoint(flusher)
        rows = [event_row(ingest_record(e, _BODY)) for e in (gone, kept, gone, kept)]
        async with deleter.transaction():
            await deleter.execute("DELETE FROM endpoints WHERE id = $1", gone)

            async def flush() -> int:
                async with flusher.transaction():
                    return (await store_batch(flusher, rows, [])).events

            storing = asyncio.create_task(flush())
            await blocked_by(observer, deleter)
            assert not storing.done(), "the batch waits for the deletion's outcome"
        assert await storing == 2
        assert (await _events(flusher, gone), await _events(flusher, kept)) == (0, 2)
