"""POST /v1/events/{id}/replay: verbatim by default, headers and body overrides, NUL and binary bodies,
re-signed events that the providers' libraries verify, failures reported in a 200, the egress policy, and
attribution to a destination URL."""

from __future__ import annotations

import base64
import os
from typing import Any

import msgspec
import pytest
import standardwebhooks
import stripe
from litestar.testing import AsyncTestClient
from svix.webhooks import Webhook as SvixWebhook

from shared.settings import Settings
from tests.conftest import Account
from tests.control.replay.support import OUTCOME_FIELDS, stored_event
from tests.destination import Destination, Reply, add_destination
from tests.events_support import DELIVERY_FIELDS
from tests.helpers import create_endpoint, db
from tests.stack import free_port

SECRET = "whsec_" + base64.b64encode(os.urandom(32)).decode()
CAPTURED_BODY = b'{"id":"evt_1","type":"payment_intent.succeeded","data":{"amount":2000}}'


@pytest.fixture
def payments() -> dict[str, Any]:
    """A captured payments event, signed by the provider a moment ago."""
    signature = stripe.WebhookSignature.generate_signature_header(CAPTURED_BODY.decode(), "whsec_provider_secret")
    return {
        "body": CAPTURED_BODY,
        "provider": "payments",
        "event_type": "payment_intent.succeeded",
        "headers": {
            "content-type": "application/json; charset=utf-8",
            "stripe-signature": signature,
            "user-agent": "Stripe/1.0",
            "x-request-id": "req_1",
            "host": "hooks.example.com",
            "content-length": str(len(CAPTURED_BODY)),
        },
    }


async def _replay(client: AsyncTestClient, account: Account, event_id: str, **body: Any) -> dict[str, Any]:
    response = await client.post(f"/v1/events/{event_id}/replay", json=body, headers=account.headers)
    assert response.status_code == 200, response.text
    outcome = response.json()
    assert set(outcome) == OUTCOME_FIELDS
    return outcome


async def test_replay_is_verbatim_by_default(
    client: AsyncTestClient, account: Account, database_url: str, destination: Destination, payments: dict[str, Any]
) -> None:
    ids = await stored_event(client, account, database_url, **payments)
    outcome = await _replay(client, account, ids["event"], url=destination.url)
    (got,) = destination.requests
    captured = payments["headers"]
    assert got.method == "POST"
    assert got.body == CAPTURED_BODY
    assert got.headers["stripe-signature"] == captured["stripe-signature"]  # the provider's, unchanged
    assert got.headers == {
        **{k: v for k, v in captured.items() if k not in ("host", "content-length")},
        "host": f"127.0.0.1:{destination.port}",
        "content-length": str(len(CAPTURED_BODY)),
    }  # no x-hookyard-* header: it is the provider's request, again
    assert outcome["success"] is True
    assert outcome["status"] == 200
    assert outcome["error"] is None
    assert outcome["response_body"] == '{"received":true}'
    assert outcome["sent_headers"] == got.headers
    assert isinstance(outcome["latency_ms"], int)
    assert outcome["id"].startswith("dlv_")
    # The original signature still verifies: nothing was changed.
    stripe.Webhook.construct_event(got.body.decode(), got.headers["stripe-signature"], "whsec_provider_secret")

    event = (await client.get(f"/v1/events/{ids['event']}", headers=account.headers)).json()
    (delivery,) = event["deliveries"]
    assert set(delivery) == DELIVERY_FIELDS
    assert delivery["id"] == outcome["id"]
    assert delivery["source"] == "replay"
    assert (delivery["destination_id"], delivery["destination_name"], delivery["rule_id"]) == (None, None, None)
    assert delivery["destination_url"] == destination.url
    assert delivery["attempt_number"] == 1
    assert delivery["request_body"] == CAPTURED_BODY.decode()
    assert delivery["request_headers"] == got.headers
    assert (delivery["response_status"], delivery["success"]) == (200, True)


