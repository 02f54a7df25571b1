"""POST /v1/deliveries/{id}/retry: a delivery the schedule gave up on gets one more attempt, a scheduled
retry comes forward, an attempt in flight is 409, and the single retry's errors."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from control.db.context import Context
from shared.settings import Settings
from tests.conftest import make_account
from tests.delivery.retries.support import endpoint_with_destinations
from tests.delivery.retries_support import fail_deliveries, workers
from tests.destination import Destination, Reply, deliveries_of, settled, task_status
from tests.events_support import Ev, store, store_delivery, store_task
from tests.helpers import assert_error, db, parse_ts, wait_for


async def test_a_delivery_the_schedule_gave_up_on_gets_one_more_attempt(
    client, account, ctx: Context, destination: Destination
) -> None:
    destination.reply(default=Reply(status=500, body=b"down"))
    made = await endpoint_with_destinations(client, account, destination.url)
    ev = Ev(made["endpoint"])
    async with db(ctx.settings.database_url) as conn:
        await store(conn, None, None, [ev])
        task_id = await store_task(
            conn,
            endpoint_id=made["endpoint"],
            event_id=ev.id,
            received_at=ev.received_at,
            rule_id=made["rules"][0],
            destination_id=made["destinations"][0],
        )
    async with workers(ctx):
        await settled(ctx, task_id, "failed", timeout=30)
    first, second = await deliveries_of(ctx, ev.id)
    assert [(d["attempt_number"], d["success"]) for d in (first, second)] == [(1, False), (2, False)]

    destination.reply(default=Reply(status=200))
    resp = await client.post(f"/v1/deliveries/{first['id']}/retry", headers=account.headers)  # any attempt
    assert resp.status_code == 202, resp.text
    retry = resp.json()
    assert parse_ts(retry.pop("due_at")) <= datetime.now(UTC)
    assert retry == {
        "delivery_id": first["id"],
        "event_id": ev.id,
        "destination_id": made["destinations"][0],
        "rule_id": made["rules"][0],
        "previous_status": "failed",
        "status": "pending",
        "attempt_number": 3,
    }
    async with workers(ctx):
        await settled(ctx, task_id, "succeeded", timeout=30)
        sent = await destination.wait_for(3)
    assert len(destination.requests) == 3
    assert sent[2].headers["x-hookyard-delivery-attempt"] == "3"
    assert sent[2].headers["x-hookyard-event-id"] == ev.id
    listed = (
        await client.get(f"/v1/endpoints/{made['endpoint']}/deliveries", params={"limit": 1}, headers=account.headers)
    ).json()["deliveries"]
    assert [(d["attempt_number"], d["source"], d["success"], d["event_id"]) for d in listed] == [
        (3, "rule", True, ev.id)
    ]

    # A succeeded delivery can be sent again on purpose: attempt 4.
    resp = await client.post(f"/v1/deliveries/{listed[0]['id']}/retry", headers=account.headers)
    assert resp.status_code == 202, resp.text
    assert (resp.json()["previous_status"], resp.json()["attempt_number"]) == ("succeeded", 4)
    async with workers(ctx):
        await destination.wait_for(4)
        await wait_for(lambda: _attempts(ctx, task_id, 4), timeout=30)
    assert (await task_status(ctx, task_id))["status"] == "succeeded"


async def _attempts(ctx: Context, task_id: str, n: int) -> bool:
    row = await task_status(ctx, task_id)
    return row["attempts"] == n and row["status"] != "in_flight"


async def test_a_scheduled_retry_comes_forward_and_an_attempt_in_flight_is_409(
    client, account, ctx: Context, destination: Destination, settings: Settings
) -> None:
    made = await endpoint_with_destinations(client, account, destination.url)
    async with db(ctx.settings.database_url) as conn:
        (failed,) = await fail_deliveries(
            conn,
            [Ev(made["endpoint"])],
            destination_id=made["destinations"][0],
            rule_id=made["rules"][0],
            url=destination.url,
            attempts=1,
            status="pending",  # its next attempt an hour away
        )
    destination.hold()
    async with workers(ctx):
        resp = await client.post(f"/v1/deliveries/{failed.delivery_id}/retry", headers=account.headers)
        assert resp.status_code == 202, resp.text
        assert (resp.json()["previous_status"], resp.json()["attempt_number"]) == ("pending", 2)
        (held,) = await destination.wait_for(1)
        assert held.headers["x-hookyard-delivery-attempt"] == "2"
        resp = await client.post(f"/v1/deliveries/{failed.delivery_id}/retry", headers=account.headers)
        err = assert_error(resp, 409, "attempt_in_flight")
        assert failed.delivery_id in err["message"]
        assert "attempt 2 in flight" in err["message"]
        destination.release()
        await settled(ctx, failed.task_id, "succeeded", timeout=30)
    assert len(destination.requests) == 1


async def test_single_retry_errors(client, account, other_account, ctx: Context, destination: Destination) -> None:
    made = await endpoint_with_destinations(client, account, destination.url, destinations=2)
    async with db(ctx.settings.database_url) as conn:
        failed = await fail_deliveries(
            conn,
            [Ev(made["endpoint"]), Ev(made["endpoint"])],
            destination_id=made["destinations"][0],
            rule_id=made["rules"][0],
            url=destination.url,
        )
        replay = await store_delivery(
            conn, made["endpoint"], failed[0].event_id, created_at=datetime.now(UTC), source="replay", success=False
        )
        test = await store_delivery(
            conn, made["endpoint"], failed[0].event_id, created_at=datetime.now(UTC), source="manual_test"
        )
        # the second event is no longer stored (retention)
        await conn.execute("DELETE FROM events WHERE id = $1", failed[1].event_id)

    read_only = await make_account(ctx.settings.database_url, read_only=True)

    def retry(delivery_id: str, who: Any = account) -> Any:
        return client.post(f"/v1/deliveries/{delivery_id}/retry", headers=who.headers)

    assert_error(await retry(failed[0].delivery_id, other_account), 404, "not_found")  # never reveals it exists
    assert_error(await retry("dlv_01KAAAAAAAAAAAAAAAAAAAAAAA"), 404, "not_found")
    assert_error(await retry("dlv_nope"), 404, "not_found")
    assert_error(await retry(failed[0].task_id), 404, "not_found")
    err = assert_error(await retry(replay), 400, "validation_error", field="delivery_id")
    assert "a replay" in err["message"]
    assert f"/v1/events/{failed[0].event_id}/replay" in err["message"]
    assert "a destination test" in assert_error(await retry(test), 400, "validation_error")["message"]
    assert "no longer stored" in assert_error(await retry(failed[1].delivery_id), 404, "not_found")["message"]
    assert_error(await retry(failed[0].delivery_id, read_only), 403, "forbidden")
    assert_error(await client.post(f"/v1/deliveries/{failed[0].delivery_id}/retry"), 401, "unauthorized")
    resp = await client.delete(f"/v1/destinations/{made['destinations'][0]}", headers=account.headers)
    assert resp.status_code == 200
    assert "was deleted" in assert_error(await retry(failed[0].delivery_id), 404, "not_found")["message"]
    assert destination.requests == []
