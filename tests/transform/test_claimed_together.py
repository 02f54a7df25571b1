"""Deliveries of one destination claimed together (one batch of the sandbox pool) whose transforms are slow,
runaway or end their process: each settles once, recorded, and none is handed back for ever (issue 42). A real
deliver worker, loopback destinations, destinations written through /v1."""

from __future__ import annotations

import asyncio
import time

import msgspec
import pytest

from control.db import tasks as db_tasks
from control.db.context import Context
from control.workers.deliver import Deliver
from shared.settings import Settings
from tests.conftest import Servers
from tests.destination import FAST_DELIVERY, make_task, running, serving, settled, task_status
from tests.helpers import refusing_connections
from tests.transform.delivering import add_destination, delivery_row, has_attempts
from tests.transform.fatal import FATAL


@pytest.fixture
def settings(settings: Settings) -> Settings:
    return msgspec.structs.replace(settings, **FAST_DELIVERY, circuit_failure_threshold=3)


RUNAWAY = "function handler(r) { for (;;) {} }"
STUCK = "transform failed: stopped: still running after 1 s"


async def _failed_once(ctx: Context, task_id: str, error: str) -> None:
    """The task failed on its one attempt, with one delivery record of a failed transform saying ``error``."""
    done = await task_status(ctx, task_id)
    assert (done["status"], done["attempts"], done["last_error"]) == ("failed", 1, error)
    assert await has_attempts(ctx, task_id, 1)
    assert (await delivery_row(ctx, task_id))["transform"]["outcome"] == "failed"


async def _four(ctx: Context, client, account, url: str, source: str) -> tuple[str, str, list[dict[str, str]]]:
    """A destination of ``source`` and 4 deliveries to it, due before the worker starts: claimed together."""
    endpoint, dst, _ = await add_destination(client, account, url, source)
    return endpoint, dst, [await make_task(ctx, url, endpoint_id=endpoint, destination_id=dst) for _ in range(4)]


async def _all_failed(ctx: Context, made: list[dict[str, str]]) -> None:
    await asyncio.gather(*(settled(ctx, m["task"], "failed", timeout=30) for m in made))


async def test_runaway_deliveries_claimed_together_all_settle(ctx: Context, client, account) -> None:
    """4 runaway transforms of one destination, claimed together (one batch of the pool): each failed once and
    recorded within seconds. They stayed in flight for ever: their results came after the window a claimed
    task has to start in, and were handed back and claimed again, each time the same (issue 42)."""
    with serving() as sink:
        _, _, made = await _four(ctx, client, account, sink.url, RUNAWAY)
        async with running(ctx):
            await _all_failed(ctx, made)
        for m in made:
            await _failed_once(ctx, m["task"], STUCK)
        assert sink.requests == []


async def test_runaway_deliveries_one_after_another_all_settle(ctx: Context, client, account) -> None:
    """4 runaway deliveries of one destination, each made once the one before settled: the pool slows the
    destination's calls from its third stop (strikes), so the fourth's result comes 2 s after its claim, past
    the 1.5 s it has to start in. It was handed back and claimed again for ever, each time with a longer wait."""
    with serving() as sink:
        endpoint, dst, _ = await add_destination(client, account, sink.url, RUNAWAY)
        async with running(ctx):
            for _ in range(4):
                made = await make_task(ctx, sink.url, endpoint_id=endpoint, destination_id=dst)
                await settled(ctx, made["task"], "failed", timeout=15)
                await _failed_once(ctx, made["task"], STUCK)
        assert sink.requests == []


SLOW_FATAL = FATAL.replace("{", "{ const t = Date.now(); while (Date.now() - t < 300) {}", 1)
"""Ends its process 0.3 s into each call: a batch of 4 and each call again alone in a process of its own take
~2.5 s, past the 1.5 s a claimed task has to start in, without coming near a limit of time."""


