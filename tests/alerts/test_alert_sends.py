"""Alerts fire once per condition across workers, within 30 s, signed per alert destination, and are retried
and recorded; verified by a real loopback receiver with the ``standardwebhooks`` library."""

from __future__ import annotations

import time

import msgspec
import pytest
import standardwebhooks

from control.db.context import Context
from control.workers.alerts.evaluator import evaluate
from shared.settings import Settings
from tests.alerts.support import alert_workers, verified
from tests.conftest import Account
from tests.destination import Destination, Reply, add_destination
from tests.helpers import create_endpoint, wait_for


async def _alert_destination(client, account: Account, url: str, **body) -> dict:
    resp = await client.post("/v1/alert-destinations", json={"url": url, **body}, headers=account.headers)
    assert resp.status_code == 201, resp.text
    return resp.json()


async def test_an_open_circuit_fires_once_across_two_workers_within_30s_then_recovers(
    client, ctx: Context, settings: Settings, account: Account, receiver: Destination
) -> None:
    ep = await create_endpoint(client, account.headers, name="orders")
    sink = await _alert_destination(client, account, receiver.url)
    async with ctx.pool.acquire() as conn:
        dst = await add_destination(conn, ep["id"], "http://127.0.0.1:9/never")
    async with alert_workers(settings, 2):  # the default 5 s evaluation interval
        async with ctx.pool.acquire() as conn:
            await conn.execute(
                "UPDATE destinations SET circuit = 'open', circuit_opened_at = now(), consecutive_failures = 5"
                " WHERE id = $1",
                dst,
            )
        opened = time.monotonic()
        await wait_for(lambda: _async(receiver.requests), timeout=30)
        assert time.monotonic() - opened < 30
        # Several more evaluation rounds of both workers: the condition still holds, nothing more fires.
        async with ctx.pool.acquire() as conn:
            await wait_for(lambda: conn.fetchval("SELECT count(*) >= 1 FROM alert_attempts"), timeout=10)
        await _rounds(ctx, 3)
        assert len(receiver.requests) == 1
        body = verified(receiver.requests[0], sink["signing_secret"])
        assert body["type"] == "destination.circuit_opened"
        assert (body["data"]["destination_id"], body["data"]["endpoint_id"]) == (dst, ep["id"])
        assert body["data"]["consecutive_failures"] == 5
        with pytest.raises(standardwebhooks.WebhookVerificationError):  # another destination's secret fails
            verified(receiver.requests[0], "whsec_" + "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo0NTY3OA==")

        async with ctx.pool.acquire() as conn:
            await conn.execute(
                "UPDATE destinations SET circuit = 'closed', circuit_opened_at = NULL WHERE id = $1", dst
            )
        await wait_for(lambda: _async(len(receiver.requests) == 2), timeout=30)
        recovered = verified(receiver.requests[1], sink["signing_secret"])
        assert recovered["type"] == "destination.recovered"
        assert recovered["data"]["destination_id"] == dst
    listed = (await client.get("/v1/alerts", headers=account.headers)).json()["alerts"]
    assert [a["type"] for a in listed] == ["destination.recovered", "destination.circuit_opened"]
    opened_alert = listed[1]
    assert opened_alert["resolved_at"] is not None
    assert opened_alert["id"] == receiver.requests[0].headers["webhook-id"]
    (send,) = opened_alert["sends"]
    assert send["alert_destination_id"] == sink["id"]
    assert send["status"] == "succeeded"
    assert [(a["attempt"], a["status"], a["success"]) for a in send["attempts"]] == [(1, 200, True)]


async def test_a_failed_send_is_retried_with_the_same_id_and_recorded(
    client, ctx: Context, settings: Settings, account: Account, receiver: Destination
) -> None:
    settings = msgspec.structs.replace(settings, retry_schedule_s=(0.05, 0.05))
    ep = await create_endpoint(client, account.headers, name="silent")
    sink = await _alert_destination(client, account, receiver.url, format="slack", events=["endpoint.silent"])
    receiver.reply(Reply(status=503, body=b"busy"))
    async with ctx.pool.acquire() as conn:
        await conn.execute(
            "UPDATE endpoints SET expect_event_within_s = 60, created_at = now() - interval '2 minutes' WHERE id = $1",
            ep["id"],
        )
    async with alert_workers(settings, 1, evaluate_every_s=0.2, idle_s=0.05):
        await wait_for(lambda: _async(len(receiver.requests) == 2), timeout=10)
    first, second = receiver.requests
    assert first.headers["webhook-id"] == second.headers["webhook-id"]
    text = verified(second, sink["signing_secret"])["text"]
    assert f"endpoint {ep['name']} ({ep['id']}) received nothing for 60 s" in text
    (alert,) = (await client.get("/v1/alerts", headers=account.headers)).json()["alerts"]
    assert alert["type"] == "endpoint.silent"
    assert alert["resolved_at"] is None
    attempts = alert["sends"][0]["attempts"]
    assert [(a["status"], a["success"]) for a in attempts] == [(503, False), (200, True)]


async def _async(value):
    return value


async def _rounds(ctx: Context, n: int) -> None:
    for _ in range(n):
        await evaluate(ctx)
