"""Routing inside the flush: new events × active rules → one delivery task per (event, rule, destination),
committed with the events, announced to deliver workers by NOTIFY."""

from __future__ import annotations

import asyncio
import time

import asyncpg
import msgspec
import pytest

from control.db.tasks import NOTIFY_CHANNEL
from control.events_text import event_row
from control.routing.route import Router
from control.service import Context
from control.workers.flush import Flush
from shared import ids
from shared.settings import Settings
from shared.wire import IngestRecord, encode_records
from tests.destination import add_destination, add_endpoint, add_rule


@pytest.fixture
def settings(settings: Settings) -> Settings:
    return msgspec.structs.replace(settings, routing_cache_ttl_s=60.0)  # invalidation must come from the channel


def _record(endpoint_id: str, body: bytes = b'{"type":"order.paid","amount":2000}', **kw: object) -> IngestRecord:
    now = time.time()
    headers = kw.pop("headers", [(b"content-type", b"application/json"), (b"x-shop-topic", b"orders/paid")])
    return IngestRecord(
        id=ids.new_id("evt", int(now * 1000)),
        endpoint_id=endpoint_id,
        received_at_us=int(now * 1_000_000),
        method="POST",
        path="",
        query="",
        headers=headers,  # type: ignore[arg-type]
        body=body,
        source_ip="203.0.113.9",
        **kw,  # type: ignore[arg-type]
    )


async def _flush(ctx: Context, flush: Flush, records: list[IngestRecord]) -> None:
    await ctx.redis.xadd(ctx.keys.ingest_stream(0), {"r": encode_records(records)})
    while await flush.step():
        pass


async def _tasks(ctx: Context, endpoint_id: str) -> list[tuple[str, str, str]]:
    async with ctx.pool.acquire() as conn:
        rows = await conn.fetch(
            """SELECT event_id, rule_id, destination_id FROM delivery_tasks WHERE endpoint_id = $1
                ORDER BY event_id, rule_id, destination_id""",
            endpoint_id,
        )
    return [tuple(r) for r in rows]


@pytest.fixture
async def flush(ctx: Context):
    flush = Flush(ctx, consumer="c1", block_ms=5, claim_every_s=0)
    await flush.ensure_groups()
    yield flush
    await flush.close()


async def test_one_task_per_event_rule_and_destination_even_when_reprocessed(ctx: Context, flush: Flush) -> None:
    async with ctx.pool.acquire() as conn:
        endpoint_id = await add_endpoint(conn)
        a = await add_destination(conn, endpoint_id, "http://127.0.0.1:9/a")
        b = await add_destination(conn, endpoint_id, "http://127.0.0.1:9/b")
        everything = await add_rule(conn, endpoint_id, [a, b])
        paid = await add_rule(
            conn,
            endpoint_id,
            [b],
            {"op": "AND", "children": [{"field": "body.type", "operator": "equals", "value": "order.paid"}]},
        )
    records = [_record(endpoint_id), _record(endpoint_id, body=b'{"type":"order.created"}')]
    await _flush(ctx, flush, records)
    await _flush(ctx, flush, records)  # the same entry again, as after a crash between commit and XACK
    paid_id, created_id = records[0].id, records[1].id
    expected = sorted(
        [
            (paid_id, everything, a),
            (paid_id, everything, b),
            (paid_id, paid, b),
            (created_id, everything, a),
            (created_id, everything, b),
        ]
    )
    assert await _tasks(ctx, endpoint_id) == expected

    # Routing the same events again (the flush calls it once per new event; this is the key's guarantee).
    async with ctx.pool.acquire() as conn:
        rows = await conn.fetch("SELECT id, endpoint_id FROM events WHERE endpoint_id = $1", endpoint_id)
        created = await Router(ctx).route(conn, [event_row(r) for r in records], rows)
        task_rows = await conn.fetch(
            "SELECT status, attempts, next_attempt_at <= now() AS due FROM delivery_tasks WHERE endpoint_id = $1",
            endpoint_id,
        )
    assert created == 0
    assert {(r["status"], r["attempts"], r["due"]) for r in task_rows} == {("pending", 0, True)}


async def test_inactive_rules_and_blocked_ips_do_not_route(ctx: Context, flush: Flush) -> None:
    async with ctx.pool.acquire() as conn:
        endpoint_id = await add_endpoint(conn)
        dst = await add_destination(conn, endpoint_id, "http://127.0.0.1:9/a")
        active = await add_rule(conn, endpoint_id, [dst])
        await add_rule(conn, endpoint_id, [dst], active=False)
    allowed, unknown, blocked = (
        _record(endpoint_id, ip_allowed=True),
        _record(endpoint_id),
        _record(endpoint_id, ip_allowed=False),
    )
    await _flush(ctx, flush, [allowed, unknown, blocked])
    assert await _tasks(ctx, endpoint_id) == sorted([(allowed.id, active, dst), (unknown.id, active, dst)])


