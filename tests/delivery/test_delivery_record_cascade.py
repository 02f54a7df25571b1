"""Delivery records and their endpoint, without a foreign key between them (migrations 0026 and 0027):
deleting an endpoint deletes every record of it, including one whose insert was in progress while the
deletion ran, and a destination test whose endpoint went meanwhile is not recorded."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg

from control.db import delivery_records
from control.db.context import Context
from control.delivery.send import Outcome, delivery_row
from tests.destination import Destination, make_task
from tests.helpers import blocked_by


def _row(made: dict[str, str], *, task: bool = True, source: str = "rule") -> tuple[Any, ...]:
    return delivery_row(
        Outcome(status=200, latency_ms=2, sent_headers={"content-type": "application/json"}),
        b'{"ok": true}',
        endpoint_id=made["endpoint"],
        event_id=made["event"],
        task_id=made["task"] if task else None,
        destination_id=made["destination"],
        destination_name="sink",
        destination_url="http://127.0.0.1:9/",
        rule_id=made["rule"] if task else None,
        source=source,
        attempt=1,
    )


async def _records(conn: asyncpg.Connection, endpoint_id: str) -> int:
    return await conn.fetchval("SELECT count(*) FROM deliveries WHERE endpoint_id = $1", endpoint_id)


async def test_deleting_an_endpoint_deletes_its_records_and_no_other(ctx: Context, destination: Destination) -> None:
    gone, kept = await make_task(ctx, destination.url), await make_task(ctx, destination.url)
    async with ctx.pool.acquire() as conn:
        for made in (gone, kept):
            await delivery_records.insert_many(conn, [_row(made), _row(made)])  # two attempts of the task
            assert await delivery_records.insert(conn, _row(made, task=False, source="manual_test"))
            assert await _records(conn, made["endpoint"]) == 3
        await conn.execute("DELETE FROM endpoints WHERE id = $1", gone["endpoint"])
        assert await _records(conn, gone["endpoint"]) == 0
        assert await _records(conn, kept["endpoint"]) == 3


async def test_a_record_committed_while_its_endpoint_is_deleted_goes_with_it(
    ctx: Context, destination: Destination
) -> None:
    """The deliver worker's batch holds its task (KEY SHARE) from the insert to its commit; the endpoint's
    deletion reaches the task through the destination, waits there, and deletes the records after it."""
    made = await make_task(ctx, destination.url)
    async with ctx.pool.acquire() as writer, ctx.pool.acquire() as deleter, ctx.pool.acquire() as observer:
        async with writer.transaction():
            await delivery_records.insert_many(writer, [_row(made)])
            deleting = asyncio.create_task(deleter.execute("DELETE FROM endpoints WHERE id = $1", made["endpoint"]))
            await blocked_by(observer, writer)
            assert not deleting.done(), "the deletion waits for the record's commit"
        assert await deleting == "DELETE 1"
        assert await _records(writer, made["endpoint"]) == 0


async def test_a_record_after_its_endpoint_was_deleted_is_not_written(ctx: Context, destination: Destination) -> None:
    made = await make_task(ctx, destination.url)
    async with ctx.pool.acquire() as conn:
        await conn.execute("DELETE FROM endpoints WHERE id = $1", made["endpoint"])
        await delivery_records.insert_many(conn, [_row(made)])  # its task went with the endpoint
        assert not await delivery_records.insert(conn, _row(made, task=False, source="manual_test"))
        assert await _records(conn, made["endpoint"]) == 0


async def test_a_replay_recorded_while_its_endpoint_is_deleted_goes_with_it(
    ctx: Context, destination: Destination
) -> None:
    """A replay's record holds its event (KEY SHARE); the endpoint's deletion deletes the events first, waits
    there, and deletes the records after (migration 0027: one trigger, in that order)."""
    made = await make_task(ctx, destination.url)
    async with ctx.pool.acquire() as writer, ctx.pool.acquire() as deleter, ctx.pool.acquire() as observer:
        received_at = await writer.fetchval("SELECT received_at FROM events WHERE id = $1", made["event"])
        async with writer.transaction():
            row = _row(made, task=False, source="replay")
            assert await delivery_records.insert_for_event(writer, row, received_at)
            deleting = asyncio.create_task(deleter.execute("DELETE FROM endpoints WHERE id = $1", made["endpoint"]))
            await blocked_by(observer, writer)
            assert not deleting.done(), "the deletion waits for the replay's record"
        assert await deleting == "DELETE 1"
        assert await _records(writer, made["endpoint"]) == 0
        assert await writer.fetchval("SELECT count(*) FROM events WHERE endpoint_id = $1", made["endpoint"]) == 0