async def test_deliveries_claimed_together_that_each_end_their_process_are_recorded_as_such(
    ctx: Context, client, account
) -> None:
    """4 deliveries whose transform ends its sandbox process, claimed together: each call is run alone in a
    process of its own, and each delivery is recorded with the crash it caused (its process's end), not as
    "not run". Their results came past the window to start in, they were handed back, and the next claim
    found the destination marked crashed: each delivery said its transform was not run (issue 42)."""
    with serving() as sink:
        _, dst, made = await _four(ctx, client, account, sink.url, SLOW_FATAL)
        async with running(ctx):
            await _all_failed(ctx, made)
        for m in made:
            done = await task_status(ctx, m["task"])
            assert done["attempts"] == 1
            assert done["last_error"].startswith("transform failed: stopped: the transform ended its sandbox process")
            assert await has_attempts(ctx, m["task"], 1)
        shown = (await client.get(f"/v1/destinations/{dst}", headers=account.headers)).json()
        assert shown["transform_crashed_at"] is not None
        assert sink.requests == []


SLOW_THROW = """function handler(r) {
  const t = Date.now();
  while (Date.now() - t < 600) {}
  throw new Error("slow and wrong");
}"""


async def test_a_claims_slow_calls_that_send_nothing_are_recorded_not_handed_back(
    ctx: Context, client, account
) -> None:
    """No call runs away here: 4 calls of 0.6 s each, whose batch V8 stops at 1 s and runs again call by
    call, so their results come ~3.4 s after the claim, past the 1.5 s a claimed task has to start in (a
    5 s lease, a 2 s send). They send nothing, so the window, kept for a send within the lease, is not
    theirs: each is recorded once. They were handed back, and every claim of them did the same again."""
    with serving() as sink:
        _, _, made = await _four(ctx, client, account, sink.url, SLOW_THROW)
        async with running(ctx):
            await _all_failed(ctx, made)
        for m in made:
            await _failed_once(ctx, m["task"], "transform failed: Error: slow and wrong (line 4)")
        assert sink.requests == []


async def test_a_patched_transform_runs_at_once_after_runaways(ctx: Context, client, account) -> None:
    """The pool slows down a destination whose calls keep being stopped (strikes: 4 in a row wait 2 s before
    the next call), keyed by the destination and its code's digest: the code PATCHed in place of the runaway
    runs its next delivery at once, not after the old code's wait."""
    with serving() as sink:
        endpoint, dst, made = await _four(ctx, client, account, sink.url, RUNAWAY)
        async with running(ctx):
            await _all_failed(ctx, made)
            fixed = "function handler(r) { r.headers['x-fixed'] = '1'; return r; }"
            resp = await client.patch(f"/v1/destinations/{dst}", json={"transform": fixed}, headers=account.headers)
            assert resp.status_code == 200, resp.text
            started = time.time()
            after = await make_task(ctx, sink.url, endpoint_id=endpoint, destination_id=dst)
            (got,) = await sink.wait_for(1)
            await settled(ctx, after["task"], "succeeded")
        assert got.headers["x-fixed"] == "1"
        assert got.at - started < 1.5  # the old key's wait: BACKOFF_S * 2 ** (4 - STRIKES_FREE) = 2 s


SLOW_OK = """function handler(r) {
  const t = Date.now();
  while (Date.now() - t < 900) {}
  r.headers["x-slow"] = "1";
  return r;
}"""


async def test_a_claims_slow_calls_that_send_are_each_delivered_once(ctx: Context, client, account) -> None:
    """4 calls of 0.9 s each, claimed together, all succeeding: their batch V8 stops at 1 s and runs again call
    by call, so their results come ~4.6 s after the claim, past the 1.5 s a claimed task has to start in.
    Their leases are renewed and each is sent once, with one delivery record. They were handed back, their
    results dropped, and every claim of them did the same again: never delivered (issue 42)."""
    with serving() as sink:
        _, _, made = await _four(ctx, client, account, sink.url, SLOW_OK)
        async with running(ctx):
            got = await sink.wait_for(4, timeout=20)
            await asyncio.gather(*(settled(ctx, m["task"], "succeeded", timeout=10) for m in made))
        assert len(sink.requests) == 4
        assert all(r.headers["x-slow"] == "1" for r in got)
        for m in made:
            assert (await task_status(ctx, m["task"]))["attempts"] == 1
            assert await has_attempts(ctx, m["task"], 1)


