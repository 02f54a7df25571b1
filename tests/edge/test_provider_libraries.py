"""Each provider's scheme proven with that provider's own library (PyPI): the library signs the request, or,
where it only verifies, it accepts what the catalog signs and refuses the tampered copy; either way the
in-process edge stores the request attributed and verified, and refuses the tampered copy (401, nothing
stored). The npm libraries' proofs are in ``test_provider_libraries_node.py``."""

from __future__ import annotations

import base64
import json
import time
from datetime import UTC, datetime
from urllib.parse import urlencode

import nacl.signing
import pytest
import svix
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519

from shared.providers import CATALOG
from shared.providers.sign import sign
from tests.edge.providers_support import BASE, url_of
from tests.edge.test_edge_ingest import put_endpoint, stored
from tests.helpers import (
    assert_error,
    redis_connection,  # noqa: F401 - the `redis` fixture
)

SECRET = "8f742231b10e8888abcd99yyyzzz85a5"


async def proves(
    edge_client, redis, settings, token: str, provider: str, body: bytes, headers: dict[str, str], tampered: bytes
) -> None:
    """The edge stores ``body`` as ``provider``'s, verified, and refuses ``tampered`` with the same headers."""
    resp = await edge_client.post(f"/h/{token}", content=body, headers=headers)
    assert resp.status_code == 200, resp.text
    (record,) = await stored(redis, settings)
    assert (record.provider, record.signature_valid, record.signature_failure_reason) == (provider, True, None)
    refused = await edge_client.post(f"/h/{token}", content=tampered, headers=headers)
    assert "signature_mismatch" in assert_error(refused, 401, "signature_invalid")["message"]
    assert len(await stored(redis, settings)) == 1


async def endpoint(redis, settings, secret: str = SECRET, provider: str | None = None) -> str:
    return await put_endpoint(redis, settings, hmac_enabled=True, secret=secret, on_failure="reject", provider=provider)


def ours(
    provider: str, body: bytes, secret: str, token: str, headers: dict[str, str] | None = None, **kw
) -> dict[str, str]:
    extra = {"content-type": "application/json", **(headers or {})}
    return {**extra, **sign(CATALOG[provider], body, secret, headers=extra, url=url_of(token), **kw)}


async def test_slack_sdk_signs(edge_client, redis, edge_settings) -> None:
    from slack_sdk.signature import SignatureVerifier

    token = await endpoint(redis, edge_settings)
    body = b'{"type":"event_callback","event_id":"Ev0LAN670R","event":{"type":"app_mention","text":"hi"}}'
    ts = str(int(time.time()))
    verifier = SignatureVerifier(SECRET)
    headers = {
        "x-slack-request-timestamp": ts,
        "x-slack-signature": verifier.generate_signature(timestamp=ts, body=body),
    }
    assert verifier.is_valid(body, ts, headers["x-slack-signature"])
    await proves(edge_client, redis, edge_settings, token, "slack", body, headers, body.replace(b"hi", b"ho"))


async def test_twilio_signs_a_form_post_over_its_url(edge_client, redis, edge_settings) -> None:
    from twilio.request_validator import RequestValidator

    token = await endpoint(redis, edge_settings)
    params = {
        "MessageSid": "SM0123456789abcdef0123456789abcdef",
        "MessageStatus": "delivered",
        "To": "+15005550001",
        "Body": "a b&c",
    }
    validator = RequestValidator(SECRET)
    headers = {
        "content-type": "application/x-www-form-urlencoded",
        "x-twilio-signature": validator.compute_signature(url_of(token), params),
    }
    body = urlencode(params).encode()
    assert validator.validate(url_of(token), params, headers["x-twilio-signature"])
    await proves(
        edge_client, redis, edge_settings, token, "twilio", body, headers, body.replace(b"delivered", b"failed")
    )


