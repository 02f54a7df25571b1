"""A deliver worker that outlived its lease (a destination slower than the lease, a stalled process) records
its attempt late: the sweep had already made the task due again, so an erasure did not wait for it. That late
record must not bring the erased event's body back (``control.db.delivery_records``: a rule delivery is
written only while its task exists, the task locked until the record commits)."""

from __future__ import annotations

import asyncio

from control.db import delivery_records, tasks
from control.db.leased import LeasedTask
from control.delivery.send import Outcome, delivery_row
from tests.erasure.conftest import erase, make_endpoint, run_erasures, stored
from tests.helpers import blocked_by, db

ALICE = "cus_alice"
BODY = {"id": "evt_1", "type": "invoice.paid", "data": {"object": {"customer": ALICE}}}


async def _leased(conn, event_id: str) -> tuple[LeasedTask, bytes]:
    """The event's task leased as a worker's claim leases it, and the row that worker would record."""
    task_id = await conn.fetchval("SELECT id FROM delivery_tasks WHERE event_id = $1", event_id)
    (task,) = await tasks.lease(conn, [task_id], lease_s=0.05)
    row = delivery_row(
        Outcome(status=200, latency_ms=3, sent_headers={"content-type": "application/json"}, response_body=b"ok"),
        ALICE.encode(),  # what was sent carries the value being erased
        endpoint_id=task.endpoint_id,
        event_id=event_id,
        task_id=task.id,
        destination_id=task.destination_id,
        destination_name="hook",
        destination_url="http://127.0.0.1:9/hook",
        rule_id=task.rule_id,
        source="rule",
        attempt=task.attempts,
    )
    return task, row


async def _swept(conn) -> None:
    await asyncio.sleep(0.1)  # past the 50 ms lease
    assert await tasks.sweep_expired(conn, max_attempts=10) == 1


async def _records(conn, event_id: str) -> int:
    return await conn.fetchval("SELECT count(*) FROM deliveries WHERE event_id = $1", event_id)


async def test_a_record_written_after_the_erasure_is_not_written(client, account, ctx, database_url) -> None:
    endpoint = await make_endpoint(client, account)
    (event,) = await stored(ctx, endpoint, [BODY])
    async with db(database_url) as conn:
        _, row = await _leased(conn, event)
        await _swept(conn)  # the lease ran out: nothing is in flight as far as the erasure can see
        job = await erase(client, account, endpoint, "body.data.object.customer", ALICE)
        await run_erasures(ctx)
        done = await conn.fetchrow("SELECT state, erased FROM erasure_jobs WHERE id = $1", job["id"])
        assert tuple(done) == ("completed", 1)
        await delivery_records.insert_many(conn, [row])  # the worker that outlived its lease, at last
        assert await _records(conn, event) == 0, "a late attempt re-created a record of an erased event"


async def test_a_record_committing_while_the_erasure_runs_is_erased_with_it(client, account, ctx, database_url) -> None:
    endpoint = await make_endpoint(client, account)
    (event,) = await stored(ctx, endpoint, [BODY])
    async with db(database_url) as conn, db(database_url) as late:
        _, row = await _leased(conn, event)
        await _swept(conn)
        job = await erase(client, account, endpoint, "body.data.object.customer", ALICE)
        async with late.transaction():
            await delivery_records.insert_many(late, [row])  # written, not committed: the erasure waits
            erasing = asyncio.create_task(run_erasures(ctx))
            await blocked_by(conn, late)
            assert not erasing.done()
        await asyncio.wait_for(erasing, 30)
        done = await conn.fetchrow("SELECT state, erased FROM erasure_jobs WHERE id = $1", job["id"])
        assert tuple(done) == ("completed", 1)
        assert await _records(conn, event) == 0
