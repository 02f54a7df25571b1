"""Gone means gone: a 410 disables the destination (reason and time), holds its deliveries without spending
attempts or counting against its circuit, opens a ``destination.disabled`` alert, and nothing is sent until
it is enabled; enabling sends the held ones, in order for a FIFO destination. By hand (/v1 and MCP's service)
the same."""

from __future__ import annotations

from typing import Any

from control.db import tasks as db_tasks
from control.db.context import Context
from control.workers.alerts.evaluator import evaluate
from tests.destination import Destination, Reply, fetch_row, make_task, running, settled, task_status
from tests.helpers import endpoint_with_destination, wait_for


async def _state(ctx: Context, destination_id: str) -> Any:
    return await fetch_row(
        ctx,
        "SELECT state, disabled_reason, disabled_at, circuit, consecutive_failures FROM destinations WHERE id = $1",
        destination_id,
    )


async def test_a_410_disables_holds_and_alerts_and_enable_sends_each_once(
    ctx: Context, client: Any, account: Any, destination: Destination
) -> None:
    destination.reply(Reply(status=410, body=b"gone"))
    endpoint, created = await endpoint_with_destination(client, account.headers, destination.url, ordering="fifo")
    first = await make_task(ctx, destination.url, endpoint_id=endpoint, destination_id=created["id"], body=b'{"n":0}')
    async with running(ctx):
        row = await settled(ctx, first["task"], "held")
        assert row["attempts"] == 1
        assert row["last_error"].startswith("the destination answered 410 Gone")
        # Routed while disabled: held too, and nothing is sent.
        later = [
            await make_task(
                ctx, destination.url, endpoint_id=endpoint, destination_id=created["id"], body=f'{{"n":{n}}}'.encode()
            )
            for n in (1, 2, 3)
        ]
        for one in later:
            held = await settled(ctx, one["task"], "held")
            assert held["attempts"] == 0  # no attempt spent on a held delivery
    assert len(destination.requests) == 1
    state = await _state(ctx, created["id"])
    assert state["state"] == "disabled"
    assert state["disabled_reason"].startswith("the destination answered 410 Gone")
    assert state["disabled_at"] is not None
    assert (state["circuit"], state["consecutive_failures"]) == ("closed", 0)
    shown = (await client.get(f"/v1/destinations/{created['id']}", headers=account.headers)).json()
    assert (shown["state"], shown["disabled_reason"]) == ("disabled", state["disabled_reason"])
    assert shown["health"]["held"] == 4  # what waits for the enable, without reading the alert
    assert (await evaluate(ctx)).fired
    alerts = (await client.get("/v1/alerts", headers=account.headers)).json()["alerts"]
    (alert,) = [a for a in alerts if a["type"] == "destination.disabled"]
    assert alert["destination_id"] == created["id"]
    assert alert["count"] == 4
    # A retry of a held delivery says where it stood ("held", once missing from its schema: schemathesis
    # found the 202 outside its document) and sends nothing: the claim holds it again until the enable.
    delivery = await fetch_row(ctx, "SELECT id FROM deliveries WHERE task_id = $1", first["task"])
    retried = await client.post(f"/v1/deliveries/{delivery['id']}/retry", headers=account.headers)
    assert retried.status_code == 202, retried.text
    assert (retried.json()["previous_status"], retried.json()["status"]) == ("held", "pending")
    document = (await client.get("/schema/openapi.json")).json()
    assert "held" in document["components"]["schemas"]["DeliveryRetry"]["properties"]["previous_status"]["enum"]
    async with running(ctx):
        await settled(ctx, first["task"], "held")
    assert len(destination.requests) == 1
    enabled = await client.post(f"/v1/destinations/{created['id']}/enable", headers=account.headers)
    assert enabled.status_code == 200, enabled.text
    assert enabled.json()["state"] == "enabled"
    assert enabled.json()["disabled_reason"] is None
    async with running(ctx):
        for one in [first, *later]:
            await settled(ctx, one["task"], "succeeded")
    # Tasks made here are in no FIFO line (the flush gives lines their sequence), so the destination's
    # concurrency sends them in any order: each exactly once is what holds.
    assert sorted(r.body for r in destination.requests[1:]) == [b'{"n":0}', b'{"n":1}', b'{"n":2}', b'{"n":3}']
    assert (await evaluate(ctx)).resolved == []  # the enable resolved it already
    shown = (await client.get(f"/v1/destinations/{created['id']}", headers=account.headers)).json()
    assert shown["health"]["held"] == 0
    shown_alert = (await client.get("/v1/alerts", headers=account.headers)).json()["alerts"]
    assert [a["resolved_at"] is not None for a in shown_alert if a["id"] == alert["id"]] == [True]