async def test_twilio_signs_a_json_body_through_its_body_sha256_parameter(edge_client, redis, edge_settings) -> None:
    """For a JSON body Twilio signs the URL alone, with ``?bodySHA256=`` (the body's hash) added to it: the
    library signs that URL and checks the hash; a changed body, or the hash parameter dropped, is refused."""
    from twilio.request_validator import RequestValidator

    token = await endpoint(redis, edge_settings)
    body = b'{"EventType":"com.twilio.messaging.message.delivered","Sid":"SM0123","Status":"delivered"}'
    validator = RequestValidator(SECRET)
    url = f"{url_of(token)}?bodySHA256={validator.compute_hash(body.decode())}"
    headers = {"content-type": "application/json", "x-twilio-signature": validator.compute_signature(url, {})}
    assert headers == ours("twilio", body, SECRET, token)
    tampered = body.replace(b"delivered", b"failed")
    assert validator.validate(url, body.decode(), headers["x-twilio-signature"])
    assert not validator.validate(url, tampered.decode(), headers["x-twilio-signature"])
    path = url.removeprefix(BASE)
    resp = await edge_client.post(path, content=body, headers=headers)
    assert resp.status_code == 200, resp.text
    (record,) = await stored(redis, edge_settings)
    assert (record.provider, record.signature_valid) == ("twilio", True)
    # The body changed; or the URL alone signed, without the hash that binds the body to it.
    unbound = {**headers, "x-twilio-signature": validator.compute_signature(url_of(token), {})}
    for where, content, sent in ((path, tampered, headers), (f"/h/{token}", tampered, unbound)):
        refused = await edge_client.post(where, content=content, headers=sent)
        assert "signature_mismatch" in assert_error(refused, 401, "signature_invalid")["message"]
    assert len(await stored(redis, edge_settings)) == 1


async def test_sendgrid_eventwebhook_verifies_the_ecdsa_signature(edge_client, redis, edge_settings) -> None:
    from sendgrid.helpers.eventwebhook import EventWebhook

    private = ec.generate_private_key(ec.SECP256R1())
    der = private.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    public = base64.b64encode(der).decode()
    token = await endpoint(redis, edge_settings, public)
    body = b'[{"email":"example@test.com","timestamp":1513299569,"event":"delivered","sg_event_id":"sg_1"}]'
    headers = ours("sendgrid", body, public, token, private_key=private)
    hook = EventWebhook(public)
    signature, ts = headers["x-twilio-email-event-webhook-signature"], headers["x-twilio-email-event-webhook-timestamp"]
    assert hook.verify_signature(body.decode(), signature, ts)
    tampered = body.replace(b"delivered", b"bounce")
    assert not hook.verify_signature(tampered.decode(), signature, ts)
    await proves(edge_client, redis, edge_settings, token, "sendgrid", body, headers, tampered)


async def test_squareup_verifies_the_url_and_body_signature(edge_client, redis, edge_settings) -> None:
    from square.utils.webhooks_helper import verify_signature

    token = await endpoint(redis, edge_settings)
    body = b'{"merchant_id":"6SSW7HV8K2ST5","type":"payment.created","event_id":"13b867cf-db3d-4b1c-90b6-2f32a9d78124"}'
    headers = ours("square", body, SECRET, token)
    signature = headers["x-square-hmacsha256-signature"]
    assert verify_signature(
        request_body=body.decode(), signature_header=signature, signature_key=SECRET, notification_url=url_of(token)
    )
    tampered = body.replace(b"created", b"updated")
    assert not verify_signature(
        request_body=tampered.decode(), signature_header=signature, signature_key=SECRET, notification_url=url_of(token)
    )
    await proves(edge_client, redis, edge_settings, token, "square", body, headers, tampered)


class _PaddleRequest:
    def __init__(self, body: bytes, headers: dict[str, str]) -> None:
        self.body = self.content = self.data = body
        self.headers = headers


async def test_paddle_sdk_verifies_the_ts_h1_signature(edge_client, redis, edge_settings) -> None:
    from paddle_billing.Notifications import Secret, Verifier

    token = await endpoint(redis, edge_settings)
    body = b'{"event_id":"evt_01h8bzakzx3hm2fmen703n5q45","event_type":"transaction.completed","data":{"id":"txn_1"}}'
    headers = ours("paddle", body, SECRET, token)
    library_headers = {"Paddle-Signature": headers["paddle-signature"]}
    assert Verifier().verify(_PaddleRequest(body, library_headers), Secret(SECRET))
    tampered = body.replace(b"completed", b"canceled")
    assert not Verifier().verify(_PaddleRequest(tampered, library_headers), Secret(SECRET))
    await proves(edge_client, redis, edge_settings, token, "paddle", body, headers, tampered)


