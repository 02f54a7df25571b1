"""Rule deliveries through a destination's transform: a real deliver worker, loopback destinations, rows and
destinations written through /v1. The two worked examples of the docs run here as written there."""

from __future__ import annotations

import time
from collections.abc import Iterator
from urllib.parse import urlsplit

import msgspec
import pytest
import standardwebhooks

from control.service import Context
from shared.settings import Settings
from tests.destination import FAST_DELIVERY, Destination, fetch_row, make_task, running, serving, settled
from tests.helpers import create_endpoint

SLACK = """function handler(request, context) {
  const event = request.body;
  return {
    ...request,
    body: { text: `${event.type}: ${event.data.object.id} (${context.event.id})` },
  };
}"""

INVOICES_ONLY = """function handler(request, context) {
  if (!String(request.body.type).startsWith("invoice.")) return null;  // skip everything else
  request.headers["x-billing-team"] = "yes";
  console.log("forwarding", request.body.type);
  return request;
}"""

STRIPE_BODY = b'{"id":"evt_1","type":"invoice.paid","data":{"object":{"id":"in_42","amount_due":2000}}}'


@pytest.fixture
def settings(settings: Settings) -> Settings:
    return msgspec.structs.replace(settings, **FAST_DELIVERY, circuit_failure_threshold=3)


@pytest.fixture
def destination() -> Iterator[Destination]:
    with serving() as server:
        yield server


async def _destination(client, account, url: str, transform: str | None) -> tuple[str, str, str]:
    endpoint = (await create_endpoint(client, account.headers))["id"]
    resp = await client.post(
        f"/v1/endpoints/{endpoint}/destinations", json={"url": url, "transform": transform}, headers=account.headers
    )
    assert resp.status_code == 201, resp.text
    assert resp.json()["transform"] == transform
    return endpoint, resp.json()["id"], resp.json()["signing_secret"]


async def _delivery(ctx: Context, task_id: str) -> dict:
    row = await fetch_row(
        ctx,
        "SELECT request_body, success, response_status, error, transform FROM deliveries WHERE task_id = $1",
        task_id,
    )
    return dict(row)


async def test_a_slack_shaped_body_is_sent_and_signed_as_sent(ctx: Context, client, account, destination) -> None:
    endpoint, dst, secret = await _destination(client, account, destination.url, SLACK)
    made = await make_task(ctx, destination.url, endpoint_id=endpoint, destination_id=dst, body=STRIPE_BODY)
    async with running(ctx):
        (got,) = await destination.wait_for(1)
        await settled(ctx, made["task"], "succeeded")
    expected = {"text": f"invoice.paid: in_42 ({made['event']})"}
    assert msgspec.json.decode(got.body) == expected
    assert got.headers["content-type"] == "application/json"
    # hookyard's signature is over the body the transform returned, not the captured one
    assert standardwebhooks.Webhook(secret).verify(got.body, got.headers) == expected
    row = await _delivery(ctx, made["task"])
    assert bytes(row["request_body"]) == got.body  # the record is what was sent
    assert row["transform"]["outcome"] == "applied"


REROUTE = """function handler(request) {
  return { ...request, path: "/billing/" + request.body.type, query: "team=finance" };
}"""


async def test_a_changed_path_and_query_are_recorded_as_the_url_sent(
    ctx: Context, client, account, destination
) -> None:
    endpoint, dst, _ = await _destination(client, account, destination.url + "/hooks?v=1", REROUTE)
    configured = destination.url + "/hooks?v=1"
    made = await make_task(ctx, configured, endpoint_id=endpoint, destination_id=dst, body=STRIPE_BODY)
    async with running(ctx):
        (got,) = await destination.wait_for(1)
        await settled(ctx, made["task"], "succeeded")
    assert got.target == "/billing/invoice.paid?team=finance"
    sent = await fetch_row(ctx, "SELECT destination_url FROM deliveries WHERE task_id = $1", made["task"])
    origin = destination.url.removesuffix(urlsplit(destination.url).path)
    assert sent["destination_url"] == origin + "/billing/invoice.paid?team=finance"  # not the configured URL