async def test_disable_and_enable_by_hand(ctx: Context, client: Any, account: Any, destination: Destination) -> None:
    endpoint, created = await endpoint_with_destination(client, account.headers, destination.url)
    path = f"/v1/destinations/{created['id']}"
    disabled = await client.post(f"{path}/disable", json={"reason": "maintenance"}, headers=account.headers)
    assert disabled.status_code == 200, disabled.text
    assert (disabled.json()["state"], disabled.json()["disabled_reason"]) == ("disabled", "maintenance")
    no_body = await client.post(f"{path}/disable", headers=account.headers)  # again: the first reason stays
    assert no_body.json()["disabled_reason"] == "maintenance"
    # The evaluator fires the alert while it is disabled; the enable resolves it in its own transaction, so
    # no open alert outlives the enable waiting for the next round (the e2e flow once listed one).
    assert (await evaluate(ctx)).fired
    opened = (await client.get("/v1/alerts?open=true", headers=account.headers)).json()["alerts"]
    assert [a["type"] for a in opened] == ["destination.disabled"]
    made = await make_task(ctx, destination.url, endpoint_id=endpoint, destination_id=created["id"])
    async with running(ctx):
        await settled(ctx, made["task"], "held")
        assert destination.requests == []
        await client.post(f"{path}/enable", headers=account.headers)
        assert (await client.get("/v1/alerts?open=true", headers=account.headers)).json()["alerts"] == []
        await settled(ctx, made["task"], "succeeded")
    assert (await task_status(ctx, made["task"]))["attempts"] == 1
    assert (await evaluate(ctx)).fired == []


async def test_a_disable_reaches_tasks_a_worker_already_claimed(
    ctx: Context, client: Any, account: Any, destination: Destination
) -> None:
    """A task leased before the disable is handed back by its worker (told through the NOTIFY), not sent; the
    claim then holds it."""
    endpoint, created = await endpoint_with_destination(client, account.headers, destination.url)
    made = await make_task(ctx, destination.url, endpoint_id=endpoint, destination_id=created["id"])
    async with ctx.pool.acquire() as conn:
        (leased,) = await db_tasks.lease(conn, [made["task"]], lease_s=30)  # claimed ahead, not yet started
    async with running(ctx) as deliver:

        async def listening() -> bool:
            return deliver._notifications.listening

        await wait_for(listening)
        resp = await client.post(f"/v1/destinations/{created['id']}/disable", headers=account.headers)
        assert resp.status_code == 200

        async def told() -> bool:
            return created["id"] in deliver.attempts.disabled

        await wait_for(told)
        await deliver.attempts.run(leased)
        await settled(ctx, made["task"], "held")
    assert destination.requests == []


async def test_disable_is_checked(client: Any, account: Any, destination: Destination) -> None:
    _, created = await endpoint_with_destination(client, account.headers, destination.url)
    resp = await client.post(
        f"/v1/destinations/{created['id']}/disable", json={"reason": "x" * 501}, headers=account.headers
    )
    assert resp.status_code == 400
    assert "reason" in resp.json()["error"]["message"]
    missing = await client.post("/v1/destinations/dst_01KBQ0000000000000000000AA/enable", headers=account.headers)
    assert missing.status_code == 404
