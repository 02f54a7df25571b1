"""Schema learning in its own worker (ADR 0041): the flush notes new events and learns nothing; the learn loop
learns every noted event exactly once, with several learners at once and after one dies mid-step.

Real Postgres and Redis: the real flush (``control.workers.flush``) fills the queue, real learn loops
(``control.workers.learn``) drain it; a learner "dies" by having its Postgres backend terminated while it
holds its notes."""

from __future__ import annotations

import asyncio

import asyncpg

from control.db.context import Context
from control.schemas.learn import Learner
from control.service import schemas as service
from control.workers import LOOP_NAMES
from control.workers.flush import Flush
from control.workers.learn import Learn
from control.workers.main import build_loops
from tests.conftest import make_account
from tests.helpers import wait_for
from tests.schemas.support import flush_only, make_endpoint, principal, record


async def _noted(conn: asyncpg.Connection, event_ids: list[str]) -> int:
    """How many of ``event_ids`` wait in the learning queue."""
    return await conn.fetchval(
        "SELECT count(*) FROM schema_learn_queue q, unnest(q.event_ids) i WHERE i = any($1::text[])", event_ids
    )


async def _drain(learn: Learn) -> int:
    total = 0
    while n := await learn.step():
        total += n
    return total


async def test_the_flush_notes_new_events_once_and_learns_nothing(ctx: Context, database_url: str) -> None:
    account = await make_account(database_url)
    endpoint_id = await make_endpoint(database_url, account.id)
    records = [record(endpoint_id, {"type": "t", "a": i}) for i in range(120)]
    refused = record(endpoint_id, {"type": "t", "forged": 1}, signature_valid=False)
    await flush_only(ctx, [*records, refused])
    await flush_only(ctx, records)  # the same events again (a re-processed entry): not noted again
    ids = [r.id for r in records]
    async with ctx.pool.acquire() as conn:
        assert await _noted(conn, ids) == len(ids)
        assert await _noted(conn, [refused.id]) == 0  # a refused event is never learned: not even noted
        assert await conn.fetchval("SELECT count(*) FROM schemas WHERE account_id = $1", account.id) == 0
    assert await _drain(Learn(ctx, learner=Learner())) >= len(ids)
    (schema,) = (await service.list_schemas(ctx, principal(account.id))).schemas
    assert schema.sample_count == len(ids)
    async with ctx.pool.acquire() as conn:
        assert await _noted(conn, ids) == 0


async def test_learners_at_once_learn_each_event_once(ctx: Context, database_url: str) -> None:
    """Three learners (three processes' caches) share one queue of many small notes: every event counted once,
    presence exact."""
    account = await make_account(database_url)
    endpoint_id = await make_endpoint(database_url, account.id)
    records = [record(endpoint_id, {"type": "t", "a": i, **({"b": "x"} if i % 4 == 0 else {})}) for i in range(400)]
    await flush_only(ctx, records, per_entry=10)  # one entry per batch at most: many notes
    learners = [Learn(ctx, learner=Learner(), notes=1) for _ in range(3)]
    learned = await asyncio.gather(*(_drain(learn) for learn in learners))
    assert sum(learned) == len(records)
    (schema,) = (await service.list_schemas(ctx, principal(account.id))).schemas
    assert schema.sample_count == len(records)
    assert {f.path: f.presence for f in schema.fields} == {"a": 1.0, "b": 0.25, "type": 1.0}


async def test_a_learner_killed_mid_step_leaves_its_notes_for_another(ctx: Context, database_url: str) -> None:
    """Killed while it holds its notes (taken, events read, waiting for a schema's lock): nothing of that
    step is learned, and the next learner learns those events once."""
    account = await make_account(database_url)
    endpoint_id = await make_endpoint(database_url, account.id)
    first = [record(endpoint_id, {"type": "t", "a": 1}) for _ in range(5)]
    await flush_only(ctx, first)
    await _drain(Learn(ctx, learner=Learner()))  # the schema exists: the next learner will wait for its lock
    later = [record(endpoint_id, {"type": "t", "a": 1, "b": True}) for _ in range(15)]
    await flush_only(ctx, later)
    blocker = await asyncpg.connect(database_url)
    victim = Learn(ctx, learner=Learner())
    try:
        async with blocker.transaction():
            await blocker.execute("SELECT 1 FROM schemas WHERE account_id = $1 FOR UPDATE", account.id)
            step = asyncio.ensure_future(victim.step())

            async def waiting() -> int | None:
                return await blocker.fetchval(
                    """SELECT pid FROM pg_stat_activity
                        WHERE datname = current_database() AND pid <> pg_backend_pid() AND wait_event_type = 'Lock'"""
                )

            pid = await wait_for(waiting, timeout=10)
            assert await blocker.fetchval("SELECT pg_terminate_backend($1)", pid)
            results = await asyncio.gather(step, return_exceptions=True)
            assert isinstance(results[0], asyncpg.PostgresError | asyncpg.InterfaceError | OSError), results
    finally:
        await blocker.close()
    async with ctx.pool.acquire() as conn:
        assert await _noted(conn, [r.id for r in later]) == len(later)  # the killed step's notes are still there
    assert await _drain(Learn(ctx, learner=Learner())) == len(later)
    (schema,) = (await service.list_schemas(ctx, principal(account.id))).schemas
    assert schema.sample_count == len(first) + len(later)
    assert {f.path: f.presence for f in schema.fields} == {"a": 1.0, "b": 0.75, "type": 1.0}


async def test_the_worker_runs_a_learn_loop(ctx: Context) -> None:
    """``hookyard worker`` runs every loop by default, the learn loop among them (``hookyard up`` runs it in
    a process of its own)."""
    assert "learn" in LOOP_NAMES
    loops = build_loops(ctx, ())
    assert [type(loop) for loop in loops].count(Learn) == 1
    assert all(loop.learn for loop in loops if isinstance(loop, Flush))
