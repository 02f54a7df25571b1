"""Erasure against the learn worker (ADR 0041): a learner that read an event before the erasure deleted it
cannot put the erased value back into a schema's sketch after the scrub, and the two never deadlock.

Deterministic, no sleeps: a real learner is held between its read and its merge (``_Held``), its
transaction open; the erasure's step is seen waiting for it in ``pg_stat_activity``/``pg_blocking_pids``.
Real Postgres, Redis, flush, learn loop and erasure steps."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg

from control.db import erasures as db_erasures
from control.db import retention
from control.db.context import Context
from control.routing.route import Router
from control.schemas.batch import hash_value
from control.schemas.learn import Learner
from control.workers.erasures.step import advance
from control.workers.flush import Flush
from control.workers.learn import Learn
from shared.wire import IngestRecord, encode_records
from tests.conftest import make_account
from tests.erasure.conftest import erase, events_of, make_endpoint, run_erasures, stored
from tests.erasure.test_erasure import _hashes
from tests.helpers import db, wait_for
from tests.schemas.support import make_endpoint as bare_endpoint
from tests.schemas.support import record

ALICE = "cus_alice"


def _payment(customer: str, n: int = 0) -> dict[str, Any]:
    return {"id": f"evt_{n}", "type": "invoice.paid", "data": {"object": {"customer": customer, "amount": n}}}


class _Held(Learner):
    """The real learner, stopped after its step has read (and locked) the noted events, before it merges:
    the step's transaction stays open until ``release`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.has_read = asyncio.Event()
        self.release = asyncio.Event()
        self.pid = 0

    async def learn(self, conn: asyncpg.Connection, rows: Any) -> None:
        self.pid = conn.get_server_pid()
        self.has_read.set()
        await self.release.wait()
        await super().learn(conn, rows)


async def _flush_only(ctx: Context, records: list[IngestRecord]) -> None:
    """The records stored by the real flush and noted for learning, not learned (no learner runs)."""
    await ctx.redis.xadd(ctx.keys.ingest_stream(0), {"r": encode_records(records)})
    step = Flush(ctx, consumer="c", block_ms=5, claim_every_s=0, router=Router(ctx), learn=True)
    await step.ensure_groups()
    while await step.step():
        pass


async def _blocked_by(conn: asyncpg.Connection, pid: int) -> int | None:
    """A backend waiting for a lock that backend ``pid`` holds."""
    return await conn.fetchval(
        """SELECT pid FROM pg_stat_activity
            WHERE datname = current_database() AND wait_event_type = 'Lock' AND $1 = any(pg_blocking_pids(pid))""",
        pid,
    )


async def test_a_learner_that_read_an_erased_event_cannot_put_its_value_back(
    client, account, ctx, conn, database_url
) -> None:
    endpoint = await make_endpoint(client, account)  # labels customer
    await stored(ctx, endpoint, [_payment("cus_bob")])  # learned: the schema exists
    alice = [record(endpoint, _payment(ALICE, n)) for n in range(1, 4)]
    await _flush_only(ctx, alice)
    job = await erase(client, account, endpoint, "meta.label.customer", ALICE)
    assert (await advance(ctx))[1] == 1  # past the ingest stage: the events are stored

    learner = _Held()
    learning = asyncio.create_task(Learn(ctx, learner=learner).step())
    await learner.has_read.wait()  # the learner has read alice's events; it has not merged them yet
    step = asyncio.create_task(advance(ctx))  # the events stage: finds alice's events and deletes them

    async def settled() -> str | int | None:
        return "done" if step.done() else await _blocked_by(conn, learner.pid)

    seen = await wait_for(settled, timeout=20)
    await run_erasures(ctx)  # whatever is not held: the job's finish stage, if the deletion did not wait
    learner.release.set()
    assert await learning == 3  # alice's note (the seed's was learned by ``stored``)
    await step
    await run_erasures(ctx)

    done = (await client.get(f"/v1/erasures/{job['id']}", headers=account.headers)).json()
    assert (done["state"], done["matched"], done["erased"]) == ("completed", 3, 3), done
    assert not await events_of(database_url, endpoint) & {r.id for r in alice}
    hashes = await _hashes(conn, endpoint)
    assert hash_value(ALICE) not in hashes, "a learner merged the erased value after the erasure's scrub"
    assert hash_value("cus_bob") in hashes
    samples = await conn.fetchval(
        """SELECT s.sample_count FROM schemas s JOIN schema_endpoints se ON se.schema_id = s.id
            WHERE se.endpoint_id = $1""",
        endpoint,
    )
    assert samples == 4, "the held learner learned alice's events (and the scrub took the value out again)"
    assert seen != "done", "the erasure deleted events a learner had read without waiting for its commit"


async def test_a_held_learner_does_not_hold_body_retention_or_the_flush(client, account, ctx, database_url) -> None:
    """Its KEY SHARE locks stop a DELETE only: retention's in-place update of expired bodies and the flush's
    insert of a re-processed entry (``ON CONFLICT DO NOTHING``) go on while the learner holds the events."""
    endpoint = await make_endpoint(client, account)
    records = [record(endpoint, _payment(ALICE, n)) for n in range(3)]
    await _flush_only(ctx, records)
    learner = _Held()
    learning = asyncio.create_task(Learn(ctx, learner=learner).step())
    await learner.has_read.wait()
    try:
        async with db(database_url) as other, other.transaction():
            await other.execute("SET LOCAL lock_timeout = '20s'")  # a wait would fail the test, not hang it
            cutoff = datetime.now(UTC) + timedelta(minutes=1)
            expired = await retention.expire_batch(other, endpoint, since=None, cutoff=cutoff, limit=100)
            assert expired.events == 3
        await _flush_only(ctx, records)  # the same entry again: its events exist, nothing new is stored
    finally:
        learner.release.set()
    assert await learning == 3


async def test_an_erasure_waiting_for_a_learner_holds_none_of_the_later_events(ctx, database_url) -> None:
    """The erasure locks the events it deletes in arrival order, the order a learner locks those it reads:
    waiting for the first, it holds none after it, so a learner that locked the first gets the rest (rather
    than each waiting for the other, a deadlock Postgres breaks by aborting one after a second)."""
    endpoint = await bare_endpoint(database_url, (await make_account(database_url)).id)
    await _flush_only(ctx, [record(endpoint, _payment(ALICE, n)) for n in range(4)])
    async with db(database_url) as holder, db(database_url) as eraser:
        rows = await holder.fetch(
            "SELECT id, received_at FROM events WHERE endpoint_id = $1 ORDER BY received_at, id", endpoint
        )
        first, rest = rows[0], [r["id"] for r in rows[1:]]
        async with holder.transaction():  # a learner that has locked the first of its events
            await holder.execute("SELECT 1 FROM events WHERE id = $1 FOR KEY SHARE", first["id"])

            async def deleting() -> int:
                async with eraser.transaction():
                    listed = [(r["id"], r["received_at"]) for r in reversed(rows)]  # any order the page gives
                    return (await db_erasures.erase(eraser, endpoint, listed)).events

            erasing = asyncio.create_task(deleting())
            await wait_for(lambda: _blocked_by(holder, holder.get_server_pid()), timeout=20)
            held = False
            try:  # the learner's next locks: free, or it would wait for an erasure that waits for it
                await holder.execute("SELECT 1 FROM events WHERE id = any($1::text[]) FOR KEY SHARE NOWAIT", rest)
            except asyncpg.LockNotAvailableError:
                held = True
        assert await erasing == 4
    assert not held, "the erasure, waiting for the learner's first event, holds a later one"
