"""Throughput without giving up at-least-once: tasks of a fast destination are claimed ahead of its free
slots (``control.delivery.ready``) and handed back uncounted when never sent; the workers' pool releases
connections without a reset round trip."""

from __future__ import annotations

import asyncio
import time
from collections import Counter

import msgspec

from control.db import tasks as db_tasks
from control.db.context import Context
from control.db.flush import store_batch
from control.delivery.claim import claim
from control.delivery.ready import DEPTH
from control.records.storable import event_row
from control.workers.deliver import Deliver
from control.workers.main import worker_context
from shared import ids
from shared.settings import Settings
from shared.wire import IngestRecord
from tests.destination import Destination, Reply, make_task, running, settled
from tests.helpers import db, wait_for


async def _backlog(ctx: Context, url: str, count: int) -> list[dict[str, str]]:
    first = await make_task(ctx, url)
    return [first] + [
        await make_task(ctx, url, endpoint_id=first["endpoint"], destination_id=first["destination"])
        for _ in range(count - 1)
    ]


async def test_a_fast_destination_is_claimed_ahead_and_each_event_sent_once(
    settings: Settings, destination: Destination
) -> None:
    """A backlog to one quick destination: the worker holds tasks ahead of its cap (the next send starts
    when one finishes, not after a claim), never more than the cap in flight, every event sent once."""
    tuned = msgspec.structs.replace(settings, deliver_per_destination=4, deliver_concurrency=16)
    async with worker_context(tuned) as ctx:
        tasks = await _backlog(ctx, destination.url, 300)
        held_ahead = 0
        async with running(ctx) as worker:

            async def ahead() -> bool:
                nonlocal held_ahead
                assert worker.in_flight <= tuned.deliver_per_destination
                held_ahead = max(held_ahead, worker.ready.count)
                return held_ahead > tuned.deliver_per_destination

            await wait_for(ahead, timeout=20, interval=0.001)
            for task in tasks:
                await settled(ctx, task["task"], "succeeded", timeout=20)
    sent = Counter(r.headers["x-hookyard-event-id"] for r in destination.requests)
    assert set(sent) == {t["event"] for t in tasks}
    assert max(sent.values()) == 1
    assert {r.headers["x-hookyard-delivery-attempt"] for r in destination.requests} == {"1"}


async def test_tasks_held_ahead_go_back_uncounted_when_the_worker_stops(
    settings: Settings, destination: Destination
) -> None:
    """Stopping with tasks claimed ahead: they are pending again with no attempt counted and nothing sent;
    every task is either delivered (once) or back to pending as it was, none left in flight."""
    destination.reply(default=Reply(delay_s=0.05))
    tuned = msgspec.structs.replace(settings, deliver_per_destination=4, deliver_concurrency=16)
    async with worker_context(tuned) as ctx:
        tasks = await _backlog(ctx, destination.url, 200)
        async with running(ctx) as worker:

            async def ahead() -> bool:
                return worker.ready.count > 0

            await wait_for(ahead, timeout=20, interval=0.001)
        async with ctx.pool.acquire() as conn:
            rows = await conn.fetch(
                "SELECT id, status, attempts FROM delivery_tasks WHERE id = ANY($1::text[])", [t["task"] for t in tasks]
            )
    states = Counter((r["status"], r["attempts"]) for r in rows)
    assert set(states) <= {("succeeded", 1), ("pending", 0)}, states
    assert states[("pending", 0)] > 0
    sent = Counter(r.headers["x-hookyard-event-id"] for r in destination.requests)
    assert sum(sent.values()) == states[("succeeded", 1)]
    assert max(sent.values()) == 1


async def test_the_workers_pool_releases_a_connection_without_a_reset_query(settings: Settings) -> None:
    async with worker_context(settings) as ctx:
        async with ctx.pool.acquire() as conn:
            await conn.execute("SELECT 1")
            before = conn._protocol.queries_count  # asyncpg counts the queries a connection ran
            raw = conn._con  # the connection behind the pool's proxy
        async with ctx.pool.acquire() as again:
            assert again._con is raw
            assert again._protocol.queries_count == before  # nothing ran on release


