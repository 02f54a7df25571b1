"""An endpoint's body_retention_days: the sweep removes bodies and headers (and its deliveries' bodies) in
batches, the event and delivery records stay, the API shows ``body: null, body_expired: true``, replay and
retry are 409 ``body_expired``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from control.workers.sweep.loop import Sweep
from control.workers.sweep.retention import expire_bodies
from tests.destination import MATCH_ALL, add_destination, add_rule
from tests.events_support import Ev, store, store_delivery, store_task
from tests.helpers import assert_error, create_endpoint

BODY = b'{"customer": "cus_secret_42", "amount": 100}'


async def _retain(client, account, endpoint_id, days):
    resp = await client.patch(
        f"/v1/endpoints/{endpoint_id}", json={"body_retention_days": days}, headers=account.headers
    )
    assert resp.status_code == 200, resp.text
    return resp.json()


def _ago(days: float, seconds: int = 0) -> datetime:
    return datetime.now(UTC) - timedelta(days=days, seconds=seconds)


def _old_and_new(endpoint_id: str, old: int) -> tuple[list[Ev], Ev]:
    olds = [
        Ev(
            endpoint_id,
            received_at=_ago(2, i),
            body=BODY,
            headers={"content-type": "application/json", "authorization": "Bearer tok"},
            event_type="invoice.paid",
            provider="payments",
            idempotency_key=f"key_{i}",
            signature_valid=True,
            labels=[{"key": "plan", "value": "gold", "color": "blue"}],
        )
        for i in range(old)
    ]
    return olds, Ev(endpoint_id, received_at=_ago(0, 5), body=BODY, event_type="invoice.paid")


async def test_setting_is_shown_changed_and_checked(client, account, endpoint):
    shown = (await client.get(f"/v1/endpoints/{endpoint}", headers=account.headers)).json()
    assert shown["body_retention_days"] is None
    assert (await _retain(client, account, endpoint, 7))["body_retention_days"] == 7
    assert (await _retain(client, account, endpoint, None))["body_retention_days"] is None
    for bad in (0, 3651, "7"):
        resp = await client.patch(
            f"/v1/endpoints/{endpoint}", json={"body_retention_days": bad}, headers=account.headers
        )
        assert_error(resp, 400, "validation_error", field="body_retention_days")


async def test_sweep_expires_bodies_in_batches_and_keeps_the_records(client, account, endpoint, conn, ctx):
    olds, new = _old_and_new(endpoint, 5)
    await store(conn, None, None, [*olds, new])
    for ev in olds[:2]:
        await store_delivery(conn, endpoint, ev.id, created_at=ev.received_at, response_body="thanks cus_secret_42")
    await _retain(client, account, endpoint, 1)

    done = await expire_bodies(ctx, batch=2)
    assert (done.events, done.deliveries, done.finished) == (5, 2, True)

    for ev in olds:
        got = (await client.get(f"/v1/events/{ev.id}", headers=account.headers)).json()
        assert got["body"] is None
        assert got["body_expired"] is True
        assert got["headers"] == {}
        assert got["body_size"] == len(BODY)
        assert (got["method"], got["event_type"], got["provider"], got["idempotency_key"]) == (
            "POST",
            "invoice.paid",
            "payments",
            ev.idempotency_key,
        )
        assert got["signature_valid"] is True
        assert got["labels"][0]["value"] == "gold"
    kept = (await client.get(f"/v1/events/{olds[0].id}", headers=account.headers)).json()["deliveries"]
    assert len(kept) == 1
    assert (kept[0]["response_status"], kept[0]["success"], kept[0]["latency_ms"]) == (200, True, 12)
    assert kept[0]["request_body"] is None
    assert kept[0]["response_body"] is None
    assert not kept[0]["request_headers"]

    fresh = (await client.get(f"/v1/events/{new.id}", headers=account.headers)).json()
    assert fresh["body_expired"] is False
    assert "cus_secret_42" in fresh["body"]
    # the body is no longer searchable; the metadata still is
    found = await client.get(f"/v1/endpoints/{endpoint}/events", params={"q": "cus_secret"}, headers=account.headers)
    assert [e["id"] for e in found.json()["events"]] == [new.id]
    found = await client.get(f"/v1/endpoints/{endpoint}/events", params={"q": "gold"}, headers=account.headers)
    assert len(found.json()["events"]) == 5
    raw = await conn.fetchval("SELECT count(*) FROM events WHERE position('cus_secret' in encode(body, 'escape')) > 0")
    assert raw == 1


async def test_watermark_makes_the_next_round_read_nothing_and_a_budget_spreads_rounds(
    client, account, endpoint, conn, ctx
):
    olds, _ = _old_and_new(endpoint, 4)
    await store(conn, None, None, olds)
    await _retain(client, account, endpoint, 1)
    stopped = await expire_bodies(ctx, batch=2, budget_s=0)
    assert (stopped.events, stopped.finished) == (0, False)
    assert (await expire_bodies(ctx, batch=2)).events == 4
    watermark = await conn.fetchval("SELECT bodies_expired_before FROM endpoints WHERE id = $1", endpoint)
    assert watermark is not None
    assert watermark > olds[0].received_at
    again = await expire_bodies(ctx, batch=2)
    assert (again.events, again.finished) == (0, True)


async def test_endpoints_without_a_shorter_retention_keep_bodies(client, account, conn, ctx):
    plain = (await create_endpoint(client, account.headers))["id"]
    longer = (await create_endpoint(client, account.headers))["id"]
    await _retain(client, account, longer, ctx.settings.retention_days)
    olds = [*_old_and_new(plain, 2)[0], *_old_and_new(longer, 2)[0]]
    await store(conn, None, None, olds)
    assert (await expire_bodies(ctx)).events == 0
    assert await conn.fetchval("SELECT count(*) FROM events WHERE body_expired_at IS NOT NULL") == 0


async def test_sweep_round_runs_it(client, account, endpoint, conn, ctx):
    olds, _ = _old_and_new(endpoint, 3)
    await store(conn, None, None, olds)
    await _retain(client, account, endpoint, 1)
    await Sweep(ctx).step()
    assert await conn.fetchval("SELECT count(*) FROM events WHERE body_expired_at IS NOT NULL") == 3


async def test_replay_of_an_expired_event_is_409_naming_why(client, account, endpoint, conn, ctx):
    olds, _ = _old_and_new(endpoint, 1)
    await store(conn, None, None, olds)
    await _retain(client, account, endpoint, 1)
    await expire_bodies(ctx)
    resp = await client.post(
        f"/v1/events/{olds[0].id}/replay", json={"url": "http://127.0.0.1:9/hook"}, headers=account.headers
    )
    error = assert_error(resp, 409, "body_expired")
    assert "body_retention_days" in error["message"]
    assert olds[0].id in error["message"]


async def test_manual_retry_of_a_delivery_whose_event_body_expired_is_409_naming_why(
    client, account, endpoint, conn, ctx
):
    olds, _ = _old_and_new(endpoint, 1)
    (ev,) = olds
    await store(conn, None, None, olds)
    dst = await add_destination(conn, endpoint, "http://127.0.0.1:9/hook")
    rule = await add_rule(conn, endpoint, [dst], MATCH_ALL)
    task = await store_task(
        conn, endpoint_id=endpoint, event_id=ev.id, received_at=ev.received_at, rule_id=rule, destination_id=dst
    )
    await conn.execute("UPDATE delivery_tasks SET status = 'failed', attempts = 3 WHERE id = $1", task)
    delivery = await store_delivery(
        conn, endpoint, ev.id, created_at=ev.received_at, success=False, task_id=task, destination_id=dst, rule_id=rule
    )
    await _retain(client, account, endpoint, 1)
    await expire_bodies(ctx)
    resp = await client.post(f"/v1/deliveries/{delivery}/retry", headers=account.headers)
    error = assert_error(resp, 409, "body_expired")
    assert "body_retention_days" in error["message"]
    assert ev.id in error["message"]
    assert await conn.fetchval("SELECT status FROM delivery_tasks WHERE id = $1", task) == "failed"  # nothing due