async def test_headers_body_and_preserve_headers(
    client: AsyncTestClient, account: Account, database_url: str, destination: Destination, payments: dict[str, Any]
) -> None:
    ids = await stored_event(client, account, database_url, **payments)
    await _replay(
        client,
        account,
        ids["event"],
        url=destination.url,
        body='{"changed":true}',
        headers={"X-Request-Id": "req_2", "x-added": "yes"},
    )
    await _replay(client, account, ids["event"], url=destination.url, preserve_headers=False, headers={"x-only": "1"})
    changed, bare = await destination.wait_for(2)
    assert changed.body == b'{"changed":true}'
    assert changed.headers["content-length"] == str(len(b'{"changed":true}'))
    assert (changed.headers["x-request-id"], changed.headers["x-added"]) == ("req_2", "yes")
    assert changed.headers["user-agent"] == "Stripe/1.0"
    assert bare.body == CAPTURED_BODY
    assert bare.headers == {
        "host": f"127.0.0.1:{destination.port}",
        "content-length": str(len(CAPTURED_BODY)),
        "content-type": "application/json; charset=utf-8",
        "x-only": "1",
    }


async def test_nul_and_binary_bodies_are_replayed_and_recorded_exactly(
    client: AsyncTestClient, account: Account, database_url: str, destination: Destination
) -> None:
    """A captured body with NUL, a replacement body with NUL, a body that is not UTF-8 and a response that
    is not UTF-8: each replay answers 200 with its outcome and each is recorded with the exact bytes."""
    nul_body, binary = "caf\u00e9 \x00 nul".encode(), b"\xff\x00\xfe"
    with_nul = await stored_event(client, account, database_url, body=nul_body, headers={"content-type": "text/plain"})
    not_utf8 = await stored_event(client, account, database_url, body=binary)
    destination.reply(Reply(), Reply(), Reply(body=b"\x00\xc3("))
    captured = await _replay(client, account, with_nul["event"], url=destination.url)
    replaced = await _replay(client, account, with_nul["event"], url=destination.url, body="new \u0000 body")
    raw = await _replay(client, account, not_utf8["event"], url=destination.url)
    assert [r.body for r in await destination.wait_for(3)] == [nul_body, b"new \x00 body", binary]
    assert [o["success"] for o in (captured, replaced, raw)] == [True, True, True]
    assert (captured["response_body"], captured["response_body_encoding"]) == ('{"received":true}', "utf8")
    assert (raw["response_body"], raw["response_body_encoding"]) == (base64.b64encode(b"\x00\xc3(").decode(), "base64")

    event = (await client.get(f"/v1/events/{with_nul['event']}", headers=account.headers)).json()
    assert [(d["id"], d["request_body"], d["request_body_encoding"]) for d in event["deliveries"]] == [
        (captured["id"], nul_body.decode(), "utf8"),
        (replaced["id"], "new \x00 body", "utf8"),
    ]
    (delivery,) = (await client.get(f"/v1/events/{not_utf8['event']}", headers=account.headers)).json()["deliveries"]
    assert (delivery["request_body"], delivery["request_body_encoding"]) == (
        base64.b64encode(binary).decode(),
        "base64",
    )
    assert (delivery["response_body"], delivery["response_body_encoding"]) == (raw["response_body"], "base64")


async def test_a_destination_answering_nul_is_a_200_for_the_destination_test(
    client: AsyncTestClient, account: Account, database_url: str, destination: Destination
) -> None:
    endpoint = await create_endpoint(client, account.headers)
    async with db(database_url) as conn:
        destination_id = await add_destination(conn, endpoint["id"], destination.url)
    destination.reply(Reply(status=502, body=b"bad \x00 gateway \xff"))
    response = await client.post(f"/v1/destinations/{destination_id}/test", headers=account.headers)
    assert response.status_code == 200, response.text
    outcome = response.json()
    assert (outcome["success"], outcome["status"], outcome["response_body_encoding"]) == (False, 502, "base64")
    assert base64.b64decode(outcome["response_body"]) == b"bad \x00 gateway \xff"
    listed = await client.get(f"/v1/endpoints/{endpoint['id']}/deliveries", headers=account.headers)
    (delivery,) = listed.json()["deliveries"]
    assert (delivery["id"], delivery["response_body"]) == (outcome["id"], outcome["response_body"])