async def test_the_claim_is_planned_once_not_on_every_call(settings: Settings, destination: Destination) -> None:
    """The claim runs on every free slot: planned per call it cost Postgres more than running it (the events
    join planned over every day partition, ADR 0042). With a backlog of tens of thousands (the bench drains
    that many) and claims of every size, each size's generic plan is taken after its first few calls, and the
    claim still leaves a blocked destination's tasks and brings each task's event. With the window a
    parameter, this backlog made Postgres plan every call (the generic plan costed for a tenth of it)."""
    sizes = (16, 32, 12, 24)
    calls = 8
    async with worker_context(settings) as ctx:
        first = await make_task(ctx, destination.url)
        records = [
            IngestRecord(
                ids.new_id("evt"), first["endpoint"], int(time.time() * 1e6), "POST", "", "", [], b"{}", "203.0.113.7"
            )
            for _ in range(20_000)
        ]
        async with ctx.pool.acquire() as conn:
            async with conn.transaction():
                await store_batch(
                    conn,
                    [event_row(r) for r in records],
                    [(ids.new_id("task"), r.id, first["rule"], first["destination"]) for r in records],
                )
            await conn.execute("ANALYZE delivery_tasks")
            claimed = []
            for _ in range(calls):  # one destination, none blocked, claims of varying size: as the bench drains
                for free in sizes:
                    got, _ = await claim(
                        conn, free=free, in_flight={}, per_destination=32, blocked=[], lease_s=60, cooldown_s=1
                    )
                    claimed += got
            plans = [
                p
                for p in await conn.fetch("SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements")
                if p["statement"].lstrip().startswith("WITH cand AS")
            ]
        blocked = await make_task(ctx, destination.url, endpoint_id=first["endpoint"])
        async with ctx.pool.acquire() as conn:
            got, _ = await claim(
                conn,
                free=32,
                in_flight={},
                per_destination=32,
                blocked=[blocked["destination"]],
                lease_s=60,
                cooldown_s=1,
            )
            claimed += got
    assert len(claimed) == len({t.id for t in claimed}) == calls * sum(sizes) + 32
    assert {t.destination_id for t in claimed} == {first["destination"]}
    assert all(t.event_found and t.body is not None for t in claimed)
    assert len(plans) == len({db_tasks.window_for(2 * free) for free in sizes})
    assert all(p["generic_plans"] >= calls - 5 for p in plans), [(p["generic_plans"], p["custom_plans"]) for p in plans]


async def test_a_destination_whose_sends_finished_together_is_still_claimed_ahead(settings: Settings) -> None:
    """Sends to one destination often finish together (started in one batch, answered in the same time): the
    claim that follows sees none of them in flight, and must still give the destination its pace's worth
    ahead of its cap. Counting only destinations in flight, such a destination was never claimed ahead."""
    tuned = msgspec.structs.replace(settings, deliver_per_destination=4, deliver_concurrency=16)
    async with worker_context(tuned) as ctx:
        worker = Deliver(ctx)
        try:
            now = time.monotonic()
            for _ in range(8):  # eight sends finished within the pace window, none in flight now
                worker.ready.finished("dst_lockstep", now)
            assert worker._held(now) == {"dst_lockstep": -8}  # room: its cap of 4 plus 8 ahead
            assert worker._free() == tuned.deliver_concurrency + 8
        finally:
            await worker.close()


async def test_claimed_tasks_come_oldest_due_first_whatever_their_place_in_the_table(
    settings: Settings, destination: Destination
) -> None:
    """The worker starts claimed tasks in the order the claim gives them, and one capped destination's tasks
    held ahead go out in that order. Tasks handed back (or retried) are written anew at the end of the table;
    the claim must still give them oldest due first, not in the order the update happened to meet them."""
    async with worker_context(settings) as ctx:
        tasks = await _backlog(ctx, destination.url, 12)
        order = [t["task"] for t in tasks]
        async with ctx.pool.acquire() as conn:
            # The first six written again (as a hand back does), so the table now holds them after the rest.
            await conn.execute("UPDATE delivery_tasks SET updated_at = now() WHERE id = ANY($1::text[])", order[:6])
            ask = db_tasks.Claim(free=12, window=24, blocked=[], room={}, per_destination=12, lease_s=60)
            claimed, *_ = await db_tasks.claim_ready(conn, ask)
            assert [r.id for r in claimed] == order
            await db_tasks.hand_back(conn, [(r.id, r.attempts, None) for r in claimed])
            await conn.execute("UPDATE delivery_tasks SET updated_at = now() WHERE id = ANY($1::text[])", order[:6])
            async with conn.transaction():
                leased = await db_tasks.lease(conn, order[::-1], lease_s=60)
            assert [r.id for r in leased] == order


