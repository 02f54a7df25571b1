"""The flush worker in process against the real ingest stream and Postgres: storage, poison and dead letters,
routing into delivery tasks, and the counters behind /v1 stats."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from control.db.context import Context
from control.service.accounts import create_account
from control.workers.flush import Flush
from shared import ids
from shared.wire import IngestRecord, encode_records


@pytest.fixture
async def flush(ctx: Context) -> AsyncIterator[Flush]:
    """The flush as ``hookyard worker flush`` runs it, on the test's stream, its groups made; the claim of idle
    entries runs on every step (``claim_every_s=0``), its idle time the production default."""
    flush = Flush(ctx, consumer="c1", block_ms=5, claim_every_s=0)
    await flush.ensure_groups()
    yield flush
    await flush.close()


async def endpoint_row(ctx: Context) -> str:
    """A fresh account and one endpoint of it, inserted as rows: all the flush needs to store events for it."""
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


async def xadd(ctx: Context, records: list[IngestRecord]) -> str:
    """One entry of ``records`` on the ingest stream's shard 0, as an edge batch writes it; its entry id."""
    entry = await ctx.redis.xadd(ctx.keys.ingest_stream(0), {"r": encode_records(records)})
    return entry.decode()


async def drain(flush: Flush) -> int:
    """Steps the flush until a step finds nothing; how many records it handled."""
    total = 0
    while n := await flush.step():
        total += n
    return total


async def event_count(ctx: Context, endpoint_id: str) -> tuple[int, int]:
    """(rows, distinct ids) of the endpoint's stored events: a duplicate shows as a difference."""
    async with ctx.pool.acquire() as conn:
        row = await conn.fetchrow(
            "SELECT count(*) AS n, count(DISTINCT id) AS d FROM events WHERE endpoint_id = $1", endpoint_id
        )
    return row["n"], row["d"]
