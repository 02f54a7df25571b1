"""hookyard's own signature on what it sends to destinations: rule deliveries and the destination test carry
Standard Webhooks headers made with the destination's signing secret, checked here with the official
``standardwebhooks`` library against a real loopback destination and the deliver worker in process."""

from __future__ import annotations

import msgspec
import pytest
import standardwebhooks
from standardwebhooks.webhooks import WebhookVerificationError

from control.db.context import Context
from control.support.sealing import seal_destination_secret
from tests.destination import Destination, fetch_row, make_task, running, settled
from tests.helpers import create_endpoint

STANDARD = ("webhook-id", "webhook-timestamp", "webhook-signature")


async def _secret(ctx: Context, destination_id: str) -> str:
    return (await fetch_row(ctx, "SELECT signing_secret FROM destinations WHERE id = $1", destination_id))[0]


async def test_rule_deliveries_verify_beside_the_providers_headers(ctx: Context, destination: Destination) -> None:
    body = b'{"id":"evt_pay_1","type":"invoice.paid"}'
    captured = {"content-type": "application/json", "stripe-signature": "t=1795252711,v1=" + "a" * 64}
    made = await make_task(ctx, destination.url, headers=captured, body=body)
    async with running(ctx):
        (got,) = await destination.wait_for(1)
        await settled(ctx, made["task"], "succeeded")
    secret = await _secret(ctx, made["destination"])
    assert secret.startswith("whsec_")
    assert standardwebhooks.Webhook(secret).verify(got.body, got.headers) == msgspec.json.decode(body)
    assert got.headers["webhook-id"] == made["event"]  # stable across attempts: receivers deduplicate on it
    assert got.headers["stripe-signature"] == captured["stripe-signature"]  # the provider's own, untouched
    with pytest.raises(WebhookVerificationError):
        standardwebhooks.Webhook("whsec_" + "QUJD" * 11).verify(got.body, got.headers)


async def test_an_events_own_standard_webhooks_headers_are_replaced_by_hookyards(
    ctx: Context, destination: Destination
) -> None:
    captured = {"webhook-id": "msg_provider", "webhook-timestamp": "1", "webhook-signature": "v1,AAAA"}
    made = await make_task(ctx, destination.url, headers=captured, body=b'{"a":1}')
    async with running(ctx):
        (got,) = await destination.wait_for(1)
    standardwebhooks.Webhook(await _secret(ctx, made["destination"])).verify(got.body, got.headers)
    assert got.headers["webhook-id"] == made["event"]


async def test_sign_deliveries_false_sends_the_event_unsigned_by_hookyard(
    ctx: Context, client, account, destination: Destination
) -> None:
    endpoint = (await create_endpoint(client, account.headers))["id"]
    resp = await client.post(
        f"/v1/endpoints/{endpoint}/destinations",
        json={"url": destination.url, "sign_deliveries": False},
        headers=account.headers,
    )
    assert resp.status_code == 201, resp.text
    assert resp.json()["sign_deliveries"] is False
    made = await make_task(ctx, destination.url, endpoint_id=endpoint, destination_id=resp.json()["id"])
    async with running(ctx):
        (got,) = await destination.wait_for(1)
    assert not set(STANDARD) & set(got.headers)
    assert got.headers["x-hookyard-event-id"] == made["event"]


async def test_secret_on_create_and_rotate_and_the_destination_test_is_signed(
    client, account, destination: Destination
) -> None:
    endpoint = (await create_endpoint(client, account.headers))["id"]
    created = await client.post(
        f"/v1/endpoints/{endpoint}/destinations", json={"url": destination.url}, headers=account.headers
    )
    assert created.status_code == 201, created.text
    first = created.json()["signing_secret"]
    assert first.startswith("whsec_")
    assert created.json()["sign_deliveries"] is True
    listed = await client.get(f"/v1/endpoints/{endpoint}/destinations", headers=account.headers)
    assert first not in listed.text  # shown on create and rotate only
    dst = created.json()["id"]
    assert (await client.post(f"/v1/destinations/{dst}/test", headers=account.headers)).json()["success"] is True
    rotated = await client.post(f"/v1/destinations/{dst}/rotate-secret", headers=account.headers)
    assert rotated.status_code == 200, rotated.text
    second = rotated.json()["signing_secret"]
    assert second != first
    assert (await client.post(f"/v1/destinations/{dst}/test", headers=account.headers)).json()["success"] is True
    before, after = destination.requests
    standardwebhooks.Webhook(first).verify(before.body, before.headers)
    standardwebhooks.Webhook(second).verify(after.body, after.headers)
    with pytest.raises(WebhookVerificationError):
        standardwebhooks.Webhook(first).verify(after.body, after.headers)
    patched = await client.patch(f"/v1/destinations/{dst}", json={"sign_deliveries": False}, headers=account.headers)
    assert patched.json()["sign_deliveries"] is False
    await client.post(f"/v1/destinations/{dst}/test", headers=account.headers)
    assert not set(STANDARD) & set(destination.requests[-1].headers)


async def test_rotating_another_accounts_destination_is_404(client, account, other_account) -> None:
    endpoint = (await create_endpoint(client, account.headers))["id"]
    dst = (
        await client.post(
            f"/v1/endpoints/{endpoint}/destinations", json={"url": "https://example.com/"}, headers=account.headers
        )
    ).json()["id"]
    resp = await client.post(f"/v1/destinations/{dst}/rotate-secret", headers=other_account.headers)
    assert resp.status_code == 404


async def test_a_worker_signs_with_the_new_secret_as_soon_as_it_is_rotated(
    ctx: Context, destination: Destination
) -> None:
    """The worker keeps destination secrets it opened, by the stored value: a rotation is another stored
    value, so the very next send is signed with the new secret and not with the one kept."""
    made = await make_task(ctx, destination.url, body=b'{"n":1}')
    async with running(ctx):
        (first,) = await destination.wait_for(1)
        old = await _secret(ctx, made["destination"])
        standardwebhooks.Webhook(old).verify(first.body, first.headers)
        new = "whsec_" + "TkVXU0VDUkVU" * 3
        sealed = seal_destination_secret(ctx, made["destination"], new)
        await fetch_row(ctx, "UPDATE destinations SET signing_secret = $2 WHERE id = $1", made["destination"], sealed)
        await make_task(ctx, destination.url, endpoint_id=made["endpoint"], destination_id=made["destination"])
        _, second = await destination.wait_for(2)
    assert standardwebhooks.Webhook(new).verify(second.body, second.headers) is not None
    with pytest.raises(WebhookVerificationError):
        standardwebhooks.Webhook(old).verify(second.body, second.headers)
