"""``endpoint.signature_failures``: N requests whose signature the edge refused (401, ``on_failure: reject``)
within five minutes raise one alert, N per endpoint (default 10). Requests go through the real edge app (in
this process, on the test's Redis, its endpoint configured through /v1); two alert workers evaluate; the
alert reaches a real loopback receiver that verifies it with the ``standardwebhooks`` library. One alert per
condition until it resolves: more failures while it is open fire nothing, and once it resolved (here: the
threshold raised above the count) the next burst fires a new one."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

import httpx

from control.db.context import Context
from control.workers.alerts.evaluator import evaluate
from edge.app import create_app as create_edge
from shared.settings import Settings
from tests.alerts.support import alert_workers, verified
from tests.conftest import Account
from tests.destination import Destination
from tests.helpers import create_endpoint, wait_for

BODY = b'{"type": "invoice.paid", "id": "evt_1"}'
AUTH = {"hmac_enabled": True, "secret": "whsec_the_providers_own_secret", "on_failure": "reject"}


@contextlib.asynccontextmanager
async def _edge(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    edge = create_edge(settings)
    await edge.startup()  # its refusal counts go to Redis about once a second
    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=edge), base_url="http://edge.test") as c:
            yield c
    finally:
        await edge.shutdown()


async def _sent(ctx: Context, account: Account) -> int:
    async with ctx.pool.acquire() as conn:
        return await conn.fetchval(
            """SELECT count(*) FROM alert_attempts t JOIN alert_sends s ON s.id = t.send_id
                 JOIN alerts a ON a.id = s.alert_id WHERE a.account_id = $1""",
            account.id,
        )


async def test_refused_signatures_raise_one_alert_per_condition_across_two_workers(
    client, ctx: Context, settings: Settings, account: Account, receiver: Destination
) -> None:
    ep = await create_endpoint(client, account.headers, name="billing")
    resp = await client.patch(f"/v1/endpoints/{ep['id']}/auth-config", json=AUTH, headers=account.headers)
    assert resp.status_code == 200, resp.text
    resp = await client.post(
        "/v1/alert-destinations",
        json={"url": receiver.url, "events": ["endpoint.signature_failures"]},
        headers=account.headers,
    )
    assert resp.status_code == 201, resp.text
    sink = resp.json()
    path = urlsplit(ep["ingest_url"]).path

    async with _edge(settings) as edge, alert_workers(settings, 2, evaluate_every_s=0.2, idle_s=0.05):
        bad = {"stripe-signature": "t=1,v1=00"}
        assert [(await edge.post(path, content=BODY, headers=bad)).status_code for _ in range(9)] == [401] * 9
        await edge.post(path, content=BODY)  # no signature at all: refused too, the tenth
        (got,) = await receiver.wait_for(1, timeout=30)
        body = verified(got, sink["signing_secret"])
        assert body["type"] == "endpoint.signature_failures"
        assert (body["data"]["endpoint_id"], body["data"]["threshold"]) == (ep["id"], 10)
        assert body["data"]["endpoint_name"] == ep["name"]
        assert body["data"]["count"] >= 10

        # Still failing: the open alert's count grows, nothing more fires (rounds of both workers' kind).
        for _ in range(5):
            assert (await edge.post(path, content=BODY, headers=bad)).status_code == 401
        await wait_for(lambda: _counted(client, account, 15), timeout=10)
        for _ in range(3):
            await evaluate(ctx)
        assert await _sent(ctx, account) == 1
        assert len(receiver.requests) == 1

        # Resolved (threshold above the count), then a new burst past the threshold: a second alert.
        patch = {"signature_failure_alert_threshold": 100}
        resp = await client.patch(f"/v1/endpoints/{ep['id']}", json=patch, headers=account.headers)
        assert resp.status_code == 200, resp.text
        await wait_for(lambda: _resolved(client, account), timeout=10)
        patch = {"signature_failure_alert_threshold": 16}
        resp = await client.patch(f"/v1/endpoints/{ep['id']}", json=patch, headers=account.headers)
        assert resp.status_code == 200, resp.text
        assert (await edge.post(path, content=BODY, headers=bad)).status_code == 401
        (_, second) = await receiver.wait_for(2, timeout=30)
    assert second.headers["webhook-id"] != got.headers["webhook-id"]
    assert verified(second, sink["signing_secret"])["data"]["threshold"] == 16
    alerts = (await client.get("/v1/alerts", headers=account.headers)).json()["alerts"]
    assert [(a["type"], a["resolved_at"] is None) for a in alerts] == [
        ("endpoint.signature_failures", True),
        ("endpoint.signature_failures", False),
    ]


async def _alerts(client, account: Account) -> list[dict]:
    return (await client.get("/v1/alerts", headers=account.headers)).json()["alerts"]


async def _counted(client, account: Account, n: int) -> bool:
    alerts = await _alerts(client, account)
    return bool(alerts) and alerts[0]["count"] >= n


async def _resolved(client, account: Account) -> bool:
    alerts = await _alerts(client, account)
    return len(alerts) == 1 and alerts[0]["resolved_at"] is not None
