"""Hostile requests at the catalog's step never cost a 500 and never pass as verified: invalid UTF-8, NUL and
lone-surrogate bytes in the headers a check reads, bodies nested too deep or not JSON, a form body with
broken escapes, huge and malformed timestamps, a public key that is not one, and a tenant whose endpoint names
a provider beside a normal one (each served under its own config)."""

from __future__ import annotations

import pytest

from shared.providers import CATALOG
from tests.edge.providers_support import SECRET, signed_request
from tests.edge.test_edge_ingest import put_endpoint, stored
from tests.helpers import (
    assert_error,
    redis_connection,  # noqa: F401 - the `redis` fixture
)

DEEP = b"[" * 100_000 + b"]" * 100_000


@pytest.mark.parametrize(
    ("provider", "header", "value"),
    [
        ("slack", b"x-slack-signature", b"v0=\xff\xfe\x00"),
        ("slack", b"x-slack-request-timestamp", b"9" * 5000),
        ("slack", b"x-slack-request-timestamp", b"\xed\xa0\x80"),  # a lone surrogate's UTF-8 bytes
        ("twitch", b"twitch-eventsub-message-timestamp", b"2024-13-45T99:99:99Z"),
        ("paddle", b"paddle-signature", b";;;===;;ts=;h1="),
        ("workos", b"workos-signature", b"t=1, v1=" + b"z" * 10_000),
        ("discord", b"x-signature-ed25519", b"not hex at all"),
        ("sendgrid", b"x-twilio-email-event-webhook-signature", b"%%%%"),
        ("postmark", b"authorization", b"Basic \x00\x01"),
    ],
)
async def test_a_hostile_header_is_refused_never_a_500(
    edge_client, redis, edge_settings, provider, header, value
) -> None:
    token = await put_endpoint(
        redis, edge_settings, hmac_enabled=True, secret=SECRET, on_failure="reject", provider=provider
    )
    body, headers = signed_request(CATALOG[provider], token, SECRET, None)
    raw = [(k.encode(), v.encode()) for k, v in headers.items() if k.encode() != header] + [(header, value)]
    resp = await edge_client.post(f"/h/{token}", content=body, headers=raw)
    assert_error(resp, 401, "signature_invalid")
    assert await stored(redis, edge_settings) == []


@pytest.mark.parametrize(
    "body",
    [DEEP, b"\xff\xfe not json", b'{"event":{"type":' * 5000, b"a=%zz&b=%ff&c", b"\x00" * 1000],
    ids=["deep", "invalid-utf8", "unterminated", "broken-form", "nul"],
)
@pytest.mark.parametrize("provider", ["slack", "twilio", "microsoft_graph", "discord_ping"])
async def test_a_hostile_body_is_stored_unattributed_fields_never_a_500(
    edge_client, redis, edge_settings, provider, body
) -> None:
    """Verification off: whatever arrives is stored, its event type and key only where they could be read."""
    name = "discord" if provider == "discord_ping" else provider
    token = await put_endpoint(redis, edge_settings, provider=name)
    content_type = "application/x-www-form-urlencoded" if provider == "twilio" else "application/json"
    resp = await edge_client.post(f"/h/{token}", content=body, headers={"content-type": content_type})
    assert resp.status_code == 200, resp.text
    (record,) = await stored(redis, edge_settings)
    assert (record.provider, record.handshake, record.signature_valid) == (name, False, None)


async def test_a_key_that_is_not_a_public_key_verifies_nothing(edge_client, redis, edge_settings) -> None:
    """A public key stored before auth-config checked it (or altered since) makes every request a mismatch."""
    token = await put_endpoint(redis, edge_settings, hmac_enabled=True, secret="garbage", provider="discord")
    resp = await edge_client.post(
        f"/h/{token}", content=b'{"type":1}', headers={"x-signature-ed25519": "00" * 64, "x-signature-timestamp": "1"}
    )
    assert "signature_mismatch" in assert_error(resp, 401, "signature_invalid")["message"]


async def test_tenants_with_and_without_a_named_provider_do_not_share_a_fate(edge_client, redis, edge_settings) -> None:
    """One endpoint names Meta with a verify token; another, verifying Stripe, gets the same GET challenge: only
    the first answers it, the second refuses it as unsigned, and each stores only its own."""
    meta = await put_endpoint(redis, edge_settings, provider="meta", verify_token="meatyhamhock")
    other = await put_endpoint(redis, edge_settings, hmac_enabled=True, secret=SECRET, on_failure="reject")
    query = "?hub.mode=subscribe&hub.challenge=42&hub.verify_token=meatyhamhock"
    assert (await edge_client.get(f"/h/{meta}{query}")).text == "42"
    assert_error(await edge_client.get(f"/h/{other}{query}"), 401, "signature_invalid")
    (record,) = await stored(redis, edge_settings)
    assert (record.provider, record.handshake) == ("meta", True)


@pytest.mark.parametrize("forged", ["another issuer", "alg none", "not a token", "body swapped"])
async def test_a_netlify_token_that_does_not_vouch_for_this_body_is_refused(
    edge_client, redis, edge_settings, forged
) -> None:
    """Netlify's JWS: genuine for another issuer, unsigned (``alg: none``), not a JWS at all, or genuine for
    another body: each refused, and a genuine one for this body stored verified."""
    import hashlib

    import jwt

    token = await put_endpoint(redis, edge_settings, hmac_enabled=True, secret=SECRET * 2, on_failure="reject")
    body, headers = signed_request(CATALOG["netlify"], token, SECRET * 2)
    assert (await edge_client.post(f"/h/{token}", content=body, headers=headers)).status_code == 200
    claims = {"iss": "netlify", "sha256": hashlib.sha256(body).hexdigest()}
    sent = body
    if forged == "another issuer":
        headers["x-webhook-signature"] = jwt.encode({**claims, "iss": "elsewhere"}, SECRET * 2, algorithm="HS256")
    elif forged == "alg none":
        headers["x-webhook-signature"] = jwt.encode(claims, None, algorithm="none")
    elif forged == "not a token":
        headers["x-webhook-signature"] = "a.b"
    else:
        sent = body.replace(b"ready", b"error")
    refused = await edge_client.post(f"/h/{token}", content=sent, headers=headers)
    reason = assert_error(refused, 401, "signature_invalid")["message"].rsplit(" ", 1)[1]
    assert reason == ("malformed_header" if forged == "not a token" else "signature_mismatch")
    (record,) = await stored(redis, edge_settings)
    assert (record.provider, record.signature_valid) == ("netlify", True)
