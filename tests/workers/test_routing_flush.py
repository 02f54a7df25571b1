"""Routing inside the flush: new events × active rules → one delivery task per (event, rule, destination),
committed with the events, announced to deliver workers by NOTIFY."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

from control.db.context import Context
from control.db.flush import store_batch
from control.db.tasks import NOTIFY_CHANNEL
from control.records.storable import event_row
from control.routing import route as route_module
from control.routing.route import Router
from control.workers.flush import Flush
from shared import ids
from shared.settings import Settings
from shared.wire import IngestRecord, encode_records
from tests.conftest import ingest_record
from tests.destination import add_destination, add_endpoint, add_rule
from tests.events_support import store_task

SHOP_HEADERS = [(b"content-type", b"application/json"), (b"x-shop-topic", b"orders/paid")]


def _record(endpoint_id: str, body: bytes = b'{"type":"order.paid","amount":2000}', **kw: object) -> IngestRecord:
    """The ingest record of a shop's order.paid webhook (conditions read its topic header and body)."""
    headers = kw.pop("headers", SHOP_HEADERS)
    return ingest_record(endpoint_id, body, headers=headers, source_ip="203.0.113.9", **kw)  # type: ignore[arg-type]


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

    # Routing and storing the same events again in one transaction, as a lane that lost its XACK would:
    # no event is new, so the statement creates no task, and the (event, rule, destination) key would
    # refuse a duplicate even with fresh task ids.
    async with ctx.pool.acquire() as conn, conn.transaction():
        rows = [event_row(r) for r in records]
        _, tasks = await Router(ctx).route(conn, rows)
        assert sorted(t[1:] for t in tasks) == expected
        stored = await store_batch(conn, rows, tasks)
        assert (stored.events, stored.tasks, stored.by_endpoint) == (0, 0, [])
        event_id, rule_id, destination_id = expected[0]
        with pytest.raises(asyncpg.UniqueViolationError):
            async with conn.transaction():  # a savepoint: the outer transaction goes on
                await store_task(
                    conn,
                    endpoint_id=endpoint_id,
                    event_id=event_id,
                    received_at=await conn.fetchval("SELECT received_at FROM events WHERE id = $1", event_id),
                    rule_id=rule_id,
                    destination_id=destination_id,
                )
        task_rows = await conn.fetch(
            "SELECT status, attempts, next_attempt_at <= now() AS due FROM delivery_tasks WHERE endpoint_id = $1",
            endpoint_id,
        )
    assert {(r["status"], r["attempts"], r["due"]) for r in task_rows} == {("pending", 0, True)}
    assert await _tasks(ctx, endpoint_id) == expected


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


async def test_a_handshake_is_stored_as_one_and_never_routed(ctx: Context, flush: Flush) -> None:
    """A provider's handshake the edge answered (Slack's url_verification...) is an event to see, never to
    deliver: a forward-all rule routes the ordinary event beside it and not the handshake."""
    async with ctx.pool.acquire() as conn:
        endpoint_id = await add_endpoint(conn)
        dst = await add_destination(conn, endpoint_id, "http://127.0.0.1:9/a")
        rule = await add_rule(conn, endpoint_id, [dst])
    challenge = b'{"type":"url_verification","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gm"}'
    handshake = _record(endpoint_id, challenge, provider="slack", event_type="slack_url_verification", handshake=True)
    ordinary = _record(endpoint_id, provider="slack", event_type="app_mention")
    await _flush(ctx, flush, [handshake, ordinary])
    assert await _tasks(ctx, endpoint_id) == [(ordinary.id, rule, dst)]
    async with ctx.pool.acquire() as conn:
        rows = await conn.fetch("SELECT id, handshake FROM events WHERE endpoint_id = $1", endpoint_id)
    assert {r["id"]: r["handshake"] for r in rows} == {handshake.id: True, ordinary.id: False}


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


async def test_a_rule_change_is_in_force_for_the_very_next_batch(ctx: Context, flush: Flush) -> None:
    """No message, no expiry: the batch's version check sees the committed change and reloads."""
    async with ctx.pool.acquire() as conn:
        endpoint_id = await add_endpoint(conn)
        dst = await add_destination(conn, endpoint_id, "http://127.0.0.1:9/a")
    first = _record(endpoint_id)
    await _flush(ctx, flush, [first])  # caches "no rules"
    async with ctx.pool.acquire() as conn:
        rule = await add_rule(conn, endpoint_id, [dst])
    second = _record(endpoint_id)
    await _flush(ctx, flush, [second])
    assert await _tasks(ctx, endpoint_id) == [(second.id, rule, dst)]
    async with ctx.pool.acquire() as conn:
        await conn.execute("UPDATE rules SET active = false WHERE id = $1", rule)
    third = _record(endpoint_id)
    await _flush(ctx, flush, [third])
    assert await _tasks(ctx, endpoint_id) == [(second.id, rule, dst)]