async def test_resigned_payments_event_verifies_with_stripe(
    client: AsyncTestClient, account: Account, database_url: str, destination: Destination, payments: dict[str, Any]
) -> None:
    """With no `signature_header`, the re-signature goes in the event's own header, where Stripe's library
    reads it (it once went to `x-signature`, which the library never looks at); one named is used instead."""
    ids = await stored_event(client, account, database_url, **payments)
    body = '{"id":"evt_2","type":"invoice.paid"}'
    await _replay(client, account, ids["event"], url=destination.url, body=body, resign_with=SECRET)
    await _replay(
        client, account, ids["event"], url=destination.url, resign_with=SECRET, signature_header="X-Signature"
    )
    own, custom = await destination.wait_for(2)
    event = stripe.Webhook.construct_event(own.body.decode(), own.headers["stripe-signature"], SECRET)
    assert event["type"] == "invoice.paid"
    assert own.headers["stripe-signature"] != payments["headers"]["stripe-signature"]
    assert "x-signature" not in own.headers
    stripe.Webhook.construct_event(custom.body.decode(), custom.headers["x-signature"], SECRET)
    assert "stripe-signature" not in custom.headers  # the stale captured signature is not sent along


async def test_resigned_identity_event_verifies_with_svix(
    client: AsyncTestClient, account: Account, database_url: str, destination: Destination
) -> None:
    from datetime import UTC, datetime

    captured_secret = "whsec_" + base64.b64encode(b"p" * 32).decode()
    now = datetime.now(UTC)
    captured = {
        "content-type": "application/json",
        "svix-id": "msg_captured",
        "svix-timestamp": str(int(now.timestamp()) - 3600),
        "svix-signature": SvixWebhook(captured_secret).sign("msg_captured", now, '{"type":"user.created"}'),
    }
    ids = await stored_event(
        client, account, database_url, body=b'{"type":"user.created"}', headers=captured, provider="identity"
    )
    await _replay(
        client,
        account,
        ids["event"],
        url=destination.url,
        body='{"type":"user.updated"}',
        resign_with=SECRET,
        signature_header="svix-signature",
    )
    (got,) = destination.requests
    SvixWebhook(SECRET).verify(got.body, got.headers)  # raises unless valid and within its tolerance
    assert got.headers["svix-id"] == "msg_captured"  # the event's own id (its idempotency key), a fresh timestamp
    assert int(got.headers["svix-timestamp"]) > int(captured["svix-timestamp"])


@pytest.mark.parametrize("provider", ["identity", "commerce", "payments", "code_host"])
@pytest.mark.parametrize("family", ["vendor", "neutral"])
async def test_the_default_signature_header_is_the_events_own(
    client: AsyncTestClient, account: Account, database_url: str, destination: Destination, provider: str, family: str
) -> None:
    """Each provider's sample, as captured with the real or the neutral names: re-signed with no
    `signature_header`, the signature replaces the captured one in that same header (the real names verify
    with the provider's own library: tests/onboarding/verifying_app), and no `x-signature` is added."""
    from shared.samples import EVENT_TYPES, sample
    from tests.onboarding.verifying_app import verified_by

    made = sample(provider, EVENT_TYPES[provider][0], secret="whsec_" + "c" * 32, family=family)
    ids = await stored_event(client, account, database_url, body=made.body, headers=made.headers, provider=provider)
    outcome = await _replay(client, account, ids["event"], url=destination.url, resign_with=SECRET)
    (got,) = destination.requests
    assert made.signature_header is not None
    assert got.headers[made.signature_header] != made.headers[made.signature_header]
    assert outcome["sent_headers"][made.signature_header] == got.headers[made.signature_header]
    assert "x-signature" not in got.headers
    if family == "vendor":
        expected = {"identity": ["svix"], "commerce": ["shopify"], "payments": ["stripe"], "code_host": ["github"]}
        assert verified_by(got.body, got.headers, SECRET) == expected[provider]


async def test_resigned_unattributed_event_uses_standard_webhooks(
    client: AsyncTestClient, account: Account, database_url: str, destination: Destination
) -> None:
    ids = await stored_event(client, account, database_url, body=b'{"hello":"world"}')
    await _replay(
        client, account, ids["event"], url=destination.url, resign_with=SECRET, signature_header="webhook-signature"
    )
    (got,) = destination.requests
    assert standardwebhooks.Webhook(SECRET).verify(got.body, got.headers) == {"hello": "world"}
    assert {"webhook-id", "webhook-timestamp", "webhook-signature"} <= set(got.headers)