async def test_razorpay_verifies_the_body_signature(edge_client, redis, edge_settings) -> None:
    import razorpay
    from razorpay.errors import SignatureVerificationError

    token = await endpoint(redis, edge_settings)
    body = b'{"entity":"event","event":"payment.captured","payload":{"payment":{"entity":{"id":"pay_DESlfW9H8K9uqM"}}}}'
    headers = ours("razorpay", body, SECRET, token)
    utility = razorpay.Client(auth=("rzp_test_key", "rzp_test_secret")).utility
    assert utility.verify_webhook_signature(body.decode(), headers["x-razorpay-signature"], SECRET)
    tampered = body.replace(b"captured", b"failed")
    with pytest.raises(SignatureVerificationError):
        utility.verify_webhook_signature(tampered.decode(), headers["x-razorpay-signature"], SECRET)
    await proves(edge_client, redis, edge_settings, token, "razorpay", body, headers, tampered)


async def test_pynacl_signs_a_discord_interaction(edge_client, redis, edge_settings) -> None:
    """Discord's own documentation verifies interactions with PyNaCl; here PyNaCl signs."""
    key = nacl.signing.SigningKey.generate()
    token = await endpoint(redis, edge_settings, key.verify_key.encode().hex())
    body = b'{"type":2,"id":"786008729715212338","data":{"id":"771825006014889984","name":"blep","type":1}}'
    ts = str(int(time.time()))
    headers = {"x-signature-ed25519": key.sign(ts.encode() + body).signature.hex(), "x-signature-timestamp": ts}
    await proves(edge_client, redis, edge_settings, token, "discord", body, headers, body.replace(b"blep", b"bleep"))


async def test_svix_signs_a_resend_event(edge_client, redis, edge_settings) -> None:
    """Resend delivers through Svix and its documentation verifies with the svix library."""
    secret = "whsec_" + base64.b64encode(b"resend-signing-key-0123456789").decode()
    token = await endpoint(redis, edge_settings, secret, provider="resend")
    body = b'{"type":"email.delivered","created_at":"2024-02-22T23:41:12.126Z","data":{"email_id":"5676"}}'
    signature = svix.Webhook(secret).sign("msg_2Lh9KRb0pzN4LePd3XiA4", datetime.now(UTC), body.decode())
    headers = {
        "svix-id": "msg_2Lh9KRb0pzN4LePd3XiA4",
        "svix-timestamp": str(int(time.time())),
        "svix-signature": signature,
    }
    await proves(
        edge_client, redis, edge_settings, token, "resend", body, headers, body.replace(b"delivered", b"bounced")
    )


async def test_hubspot_verifies_the_v3_signature(edge_client, redis, edge_settings) -> None:
    from hubspot.utils.signature import Signature

    token = await endpoint(redis, edge_settings)
    body = b'[{"eventId":3816279340,"subscriptionType":"contact.creation","objectId":1246965}]'
    headers = ours("hubspot", body, SECRET, token)
    ts, signature = headers["x-hubspot-request-timestamp"], headers["x-hubspot-signature-v3"]
    assert Signature.is_valid(signature, SECRET, body.decode(), url_of(token), "POST", "v3", ts)
    tampered = body.replace(b"creation", b"deletion")
    assert not Signature.is_valid(signature, SECRET, tampered.decode(), url_of(token), "POST", "v3", ts)
    await proves(edge_client, redis, edge_settings, token, "hubspot", body, headers, tampered)


async def test_pusher_validates_the_webhook(edge_client, redis, edge_settings) -> None:
    import pusher

    token = await endpoint(redis, edge_settings)
    body = json.dumps(
        {"time_ms": int(time.time() * 1000), "events": [{"name": "channel_occupied", "channel": "c"}]}
    ).encode()
    headers = {**ours("pusher", body, SECRET, token), "x-pusher-key": "app-key"}
    library = pusher.Pusher(app_id="1", key="app-key", secret=SECRET, cluster="eu")
    assert library.validate_webhook("app-key", headers["x-pusher-signature"], body.decode()) is not None
    tampered = body.replace(b"occupied", b"vacated")
    assert library.validate_webhook("app-key", headers["x-pusher-signature"], tampered.decode()) is None
    await proves(edge_client, redis, edge_settings, token, "pusher", body, headers, tampered)