async def test_only_invoices_go_out_with_an_added_header(ctx: Context, client, account, destination) -> None:
    endpoint, dst, _ = await _destination(client, account, destination.url, INVOICES_ONLY)
    other = b'{"id":"evt_2","type":"customer.created","data":{}}'
    invoice = await make_task(ctx, destination.url, endpoint_id=endpoint, destination_id=dst, body=STRIPE_BODY)
    skipped = await make_task(ctx, destination.url, endpoint_id=endpoint, destination_id=dst, body=other)
    async with running(ctx):
        (got,) = await destination.wait_for(1)
        await settled(ctx, invoice["task"], "succeeded")
        done = await settled(ctx, skipped["task"], "succeeded")
    assert got.body == STRIPE_BODY  # unchanged body: the captured bytes, exactly
    assert got.headers["x-billing-team"] == "yes"
    assert done["attempts"] == 1
    assert done["last_error"] is None
    row = await _delivery(ctx, skipped["task"])
    assert (row["success"], row["response_status"], row["request_body"]) == (True, None, None)
    assert row["transform"]["outcome"] == "skipped"
    assert (await _delivery(ctx, invoice["task"]))["transform"]["logs"] == ["forwarding invoice.paid"]
    assert len(destination.requests) == 1  # the skipped one never went out


async def test_a_throwing_transform_fails_once_keeps_the_circuit_and_retries_with_new_code(
    ctx: Context, client, account, destination
) -> None:
    broken = "function handler(request) {\n  return request.body.missing.id;\n}"
    endpoint, dst, _ = await _destination(client, account, destination.url, broken)
    made = [await make_task(ctx, destination.url, endpoint_id=endpoint, destination_id=dst) for _ in range(5)]
    async with running(ctx):
        done = [await settled(ctx, m["task"], "failed") for m in made]
        assert {(d["attempts"], d["last_error"]) for d in done} == {
            (1, "transform failed: TypeError: Cannot read properties of undefined (reading 'id') (line 2)")
        }
        circuit = await fetch_row(ctx, "SELECT circuit FROM destinations WHERE id = $1", dst)
        assert circuit["circuit"] == "closed"  # 5 failures, threshold 3: the destination was never tried
        row = await _delivery(ctx, made[0]["task"])
        assert row["success"] is False
        assert row["transform"]["error"] == {
            "message": "TypeError: Cannot read properties of undefined (reading 'id')",
            "line": 2,
        }
        assert destination.requests == []

        fixed = "function handler(request) {\n  request.headers['x-fixed'] = '1';\n  return request;\n}"
        resp = await client.patch(f"/v1/destinations/{dst}", json={"transform": fixed}, headers=account.headers)
        assert resp.status_code == 200, resp.text
        delivery_id = (await fetch_row(ctx, "SELECT id FROM deliveries WHERE task_id = $1", made[0]["task"]))["id"]
        resp = await client.post(f"/v1/deliveries/{delivery_id}/retry", headers=account.headers)
        assert resp.status_code == 202, resp.text
        (got,) = await destination.wait_for(1)
        await settled(ctx, made[0]["task"], "succeeded")
    assert got.headers["x-fixed"] == "1"


async def test_a_runaway_transform_does_not_hold_up_other_destinations(ctx: Context, client, account) -> None:
    with serving() as slow_sink, serving() as fast_sink:
        endpoint, spinning, _ = await _destination(client, account, slow_sink.url, "function handler() { for (;;) {} }")
        resp = await client.post(
            f"/v1/endpoints/{endpoint}/destinations",
            json={"url": fast_sink.url, "transform": "function handler(r) { r.headers['x-ok'] = '1'; return r; }"},
            headers=account.headers,
        )
        healthy = resp.json()["id"]
        stuck = await make_task(ctx, slow_sink.url, endpoint_id=endpoint, destination_id=spinning)
        quick = [await make_task(ctx, fast_sink.url, endpoint_id=endpoint, destination_id=healthy) for _ in range(5)]
        started = time.monotonic()
        async with running(ctx):
            got = await fast_sink.wait_for(5)
            fast_s = time.monotonic() - started
            failed = await settled(ctx, stuck["task"], "failed")
        assert fast_s < 1.0  # before the runaway one was even stopped
        assert {g.headers["x-ok"] for g in got} == {"1"}
        assert failed["last_error"] == "transform failed: stopped: still running after 1 s"
        assert slow_sink.requests == []
        for m in quick:
            await settled(ctx, m["task"], "succeeded")


async def test_a_removed_transform_sends_as_captured(ctx: Context, client, account, destination) -> None:
    endpoint, dst, _ = await _destination(client, account, destination.url, "function handler() { return null; }")
    resp = await client.patch(f"/v1/destinations/{dst}", json={"transform": None}, headers=account.headers)
    assert resp.json()["transform"] is None
    made = await make_task(ctx, destination.url, endpoint_id=endpoint, destination_id=dst, body=STRIPE_BODY)
    async with running(ctx):
        (got,) = await destination.wait_for(1)
        await settled(ctx, made["task"], "succeeded")
    assert got.body == STRIPE_BODY
    assert (await _delivery(ctx, made["task"]))["transform"] is None