async def test_an_event_of_no_provider_scheme_is_resigned_in_x_signature_by_default(
    client: AsyncTestClient, account: Account, database_url: str, destination: Destination
) -> None:
    """The documented default where the event has no header of its own to sign in: `x-signature`, with the
    Standard Webhooks id and timestamp it covers."""
    ids = await stored_event(client, account, database_url, body=b'{"hello":"world"}')
    await _replay(client, account, ids["event"], url=destination.url, resign_with=SECRET)
    (got,) = destination.requests
    moved = {**got.headers, "webhook-signature": got.headers["x-signature"]}
    assert standardwebhooks.Webhook(SECRET).verify(got.body, moved) == {"hello": "world"}
    assert "webhook-signature" not in got.headers


async def test_failures_are_reported_in_a_200(
    client: AsyncTestClient, account: Account, database_url: str, destination: Destination, settings: Settings
) -> None:
    ids = await stored_event(client, account, database_url)
    refused = await _replay(client, account, ids["event"], url=f"http://127.0.0.1:{free_port()}/nobody")
    destination.reply(Reply(delay_s=settings.deliver_timeout_s + 1))
    slow = await _replay(client, account, ids["event"], url=destination.url)
    for outcome in (refused, slow):
        assert outcome["success"] is False
        assert outcome["status"] is None
        assert outcome["response_body"] is None
        assert isinstance(outcome["latency_ms"], int)
    assert refused["error"].startswith("connection failed")
    assert slow["error"].startswith("timeout")
    destination.reply(Reply(status=500, body=b"nope"))
    server_error = await _replay(client, account, ids["event"], url=destination.url)
    assert (server_error["success"], server_error["status"], server_error["response_body"]) == (False, 500, "nope")
    deliveries = (await client.get(f"/v1/events/{ids['event']}", headers=account.headers)).json()["deliveries"]
    assert [d["success"] for d in deliveries] == [False, False, False]
    assert [d["error"] is None for d in deliveries] == [False, False, True]


async def test_replay_obeys_the_egress_policy(settings: Settings, account: Account, database_url: str) -> None:
    public = msgspec.structs.replace(settings, egress="public")
    from control.app import create_app

    async with AsyncTestClient(app=create_app(public)) as client:
        ids = await stored_event(client, account, database_url)
        for url in ("http://127.0.0.1:9/x", "http://localhost:9/x", "http://169.254.169.254/latest", "http://[::1]:9/"):
            # An internal host as written: refused at once (tests/security/test_egress_at_write.py).
            response = await client.post(
                f"/v1/events/{ids['event']}/replay", json={"url": url}, headers=account.headers
            )
            assert response.status_code == 400, response.text
            assert response.json()["error"]["code"] == "validation_error"
            # The same URL on a destination stored before that check, and a name: refused when sent.
            async with db(database_url) as conn:
                destination_id = await add_destination(conn, ids["endpoint"], url)
            for body in ({"destination_id": destination_id}, {"url": "http://internal.invalid:9/x"}):
                outcome = await _replay(client, account, ids["event"], **body)
                assert outcome["success"] is False
                assert outcome["error"].startswith("egress refused"), outcome


async def test_replay_to_a_destination_url_is_attributed_to_it(
    client: AsyncTestClient, account: Account, database_url: str, destination: Destination
) -> None:
    ids = await stored_event(client, account, database_url)
    async with db(database_url) as conn:
        destination_id = await add_destination(conn, ids["endpoint"], destination.url, name="mine")
    outcome = await _replay(client, account, ids["event"], url=destination.url)
    listed = await client.get(
        f"/v1/endpoints/{ids['endpoint']}/deliveries", params={"source": "replay"}, headers=account.headers
    )
    (delivery,) = listed.json()["deliveries"]
    assert delivery["id"] == outcome["id"]
    assert (delivery["destination_id"], delivery["destination_name"]) == (destination_id, "mine")