async def test_workos_verifies_the_header(edge_client, redis, edge_settings) -> None:
    from workos.webhooks._verification import verify_header

    token = await endpoint(redis, edge_settings)
    body = b'{"id":"event_01HWWSY7K1EK2ZSQ0BDZCPX3XM","event":"user.created","data":{"object":"user"}}'
    headers = ours("workos", body, SECRET, token)
    verify_header(event_body=body, event_signature=headers["workos-signature"], secret=SECRET)
    tampered = body.replace(b"created", b"deleted")
    with pytest.raises(ValueError, match="Signature hash does not match"):
        verify_header(event_body=tampered, event_signature=headers["workos-signature"], secret=SECRET)
    await proves(edge_client, redis, edge_settings, token, "workos", body, headers, tampered)


async def test_easypost_validates_the_webhook(edge_client, redis, edge_settings) -> None:
    from easypost.errors import SignatureVerificationError
    from easypost.util import validate_webhook

    token = await endpoint(redis, edge_settings, provider="easypost")
    body = b'{"id":"evt_3a2f5c9b","object":"Event","description":"tracker.updated","result":{"status":"delivered"}}'
    headers = ours("easypost", body, SECRET, token)
    assert validate_webhook(body, {"X-Hmac-Signature": headers["x-hmac-signature"]}, SECRET)["id"] == "evt_3a2f5c9b"
    tampered = body.replace(b"delivered", b"returned")
    with pytest.raises(SignatureVerificationError):
        validate_webhook(tampered, {"X-Hmac-Signature": headers["x-hmac-signature"]}, SECRET)
    await proves(edge_client, redis, edge_settings, token, "easypost", body, headers, tampered)


async def test_box_validates_the_message(edge_client, redis, edge_settings) -> None:
    from box_sdk_gen.managers.webhooks import WebhooksManager

    token = await endpoint(redis, edge_settings)
    body = b'{"type":"webhook_event","id":"eb0c4e06","trigger":"FILE.UPLOADED","source":{"id":"1","type":"file"}}'
    box = {"box-signature-version": "1", "box-signature-algorithm": "HmacSHA256"}
    headers = ours("box", body, SECRET, token, box, now=time.time() - 1)
    assert WebhooksManager.validate_message(body.decode(), headers, SECRET)
    tampered = body.replace(b"UPLOADED", b"DELETED")
    assert not WebhooksManager.validate_message(tampered.decode(), headers, SECRET)
    await proves(edge_client, redis, edge_settings, token, "box", body, headers, tampered)


async def test_telnyx_unwraps_the_ed25519_signature(edge_client, redis, edge_settings) -> None:
    import telnyx

    private = ed25519.Ed25519PrivateKey.generate()
    raw = private.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    public = base64.b64encode(raw).decode()
    token = await endpoint(redis, edge_settings, public)
    body = (
        b'{"data":{"event_type":"message.received","id":"b301ed3f","record_type":"event","payload":{"text":"Hello"}}}'
    )
    headers = ours("telnyx", body, public, token, private_key=private)
    library = telnyx.Telnyx(api_key="KEY_TEST", public_key=public)
    library.webhooks.unwrap(body.decode(), headers=headers)
    tampered = body.replace(b"Hello", b"Hullo")
    with pytest.raises(ValueError, match="signature does not match"):
        library.webhooks.unwrap(tampered.decode(), headers=headers)
    await proves(edge_client, redis, edge_settings, token, "telnyx", body, headers, tampered)


async def test_coinbase_commerce_verifies_the_signature_header(edge_client, redis, edge_settings) -> None:
    from coinbase_commerce.error import SignatureVerificationError
    from coinbase_commerce.webhook import Webhook

    token = await endpoint(redis, edge_settings)
    body = b'{"id":1,"event":{"id":"24934862-d980-46cb-9402-43c81b0cdba6","type":"charge:confirmed","data":{}}}'
    headers = ours("coinbase_commerce", body, SECRET, token)
    event = Webhook.construct_event(body.decode(), headers["x-cc-webhook-signature"], SECRET)
    assert event.type == "charge:confirmed"
    tampered = body.replace(b"confirmed", b"failed")
    with pytest.raises(SignatureVerificationError):
        Webhook.construct_event(tampered.decode(), headers["x-cc-webhook-signature"], SECRET)
    await proves(edge_client, redis, edge_settings, token, "coinbase_commerce", body, headers, tampered)