async def test_an_unchanged_endpoint_costs_one_version_query_per_batch(
    ctx: Context, flush: Flush, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cache is kept while versions hold: a batch asks for versions once and loads no rules."""
    async with ctx.pool.acquire() as conn:
        endpoints = [await add_endpoint(conn) for _ in range(3)]
        for endpoint_id in endpoints:
            await add_rule(conn, endpoint_id, [await add_destination(conn, endpoint_id, "http://127.0.0.1:9/a")])
    await _flush(ctx, flush, [_record(e) for e in endpoints])  # loads all three
    calls: list[str] = []
    for name in ("config_versions", "active_rules"):
        real = getattr(route_module.db_routing, name)

        async def spy(*args: object, _real=real, _name=name) -> object:
            calls.append(_name)
            return await _real(*args)

        monkeypatch.setattr(route_module.db_routing, name, spy)
    await _flush(ctx, flush, [_record(e) for e in endpoints for _ in range(5)])
    assert calls == ["config_versions"]
    async with ctx.pool.acquire() as conn:
        await conn.execute(
            "UPDATE rules SET condition_tree = $2 WHERE endpoint_id = $1", endpoints[0], {"op": "OR", "children": []}
        )
    calls.clear()
    await _flush(ctx, flush, [_record(e) for e in endpoints])
    assert calls == ["config_versions", "active_rules"]  # only the changed endpoint is reloaded


async def test_a_lane_that_read_older_rules_never_replaces_newer_ones(
    ctx: Context, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Lanes share a router's cache: a slow lane that read the rules before a change and stores them after a
    faster lane stored the new ones does not roll the cache back."""
    router = Router(ctx)
    async with ctx.pool.acquire() as conn:
        endpoint_id = await add_endpoint(conn)
        dst = await add_destination(conn, endpoint_id, "http://127.0.0.1:9/a")
        read_before = await route_module.db_routing.active_rules(conn, [endpoint_id])  # the slow lane's read
        rule = await add_rule(conn, endpoint_id, [dst])
        rows = [event_row(_record(endpoint_id))]
        assert [t[2:] for t in (await router.route(conn, rows))[1]] == [(rule, dst)]  # the fast lane
        newest = router._cache.get(endpoint_id).version

        async def stale(*_: object) -> list[asyncpg.Record]:
            return read_before

        with monkeypatch.context() as m:
            m.setattr(route_module.db_routing, "active_rules", stale)
            slow = await router._load(conn, [endpoint_id])  # the slow lane stores last
        assert slow[endpoint_id].version < newest
        assert router._cache.get(endpoint_id).version == newest
        assert [t[2:] for t in (await router.route(conn, rows))[1]] == [(rule, dst)]


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


async def test_only_events_new_in_this_batch_are_routed(ctx: Context) -> None:
    """An entry re-read together with new ones: its already-stored event is not routed again, not even by
    a rule created since (it was routed once, with the rules of its time), while the new event is."""
    flush = Flush(ctx, consumer="c2", block_ms=5, claim_every_s=0, router=Router(ctx))
    await flush.ensure_groups()
    async with ctx.pool.acquire() as conn:
        endpoint_id = await add_endpoint(conn)
        dst = await add_destination(conn, endpoint_id, "http://127.0.0.1:9/a")
        first_rule = await add_rule(conn, endpoint_id, [dst])
    old = _record(endpoint_id)
    await _flush(ctx, flush, [old])
    async with ctx.pool.acquire() as conn:
        later_rule = await add_rule(conn, endpoint_id, [dst])
    new = _record(endpoint_id)
    try:
        await _flush(ctx, flush, [old, new])
    finally:
        await flush.close()
    assert await _tasks(ctx, endpoint_id) == sorted(
        [(old.id, first_rule, dst), (new.id, first_rule, dst), (new.id, later_rule, dst)]
    )
    async with ctx.pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM events WHERE endpoint_id = $1", endpoint_id) == 2


async def test_forward_all_and_conditional_rules_on_one_endpoint(ctx: Context, flush: Flush) -> None:
    """Forward-all rules route without looking at the event (even one whose body is not JSON), next to
    conditional rules of the same endpoint that do look; nested empty groups count as forward-all."""
    async with ctx.pool.acquire() as conn:
        endpoint_id = await add_endpoint(conn)
        a = await add_destination(conn, endpoint_id, "http://127.0.0.1:9/a")
        b = await add_destination(conn, endpoint_id, "http://127.0.0.1:9/b")
        nested_all = await add_rule(
            conn, endpoint_id, [a, b], {"op": "OR", "children": [{"op": "AND", "children": []}]}
        )
        paid = await add_rule(
            conn, endpoint_id, [b], {"field": "body.type", "operator": "equals", "value": "order.paid"}
        )
        nothing = await add_rule(conn, endpoint_id, [a], {"op": "OR", "children": []})
    json_event = _record(endpoint_id)
    form = _record(endpoint_id, body=b"type=order.paid", headers=[])
    blocked = _record(endpoint_id, ip_allowed=False)
    await _flush(ctx, flush, [json_event, form, blocked])
    tasks = await _tasks(ctx, endpoint_id)
    assert tasks == sorted(
        [
            (json_event.id, nested_all, a),
            (json_event.id, nested_all, b),
            (json_event.id, paid, b),
            (form.id, nested_all, a),
            (form.id, nested_all, b),
        ]
    )
    assert all(rule != nothing for _, rule, _ in tasks)


async def test_only_forward_all_rules_route_without_a_view_of_the_event(ctx: Context, flush: Flush) -> None:
    async with ctx.pool.acquire() as conn:
        endpoint_id = await add_endpoint(conn)
        a = await add_destination(conn, endpoint_id, "http://127.0.0.1:9/a")
        b = await add_destination(conn, endpoint_id, "http://127.0.0.1:9/b")
        one = await add_rule(conn, endpoint_id, [a])
        two = await add_rule(conn, endpoint_id, [b, a])
    records = [_record(endpoint_id, body=b"\xff\xfe not json", headers=[]) for _ in range(3)]
    await _flush(ctx, flush, records)
    assert await _tasks(ctx, endpoint_id) == sorted(
        (r.id, rule, dst) for r in records for rule, dst in ((one, a), (two, b), (two, a))
    )


async def test_deleting_a_destination_or_endpoint_deletes_its_tasks(ctx: Context, flush: Flush) -> None:
    """delivery_tasks has no foreign keys (migration 0003); a trigger keeps their cascade."""
    async with ctx.pool.acquire() as conn:
        endpoint_id = await add_endpoint(conn)
        gone = await add_destination(conn, endpoint_id, "http://127.0.0.1:9/gone")
        kept = await add_destination(conn, endpoint_id, "http://127.0.0.1:9/kept")
        rule = await add_rule(conn, endpoint_id, [gone, kept])
    event = _record(endpoint_id)
    await _flush(ctx, flush, [event])
    assert await _tasks(ctx, endpoint_id) == sorted([(event.id, rule, gone), (event.id, rule, kept)])
    async with ctx.pool.acquire() as conn:
        await conn.execute("DELETE FROM destinations WHERE id = $1", gone)
        assert await _tasks(ctx, endpoint_id) == [(event.id, rule, kept)]
        await conn.execute("DELETE FROM endpoints WHERE id = $1", endpoint_id)
        assert await conn.fetchval("SELECT count(*) FROM delivery_tasks WHERE event_id = $1", event.id) == 0


async def test_a_task_for_another_endpoints_destination_is_refused(ctx: Context) -> None:
    """Without foreign keys the insert's own join is the check: a destination of the task's endpoint, alive."""
    async with ctx.pool.acquire() as conn:
        mine = await add_endpoint(conn)
        theirs = await add_endpoint(conn)
        their_dst = await add_destination(conn, theirs, "http://127.0.0.1:9/theirs")
        my_dst = await add_destination(conn, mine, "http://127.0.0.1:9/mine")
        rule = await add_rule(conn, mine, [my_dst])
        event = _record(mine)
        async with conn.transaction():
            stored = await store_batch(
                conn,
                [event_row(event)],
                [
                    (ids.new_id("task"), event.id, rule, their_dst),
                    (ids.new_id("task"), event.id, rule, "dst_01KAKZ6Z3J0000000000000000"),
                    (ids.new_id("task"), event.id, rule, my_dst),
                ],
            )
        assert (stored.events, stored.tasks) == (1, 1)
    assert await _tasks(ctx, mine) == [(event.id, rule, my_dst)]
    assert await _tasks(ctx, theirs) == []


async def test_a_body_nested_20000_deep_is_routed_as_one_without_body_fields(ctx: Context, flush: Flush) -> None:
    """Too deep to decode is as not JSON: rules on headers still match, body rules do not, and the batch
    (with another sender's event in it) is stored (issue 42: hostile input never stops the flush)."""
    async with ctx.pool.acquire() as conn:
        endpoint_id = await add_endpoint(conn)
        dst = await add_destination(conn, endpoint_id, "http://127.0.0.1:9/a")
        body_rule = await add_rule(conn, endpoint_id, [dst], {"field": "body.amount", "operator": "exists"})
        header_rule = await add_rule(
            conn, endpoint_id, [dst], {"field": "header.X-Shop-Topic", "operator": "equals", "value": "orders/paid"}
        )
    deep = _record(endpoint_id, body=b'{"amount": 1, "a":' + b"[" * 20_000 + b"]" * 20_000 + b"}")
    plain = _record(endpoint_id)
    await _flush(ctx, flush, [deep, plain])
    assert await _tasks(ctx, endpoint_id) == sorted(
        [(deep.id, header_rule, dst), (plain.id, body_rule, dst), (plain.id, header_rule, dst)]
    )