async def test_no_claim_overtakes_tasks_on_their_way_back(settings: Settings, destination: Destination) -> None:
    """Tasks claimed ahead and handed back unsent (their destination failed meanwhile, or they waited too long)
    go back due as they were; a claim made before they were back took the tasks due after them first, so a
    destination with room for one got its deliveries out of order. Other destinations are claimed meanwhile."""
    tuned = msgspec.structs.replace(settings, deliver_per_destination=1)
    async with worker_context(tuned) as ctx:
        made = await _backlog(ctx, destination.url, 3)
        other = await make_task(ctx, destination.url)
        first = made[0]["task"]
        worker = Deliver(ctx)
        try:
            async with ctx.pool.acquire() as conn, ctx.pool.acquire() as holder:
                ask = db_tasks.Claim(free=1, window=16, blocked=[], room={}, per_destination=1, lease_s=60)
                claimed, *_ = await db_tasks.claim_ready(conn, ask)
                assert [r.id for r in claimed] == [first]
                async with holder.transaction():  # the hand back's update waits for this lock
                    await holder.execute("SELECT 1 FROM delivery_tasks WHERE id = $1 FOR UPDATE", first)
                    worker.returns.hand_back(claimed)
                    assert await worker.step() == 1, "only the other destination's task is claimed"
                    await settled(ctx, other["task"], "succeeded")
                    assert await conn.fetchval("SELECT status FROM delivery_tasks WHERE id = $1", made[1]["task"]) == (
                        "pending"
                    ), "a claim overtook a task on its way back"

                async def back() -> bool:
                    return await conn.fetchval("SELECT status FROM delivery_tasks WHERE id = $1", first) == "pending"

                await wait_for(back)
        finally:
            await worker.close()
        async with running(ctx):
            for task in made:
                await settled(ctx, task["task"], "succeeded")
    sent = [r.headers["x-hookyard-event-id"] for r in destination.requests]
    assert sent == [other["event"], *(t["event"] for t in made)]


async def test_a_slow_results_write_neither_stops_the_sends_nor_lets_results_pile_up(
    settings: Settings, destination: Destination
) -> None:
    """Results finishing while the recorder's write is out are the group commit's next batch: with that write
    held (the ``deliveries`` table locked), the worker goes on claiming until three times its concurrency of
    results wait, and then claims nothing, however fast the destination answers (its pace would let the worker claim
    far ahead); what was already claimed still goes out. Once the write goes through, every event is sent
    exactly once."""
    tuned = msgspec.structs.replace(settings, deliver_per_destination=8, deliver_concurrency=8)
    async with worker_context(tuned) as ctx:
        tasks = await _backlog(ctx, destination.url, 160)
        async with db(tuned.database_url) as blocker, running(ctx) as worker:
            lock = blocker.transaction()
            await lock.start()
            await blocker.execute("LOCK TABLE deliveries IN SHARE MODE")  # the inserts wait; claims do not
            try:
                await wait_for(lambda: asyncio.sleep(0, worker.recorder.queued >= 24), timeout=20, interval=0.01)
                seen: list[int] = []

                async def settled_count() -> bool:  # nothing in flight or held, and no new request for 0.5 s
                    seen.append(len(destination.requests) if worker.in_flight == worker.ready.count == 0 else -1)
                    return len(seen) > 5 and len(set(seen[-6:])) == 1 and seen[-1] >= 0

                await wait_for(settled_count, timeout=20, interval=0.1)
                # Claims stop at 3 x 8 waiting; what was in flight (8) or held ahead (DEPTH caps) still went out.
                assert 24 <= seen[-1] <= 24 + 1 + 8 + DEPTH * 8 < len(tasks), seen[-1]
            finally:
                await lock.rollback()
            for task in tasks:
                await settled(ctx, task["task"], "succeeded", timeout=20)
    sent_ids = Counter(r.headers["x-hookyard-event-id"] for r in destination.requests)
    assert set(sent_ids) == {t["event"] for t in tasks}
    assert max(sent_ids.values()) == 1


async def test_a_results_write_wakes_the_loop_for_a_destination_with_room(settings: Settings) -> None:
    """A send that finishes while its result waits for the recorder gives its destination room, but no wakeup
    when those waiting results leave no free slot (``_free``); the write that follows frees them and must wake
    the loop to claim for that destination. It woke only when the loop was looking anyway, so with room and
    every slot free the loop slept until its poll (``deliver_poll_s``): 43 one-second stalls in one ``bench
    delivery`` run at a 0.33 transformed ratio."""
    async with worker_context(settings) as ctx:
        worker = Deliver(ctx)
        try:
            worker._look = False
            worker._room.add("dst_with_room")
            worker._wake.clear()
            assert worker._free() >= worker._batch
            worker._written(False, False)
            assert worker._wake.is_set(), "the write left the loop asleep with a destination claimable"
        finally:
            await worker.close()
