"""The instance's retention reaches what an event leaves behind: its delivery records and finished delivery
tasks go once they are older than ``HOOKYARD_RETENTION_DAYS``, as the event's partition does; younger ones,
and tasks still pending or in flight, stay."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from control.workers.sweep.loop import Sweep
from control.workers.sweep.retention import expire_records
from shared import ids
from tests.events_support import store_delivery, store_task
from tests.helpers import create_endpoint


def _ago(days: float) -> datetime:
    return datetime.now(UTC) - timedelta(days=days)


async def _task(conn, endpoint_id: str, days: float, status: str) -> str:
    return await store_task(
        conn,
        endpoint_id=endpoint_id,
        event_id=ids.new_id("evt", int(_ago(days).timestamp() * 1000)),
        received_at=_ago(days),
        rule_id="rule_1",
        destination_id="dst_1",
        created_at=_ago(days),
        status=status,
    )


async def _left(conn) -> tuple[set[str], set[str]]:
    records = {r["id"] for r in await conn.fetch("SELECT id FROM deliveries")}
    tasks = {r["id"] for r in await conn.fetch("SELECT id FROM delivery_tasks")}
    return records, tasks


async def test_records_and_finished_tasks_past_retention_go_in_batches(client, account, endpoint, conn, ctx):
    days = ctx.settings.retention_days
    other = (await create_endpoint(client, account.headers))["id"]
    old_records = [
        await store_delivery(conn, ep, ids.new_id("evt"), created_at=_ago(days + 1 + i), success=i % 2 == 0)
        for i, ep in enumerate([endpoint, endpoint, other, endpoint, other])
    ]
    young_records = [
        await store_delivery(conn, endpoint, ids.new_id("evt"), created_at=_ago(days - 1)),
        await store_delivery(conn, other, ids.new_id("evt"), created_at=_ago(0)),
    ]
    old_finished = [await _task(conn, endpoint, days + 10, s) for s in ("succeeded", "failed", "succeeded")]
    old_unfinished = [await _task(conn, endpoint, days + 10, s) for s in ("pending", "in_flight")]
    young = [await _task(conn, other, 1, "succeeded"), await _task(conn, endpoint, 0, "pending")]

    gone = await expire_records(ctx, batch=2)

    assert (gone.records, gone.tasks, gone.finished) == (5, 3, True)
    records, tasks = await _left(conn)
    assert records == set(young_records)
    assert tasks == {*old_unfinished, *young}
    assert not records & set(old_records)
    assert not tasks & set(old_finished)
    listed = (await client.get(f"/v1/endpoints/{endpoint}/deliveries", headers=account.headers)).json()
    assert [d["id"] for d in listed["deliveries"]] == [young_records[0]]

    again = await expire_records(ctx, batch=2)
    assert (again.records, again.tasks, again.finished) == (0, 0, True)


async def test_an_unfinished_task_goes_once_it_has_finished(endpoint, conn, ctx):
    days = ctx.settings.retention_days
    task = await _task(conn, endpoint, days + 3, "in_flight")
    assert (await expire_records(ctx)).tasks == 0
    await conn.execute("UPDATE delivery_tasks SET status = 'failed' WHERE id = $1", task)
    assert (await expire_records(ctx)).tasks == 1
    assert await conn.fetchval("SELECT count(*) FROM delivery_tasks") == 0


async def test_the_row_time_is_checked_as_well_as_the_id(endpoint, conn, ctx):
    """An id older than the retention on a row created within it (the two disagree) keeps the row: the id
    range finds candidates, ``created_at`` decides."""
    days = ctx.settings.retention_days
    kept = await store_delivery(conn, endpoint, ids.new_id("evt"), created_at=_ago(days + 5))
    await conn.execute("UPDATE deliveries SET created_at = now() WHERE id = $1", kept)
    gone = await expire_records(ctx)
    assert (gone.records, gone.finished) == (0, True)
    assert (await _left(conn))[0] == {kept}


async def test_a_round_out_of_time_goes_on_the_next_round(endpoint, conn, ctx):
    days = ctx.settings.retention_days
    for i in range(3):
        await store_delivery(conn, endpoint, ids.new_id("evt"), created_at=_ago(days + 1 + i))
    stopped = await expire_records(ctx, batch=2, budget_s=0)
    assert (stopped.records, stopped.finished) == (0, False)
    assert (await expire_records(ctx, batch=2)).records == 3


async def test_the_sweep_removes_them_every_round(endpoint, conn, ctx):
    days = ctx.settings.retention_days
    old = await store_delivery(conn, endpoint, ids.new_id("evt"), created_at=_ago(days + 2))
    young = await store_delivery(conn, endpoint, ids.new_id("evt"), created_at=_ago(days - 2))
    task = await _task(conn, endpoint, days + 2, "succeeded")
    await Sweep(ctx).step()
    records, tasks = await _left(conn)
    assert old not in records
    assert young in records
    assert task not in tasks