async def test_a_late_task_swept_meanwhile_is_not_renewed_and_sends_nothing(ctx: Context, client, account) -> None:
    """Two tasks claimed together, transformed ahead, and too late to start: each is leased again only if it is
    still this worker's. The one whose lease ran out and was swept and claimed by another worker meanwhile is
    left to that worker (its lease untouched) and its result dropped; only the other is renewed and sent."""
    with serving() as sink:
        tagged = "function handler(r) { r.headers['x-tagged'] = '1'; return r; }"
        endpoint, dst, _ = await add_destination(client, account, sink.url, tagged)
        made = [await make_task(ctx, sink.url, endpoint_id=endpoint, destination_id=dst) for _ in range(2)]
        worker = Deliver(ctx)
        try:
            async with ctx.pool.acquire() as conn:
                ask = db_tasks.Claim(free=2, window=16, blocked=[], room={}, per_destination=2, lease_s=60)
                claimed, *_ = await db_tasks.claim_ready(conn, ask)
                assert sorted(t.id for t in claimed) == sorted(m["task"] for m in made)
                await worker.transforms.ahead(claimed)
                kept, taken = claimed
                assert all(worker.transforms.sends_ahead(t) for t in claimed)
                await conn.execute(
                    "UPDATE delivery_tasks SET lease_expires_at = now() - interval '1 s' WHERE id = $1", taken.id
                )
                assert await db_tasks.sweep_expired(conn, max_attempts=5, exclude=[kept.id]) == 1
                (again,) = await db_tasks.lease(conn, [taken.id], lease_s=60)  # another worker's claim
                assert again.attempts == taken.attempts + 1
                before = await conn.fetchrow("SELECT lease_expires_at FROM delivery_tasks WHERE id = $1", taken.id)
                worker.returns.stale(list(claimed))
                await worker.returns.wait()
                assert not worker.transforms.sends_ahead(taken)
                after = await conn.fetchrow(
                    "SELECT status, attempts, lease_expires_at FROM delivery_tasks WHERE id = $1", taken.id
                )
                assert (after["status"], after["attempts"]) == ("in_flight", again.attempts)
                assert after["lease_expires_at"] == before["lease_expires_at"]
            await settled(ctx, kept.id, "succeeded")
            assert await has_attempts(ctx, kept.id, 1)
            assert await has_attempts(ctx, taken.id, 0)
        finally:
            await worker.close()
        (sent,) = sink.requests
        assert sent.headers["x-tagged"] == "1"
        assert sent.headers["x-hookyard-event-id"] == next(m["event"] for m in made if m["task"] == kept.id)


async def test_a_late_tasks_renewal_in_an_outage_loses_nothing(
    ctx: Context, client, account, servers: Servers, database_url: str
) -> None:
    """A late task with a transformed request whose renewal cannot reach Postgres: nothing is sent and
    nothing held, its result is dropped, and once its lease has run out it is swept and delivered once."""
    with serving() as sink:
        tagged = "function handler(r) { r.headers['x-tagged'] = '1'; return r; }"
        endpoint, dst, _ = await add_destination(client, account, sink.url, tagged)
        made = await make_task(ctx, sink.url, endpoint_id=endpoint, destination_id=dst)
        worker = Deliver(ctx)
        try:
            async with ctx.pool.acquire() as conn:
                ask = db_tasks.Claim(free=1, window=16, blocked=[], room={}, per_destination=1, lease_s=1)
                claimed, *_ = await db_tasks.claim_ready(conn, ask)
            await worker.transforms.ahead(claimed)
            assert worker.transforms.sends_ahead(claimed[0])
            async with refusing_connections(servers, database_url):
                worker.returns.stale(list(claimed))
                await worker.returns.wait()
                assert worker.ready.count == 0
                assert not worker.transforms.sends_ahead(claimed[0])
        finally:
            await worker.close()
        assert sink.requests == []
        await ctx.pool.expire_connections()  # their backends were ended: none met again mid-protocol
        async with running(ctx):
            (sent,) = await sink.wait_for(1, timeout=15)
            await settled(ctx, made["task"], "succeeded")
        assert sent.headers["x-tagged"] == "1"
        assert len(sink.requests) == 1
        assert await has_attempts(ctx, made["task"], 1)