async def test_conditions_see_body_headers_and_meta(ctx: Context, flush: Flush) -> None:
    async with ctx.pool.acquire() as conn:
        endpoint_id = await add_endpoint(conn, environment="staging")
        dst = await add_destination(conn, endpoint_id, "http://127.0.0.1:9/a")

        def leaf(field: str, operator: str, value: object = None) -> dict:
            return {"field": field, "operator": operator, **({} if value is None else {"value": value})}

        big = await add_rule(
            conn, endpoint_id, [dst], {"op": "AND", "children": [leaf("body.amount", "equals", "2000")]}
        )
        topic = await add_rule(
            conn, endpoint_id, [dst], {"op": "AND", "children": [leaf("header.X-Shop-Topic", "equals", "orders/paid")]}
        )
        staging = await add_rule(
            conn,
            endpoint_id,
            [dst],
            {
                "op": "AND",
                "children": [
                    leaf("meta.environment", "equals", "staging"),
                    leaf("meta.provider", "equals", "commerce"),
                ],
            },
        )
    json_event = _record(endpoint_id, provider="commerce")
    not_json = _record(endpoint_id, body=b"amount=2000", headers=[(b"x-shop-topic", b"orders/create")])
    await _flush(ctx, flush, [json_event, not_json])
    assert await _tasks(ctx, endpoint_id) == sorted(
        [(json_event.id, big, dst), (json_event.id, topic, dst), (json_event.id, staging, dst)]
    )


async def test_rule_changes_reach_the_cache_through_the_rules_channel(ctx: Context, flush: Flush) -> None:
    async with ctx.pool.acquire() as conn:
        endpoint_id = await add_endpoint(conn)
        dst = await add_destination(conn, endpoint_id, "http://127.0.0.1:9/a")
    first = _record(endpoint_id)
    await _flush(ctx, flush, [first])  # caches "no rules" for a minute (the fixture's TTL)
    async with ctx.pool.acquire() as conn:
        rule = await add_rule(conn, endpoint_id, [dst])
    await ctx.redis.publish(ctx.keys.rules_channel, endpoint_id)  # as the rules service does after commit
    second = _record(endpoint_id)
    deadline = time.monotonic() + 5
    while True:  # a publish reaches the subscriber asynchronously: flush until the change is seen
        await _flush(ctx, flush, [second])
        if await _tasks(ctx, endpoint_id) or time.monotonic() > deadline:
            break
        second = _record(endpoint_id)
        await asyncio.sleep(0.01)
    assert await _tasks(ctx, endpoint_id) == [(second.id, rule, dst)]


async def test_a_committed_batch_with_tasks_notifies_deliver_workers(
    ctx: Context, flush: Flush, settings: Settings
) -> None:
    async with ctx.pool.acquire() as conn:
        endpoint_id = await add_endpoint(conn)
        await add_rule(conn, endpoint_id, [await add_destination(conn, endpoint_id, "http://127.0.0.1:9/a")])
    listener = await asyncpg.connect(settings.database_url)
    notified = asyncio.Event()
    await listener.add_listener(NOTIFY_CHANNEL, lambda *_: notified.set())
    try:
        await _flush(ctx, flush, [_record(endpoint_id)])
        await asyncio.wait_for(notified.wait(), 5)
    finally:
        await listener.close()


async def test_a_destination_deleted_meanwhile_is_skipped_not_failing_the_batch(ctx: Context, flush: Flush) -> None:
    async with ctx.pool.acquire() as conn:
        endpoint_id = await add_endpoint(conn)
        gone = await add_destination(conn, endpoint_id, "http://127.0.0.1:9/gone")
        kept = await add_destination(conn, endpoint_id, "http://127.0.0.1:9/kept")
        rule = await add_rule(conn, endpoint_id, [gone, kept])
    await _flush(ctx, flush, [_record(endpoint_id)])  # caches the rule with both destinations
    async with ctx.pool.acquire() as conn:
        await conn.execute("DELETE FROM destinations WHERE id = $1", gone)
    late = _record(endpoint_id)
    await _flush(ctx, flush, [late])
    assert (late.id, rule, kept) in await _tasks(ctx, endpoint_id)
    assert all(d != gone for _, _, d in await _tasks(ctx, endpoint_id))
    async with ctx.pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM events WHERE endpoint_id = $1", endpoint_id) == 2
