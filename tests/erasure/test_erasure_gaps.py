"""What a privacy officer would check after an erasure: records the edge acknowledged before the request but
the flush had not stored yet are erased too; a job that cannot go on for its data is ``failed`` with why,
while an outage is waited out; dead letters match ``meta.label.*`` as the flush would have labelled them;
and a replay in flight when its event is erased records nothing afterwards."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit

import httpx
import msgspec
import pytest
import redis.asyncio as aioredis

from control.db.faults import UNAVAILABLE
from control.records.replay import ReplayRequest
from control.service.replay import replay_event
from control.support import ingest_marks
from control.workers.erasures.loop import Erasures
from control.workers.erasures.step import MAX_FAILURES, advance
from control.workers.flush import Flush
from control.workers.loop import run_loops
from edge.app import create_app as create_edge
from shared.settings import Settings
from shared.wire import encode_records
from tests.destination import serving
from tests.erasure.conftest import erase, events_of, make_endpoint, run_erasures, stored
from tests.helpers import db, wait_for
from tests.schemas.support import principal, record

ALICE = "cus_alice"


def _payment(customer: str, n: int = 0) -> dict[str, Any]:
    return {"id": f"evt_{n}", "type": "invoice.paid", "data": {"object": {"customer": customer, "amount": n}}}


@contextlib.asynccontextmanager
async def _edge(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    edge = create_edge(settings)
    await edge.startup()
    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=edge), base_url="http://edge.test") as c:
            yield c
    finally:
        await edge.shutdown()


async def _job(client: Any, account: Any, job_id: str) -> dict[str, Any]:
    return (await client.get(f"/v1/erasures/{job_id}", headers=account.headers)).json()


async def test_events_acknowledged_before_the_request_but_not_yet_flushed_are_erased(
    client, account, ctx, settings, database_url
) -> None:
    endpoint = await make_endpoint(client, account)
    path = urlsplit((await client.get(f"/v1/endpoints/{endpoint}", headers=account.headers)).json()["ingest_url"]).path
    async with _edge(settings) as edge:  # no flush runs: the records stay in the ingest stream
        for n, customer in enumerate((ALICE, "cus_bob", ALICE, ALICE)):
            ack = await edge.post(path, content=msgspec.json.encode(_payment(customer, n)))
            assert ack.status_code == 200, ack.text
    assert await events_of(database_url, endpoint) == set()

    job = await erase(client, account, endpoint, "meta.label.customer", ALICE)
    await run_erasures(ctx)
    waiting = await _job(client, account, job["id"])
    assert (waiting["state"], waiting["matched"], waiting["value"]) == ("pending", 0, ALICE), "it waits for the flush"

    flush = Flush(ctx, consumer="c", block_ms=5, claim_every_s=0)
    await run_loops([flush], asyncio.Event(), burst=True)
    assert len(await events_of(database_url, endpoint)) == 4
    await run_erasures(ctx)
    done = await _job(client, account, job["id"])
    assert (done["state"], done["matched"], done["erased"], done["scanned"]) == ("completed", 3, 3, 4)
    async with db(database_url) as conn:
        (kept,) = await conn.fetch("SELECT body FROM events WHERE endpoint_id = $1", endpoint)
        assert b"cus_bob" in kept["body"]
        tasks = await conn.fetchval("SELECT count(*) FROM delivery_tasks WHERE endpoint_id = $1", endpoint)
        assert tasks == 1


async def test_a_poison_row_fails_the_job_naming_it(client, account, ctx, database_url) -> None:
    endpoint = await make_endpoint(client, account)
    ids = await stored(ctx, endpoint, [_payment(ALICE, 1), _payment(ALICE, 2)])
    async with db(database_url) as conn:  # labels the flush could never have written
        await conn.execute("UPDATE events SET labels = '[1]'::jsonb WHERE id = $1", ids[1])
    job = await erase(client, account, endpoint, "body.data.object.customer", ALICE)
    await run_loops([Erasures(ctx, retry_s=0)], asyncio.Event(), burst=True)
    failed = await _job(client, account, job["id"])
    assert (failed["state"], failed["value"], failed["erased"]) == ("failed", None, 0)
    assert failed["finished_at"] is not None
    assert failed["error"].startswith(f"events stage: event {ids[1]} cannot be read to match it (TypeError"), failed
    async with db(database_url) as conn:
        tries = await conn.fetchval("SELECT failures FROM erasure_jobs WHERE id = $1", job["id"])
    assert tries == MAX_FAILURES


async def test_a_stored_field_that_no_longer_compiles_fails_the_job(client, account, ctx, database_url) -> None:
    endpoint = await make_endpoint(client, account)
    job = await erase(client, account, endpoint, "body.data.object.customer", ALICE)
    async with db(database_url) as conn:
        bad = "UPDATE erasure_jobs SET field = 'body..customer', stage = 'events' WHERE id = $1"
        await conn.execute(bad, job["id"])
    await run_loops([Erasures(ctx, retry_s=0)], asyncio.Event(), burst=True)
    failed = await _job(client, account, job["id"])
    assert failed["state"] == "failed"
    assert failed["error"].startswith("events stage: the stored field and value no longer make a condition"), failed


async def test_a_redis_outage_is_waited_out_never_failed(client, account, ctx, database_url) -> None:
    endpoint = await make_endpoint(client, account)
    await stored(ctx, endpoint, [_payment(ALICE, 1)])
    job = await erase(client, account, endpoint, "body.data.object.customer", ALICE)
    away = aioredis.Redis.from_url("redis://127.0.0.1:1/0")  # nothing listens: every command is refused
    cut_off = dataclasses.replace(ctx, redis=away)
    try:
        with pytest.raises(UNAVAILABLE):  # the first stage reads the ingest streams
            await advance(cut_off, retry_s=0)
    finally:
        await away.aclose()
    async with db(database_url) as conn:
        row = await conn.fetchrow("SELECT state, stage, failures, error FROM erasure_jobs WHERE id = $1", job["id"])
    assert tuple(row) == ("pending", "ingest", 0, None)
    await run_erasures(ctx)
    assert (await _job(client, account, job["id"]))["state"] == "completed"


async def test_a_postgres_backend_killed_mid_step_is_waited_out(client, account, ctx, database_url) -> None:
    endpoint = await make_endpoint(client, account)
    (held,) = await stored(ctx, endpoint, [_payment(ALICE, 1)])
    job = await erase(client, account, endpoint, "body.data.object.customer", ALICE)
    await advance(ctx, retry_s=0)  # past the ingest stage
    async with db(database_url) as holder, db(database_url) as conn:
        async with holder.transaction():
            await holder.execute("SELECT 1 FROM events WHERE id = $1 FOR UPDATE", held)
            step = asyncio.create_task(advance(ctx, retry_s=0))

            async def waiting() -> int | None:
                return await conn.fetchval(
                    """SELECT pid FROM pg_stat_activity
                        WHERE datname = current_database() AND wait_event_type = 'Lock'"""
                )

            pid = await wait_for(waiting, timeout=20, interval=0.02)
            await conn.execute("SELECT pg_terminate_backend($1)", pid)
            with pytest.raises(UNAVAILABLE):
                await step
        row = await conn.fetchrow("SELECT state, stage, failures, error FROM erasure_jobs WHERE id = $1", job["id"])
    assert tuple(row) == ("running", "events", 0, None)
    await run_erasures(ctx)
    done = await _job(client, account, job["id"])
    assert (done["state"], done["erased"]) == ("completed", 1)


async def test_dead_letters_match_labels_the_endpoint_rules_would_give_them(client, account, ctx) -> None:
    endpoint = await make_endpoint(client, account)  # labels customer from data.object.customer
    stream = ctx.keys.dead_letter_stream(0)
    for customer in (ALICE, "cus_bob"):
        r = record(endpoint, _payment(customer))
        fields = {"r": encode_records([r]), "error": b"refused", "entry": b"1-0", "event": r.id.encode()}
        await ctx.redis.xadd(stream, {**fields, "endpoint": endpoint.encode()})
    job = await erase(client, account, endpoint, "meta.label.customer", ALICE)
    await run_erasures(ctx)
    done = await _job(client, account, job["id"])
    assert (done["state"], done["dead_letters_erased"]) == ("completed", 1)
    (left,) = await ctx.redis.xrange(stream)
    assert b"cus_bob" in left[1][b"r"]


async def test_a_replay_in_flight_when_its_event_is_erased_records_nothing(client, account, ctx, database_url) -> None:
    endpoint = await make_endpoint(client, account)
    (event,) = await stored(ctx, endpoint, [_payment(ALICE, 1)])
    with serving() as receiver:
        receiver.hold()
        # the service the /v1 route calls, in this loop (the test client would finish the request first)
        replay = asyncio.create_task(replay_event(ctx, principal(account.id), event, ReplayRequest(url=receiver.url)))
        await receiver.wait_for(1)  # sent, its answer held: the replay has not recorded anything yet
        job = await erase(client, account, endpoint, "body.data.object.customer", ALICE)
        await run_erasures(ctx)
        assert (await _job(client, account, job["id"]))["erased"] == 1
        receiver.release()
        outcome = await replay
    assert (outcome.status, outcome.success) == (200, True), outcome
    async with db(database_url) as conn:
        left = await conn.fetchval("SELECT count(*) FROM deliveries WHERE event_id = $1", event)
    assert left == 0, "the replay re-created a delivery record, bodies and all, of an erased event"


async def test_the_marks_are_passed_only_once_every_entry_up_to_them_is_stored(ctx) -> None:
    """What the flush leaves in a stream: an entry read and not acknowledged holds a mark; one acknowledged
    whose XDEL was lost does not; one added after the mark never does."""
    redis, keys = ctx.redis, ctx.keys
    stream = keys.ingest_stream(0)
    first = (await redis.xadd(stream, {"r": b"x"})).decode()
    await redis.xgroup_create(stream, "flush", id="0")
    marks = await ingest_marks.marks(redis, keys)
    assert marks[0] == first
    assert await ingest_marks.stored_through(redis, keys, marks) == 0  # not read yet
    await redis.xreadgroup("flush", "c", {stream: ">"}, count=1)
    assert await ingest_marks.stored_through(redis, keys, marks) == 0  # read, not stored
    await redis.xadd(stream, {"r": b"later"})
    await redis.xack(stream, "flush", first)  # stored and acknowledged, its XDEL lost
    assert await ingest_marks.stored_through(redis, keys, marks) is None
    assert await ingest_marks.stored_through(redis, keys, [None]) is None
