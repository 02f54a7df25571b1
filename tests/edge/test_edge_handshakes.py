"""Handshakes answered at the in-process edge: for each provider that asks for one before it delivers, the
answer it expects, sent once the request is stored, marked as a handshake (the flush never routes it).
A keyed handshake with the wrong key, or a challenge too long to be one, is captured as any request.

Expected answers are computed here from each provider's documented rule (HMAC of Zoom's ``plainToken`` and
of X's ``crc_token`` with the secret, an echo for the rest), with the documented example values."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519

from shared.providers import CATALOG
from shared.providers.handshake import MAX_ECHO
from shared.providers.sign import sign
from tests.edge.test_edge_ingest import put_endpoint, stored
from tests.helpers import (
    assert_error,
    redis_connection,  # noqa: F401 - the `redis` fixture
)

SECRET = "the-providers-own-secret"


async def endpoint(redis, settings, provider: str | None = None, **auth) -> str:
    auth.setdefault("secret", SECRET)
    auth.setdefault("hmac_enabled", True)
    return await put_endpoint(redis, settings, provider=provider, **auth)


async def one_handshake(redis, settings, provider: str, kind: str):
    (record,) = await stored(redis, settings)
    assert (record.provider, record.event_type, record.handshake) == (provider, kind, True)
    return record


def signed(provider: str, body: dict, headers: dict | None = None) -> tuple[bytes, dict[str, str]]:
    raw = json.dumps(body).encode()
    extra = {"content-type": "application/json", **(headers or {})}
    return raw, {**extra, **sign(CATALOG[provider], raw, SECRET, headers=extra)}


async def test_slack_url_verification_echoes_the_challenge(edge_client, redis, edge_settings) -> None:
    token = await endpoint(redis, edge_settings)  # recognised by its headers
    body, headers = signed(
        "slack",
        {
            "token": "Jhj5dZrVaK7ZwHHjRyZWjbDl",
            "challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P",
            "type": "url_verification",
        },
    )
    resp = await edge_client.post(f"/h/{token}", content=body, headers=headers)
    assert resp.status_code == 200
    assert resp.text == "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"
    assert resp.headers["content-type"].startswith("text/plain")
    record = await one_handshake(redis, edge_settings, "slack", "slack_url_verification")
    assert resp.headers["x-hookyard-event-id"] == record.id
    assert record.signature_valid is True


async def test_a_forged_slack_challenge_is_refused(edge_client, redis, edge_settings) -> None:
    token = await endpoint(redis, edge_settings, on_failure="reject")
    body, headers = signed("slack", {"challenge": "abc", "type": "url_verification"})
    resp = await edge_client.post(f"/h/{token}", content=body.replace(b"abc", b"abd"), headers=headers)
    assert_error(resp, 401, "signature_invalid")
    assert await stored(redis, edge_settings) == []


async def test_zoom_url_validation_answers_the_hmac_of_the_plain_token(edge_client, redis, edge_settings) -> None:
    token = await endpoint(redis, edge_settings)
    body, headers = signed(
        "zoom",
        {
            "payload": {"plainToken": "qgg8vlvZRS6UYooatFL8Aw"},
            "event_ts": 1654503849680,
            "event": "endpoint.url_validation",
        },
    )
    resp = await edge_client.post(f"/h/{token}", content=body, headers=headers)
    expected = hmac.new(SECRET.encode(), b"qgg8vlvZRS6UYooatFL8Aw", hashlib.sha256).hexdigest()
    assert resp.json() == {"plainToken": "qgg8vlvZRS6UYooatFL8Aw", "encryptedToken": expected}
    await one_handshake(redis, edge_settings, "zoom", "zoom_url_validation")


async def test_meta_hub_challenge_needs_the_verify_token(edge_client, redis, edge_settings) -> None:
    token = await endpoint(redis, edge_settings, "meta", verify_token="meatyhamhock", on_failure="accept_log")
    query = "hub.mode=subscribe&hub.challenge=1158201444&hub.verify_token="
    resp = await edge_client.get(f"/h/{token}?{query}meatyhamhock")
    assert (resp.status_code, resp.text) == (200, "1158201444")
    await one_handshake(redis, edge_settings, "meta", "meta_hub_challenge")
    wrong = await edge_client.get(f"/h/{token}?{query}not-the-token")
    assert wrong.json()["ok"] is True  # captured as any request; Meta sees no challenge and gives up
    records = await stored(redis, edge_settings)
    assert (len(records), records[1].handshake, records[1].provider) == (2, False, "meta")
    assert (records[1].signature_valid, records[1].signature_failure_reason) == (False, "missing_header")


async def test_microsoft_graph_validation_token_is_echoed_decoded(edge_client, redis, edge_settings) -> None:
    token = await endpoint(redis, edge_settings, "microsoft_graph")
    resp = await edge_client.post(
        f"/h/{token}?validationToken=Validation%3A+Testing+client+application+reachability+for+subscription+Request-Id%3A+0c6f7a1d"
    )
    assert resp.status_code == 200
    assert resp.text == "Validation: Testing client application reachability for subscription Request-Id: 0c6f7a1d"
    assert resp.headers["content-type"].startswith("text/plain")
    await one_handshake(redis, edge_settings, "microsoft_graph", "graph_validation_token")


async def test_dropbox_challenge_is_echoed_as_plain_text(edge_client, redis, edge_settings) -> None:
    token = await endpoint(redis, edge_settings, "dropbox")
    resp = await edge_client.get(f"/h/{token}?challenge=%3Cscript%3Ealert(1)%3C%2Fscript%3E")
    assert resp.text == "<script>alert(1)</script>"  # what was asked, never markup: text/plain, nosniff
    assert resp.headers["content-type"].startswith("text/plain")
    assert resp.headers["x-content-type-options"] == "nosniff"
    await one_handshake(redis, edge_settings, "dropbox", "dropbox_challenge")


async def test_x_crc_answers_the_hmac_of_the_crc_token(edge_client, redis, edge_settings) -> None:
    token = await endpoint(redis, edge_settings, "x")
    resp = await edge_client.get(f"/h/{token}?crc_token=9b4507b3-9040-4669-9ed0-7c3a0a7a3a55")
    digest = hmac.new(SECRET.encode(), b"9b4507b3-9040-4669-9ed0-7c3a0a7a3a55", hashlib.sha256).digest()
    assert resp.json() == {"response_token": "sha256=" + base64.b64encode(digest).decode()}
    await one_handshake(redis, edge_settings, "x", "x_crc")


async def test_twitch_callback_verification_echoes_the_challenge(edge_client, redis, edge_settings) -> None:
    token = await endpoint(redis, edge_settings)
    body, headers = signed(
        "twitch",
        {"challenge": "pogchamp-kappa-360noscope-vohiyo", "subscription": {"type": "channel.follow", "version": "2"}},
        {
            "twitch-eventsub-message-type": "webhook_callback_verification",
            "twitch-eventsub-subscription-type": "channel.follow",
        },
    )
    resp = await edge_client.post(f"/h/{token}", content=body, headers=headers)
    assert (resp.status_code, resp.text) == (200, "pogchamp-kappa-360noscope-vohiyo")
    record = await one_handshake(redis, edge_settings, "twitch", "twitch_callback_verification")
    assert record.signature_valid is True


async def test_asana_hook_secret_is_echoed_in_the_header(edge_client, redis, edge_settings) -> None:
    token = await endpoint(redis, edge_settings)
    resp = await edge_client.post(
        f"/h/{token}", headers={"x-hook-secret": "b537207f20cbfa02357cf448134da559e8bd39d61597dcd5631b8012eae53e81"}
    )
    assert resp.status_code == 200
    assert resp.headers["x-hook-secret"] == "b537207f20cbfa02357cf448134da559e8bd39d61597dcd5631b8012eae53e81"
    await one_handshake(redis, edge_settings, "asana", "asana_hook_secret")


async def test_okta_verification_returns_the_challenge(edge_client, redis, edge_settings) -> None:
    token = await endpoint(redis, edge_settings)
    resp = await edge_client.get(f"/h/{token}", headers={"x-okta-verification-challenge": "rBVNp3sERLtNa6j5Zy-3Qww"})
    assert resp.json() == {"verification": "rBVNp3sERLtNa6j5Zy-3Qww"}
    await one_handshake(redis, edge_settings, "okta", "okta_verification")


async def test_discord_ping_is_answered_only_when_signed(edge_client, redis, edge_settings) -> None:
    private = ed25519.Ed25519PrivateKey.generate()
    public = private.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw).hex()
    token = await endpoint(redis, edge_settings, secret=public, on_failure="reject")
    body = b'{"type":1,"id":"786008729715212338","application_id":"775799577604522054"}'
    headers = sign(CATALOG["discord"], body, None, private_key=private)
    resp = await edge_client.post(f"/h/{token}", content=body, headers=headers)
    assert resp.json() == {"type": 1}
    await one_handshake(redis, edge_settings, "discord", "discord_ping")
    # Discord checks that an endpoint refuses a bad signature: it must, with 401.
    forged = await edge_client.post(f"/h/{token}", content=body.replace(b"1,", b"1 ,"), headers=headers)
    assert_error(forged, 401, "signature_invalid")


@pytest.mark.parametrize("auth", [{"on_failure": "reject"}, {"hmac_enabled": False}, {"on_failure": "accept_log"}])
async def test_a_discord_ping_with_a_bad_signature_is_401_whatever_the_endpoint_does_on_failure(
    edge_client, redis, edge_settings, auth
) -> None:
    """Discord registers a URL only if it refuses its bad-signature probe: with verification off or failures
    only logged, the forged PING is still no handshake answered. It is stored (logged) and refused."""
    private = ed25519.Ed25519PrivateKey.generate()
    public = private.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw).hex()
    token = await endpoint(redis, edge_settings, **{"secret": public, **auth})
    body = b'{"type":1,"id":"786008729715212338","application_id":"775799577604522054"}'
    headers = sign(CATALOG["discord"], body, None, private_key=private)
    forged = await edge_client.post(f"/h/{token}", content=body.replace(b"1,", b"1 ,"), headers=headers)
    assert_error(forged, 401, "signature_invalid")
    if auth.get("on_failure") == "reject":
        assert await stored(redis, edge_settings) == []  # refused before it is stored, as any failure there
    else:
        record = await one_handshake(redis, edge_settings, "discord", "discord_ping")
        assert record.signature_valid is False
        assert forged.headers["x-hookyard-event-id"] == record.id
    genuine = await edge_client.post(f"/h/{token}", content=body, headers=headers)
    assert genuine.json() == {"type": 1}


async def test_a_challenge_too_long_is_captured_not_echoed(edge_client, redis, edge_settings) -> None:
    token = await endpoint(redis, edge_settings, "dropbox", hmac_enabled=False)
    resp = await edge_client.get(f"/h/{token}?challenge={'a' * (MAX_ECHO + 1)}")
    assert resp.json()["ok"] is True
    (record,) = await stored(redis, edge_settings)
    assert record.handshake is False


@pytest.mark.parametrize("provider", ["x", "zoom"])
async def test_a_keyed_handshake_without_the_providers_secret_is_captured(
    edge_client, redis, edge_settings, provider
) -> None:
    """Zoom and X key the answer with the secret: without one there is nothing right to answer."""
    token = await put_endpoint(redis, edge_settings, provider=provider)
    if provider == "x":
        resp = await edge_client.get(f"/h/{token}?crc_token=abc")
    else:
        resp = await edge_client.post(
            f"/h/{token}", json={"event": "endpoint.url_validation", "payload": {"plainToken": "p"}}
        )
    assert resp.json()["ok"] is True
    (record,) = await stored(redis, edge_settings)
    assert (record.provider, record.handshake) == (provider, False)


async def test_an_endpoints_own_answer_comes_once_stored_and_a_handshake_keeps_its_own(
    edge_client, redis, edge_settings
) -> None:
    """``Endpoint.response``: the sender gets the endpoint's status, type and body, with the event's id, after
    the request is stored; a provider's handshake still gets the answer its provider expects."""
    from shared.ids import ingest_token, new_id
    from shared.keys import CONFIGS_COMPLETE, Keys
    from shared.wire import EdgeEndpoint, EdgeResponse, encode

    token = ingest_token()
    config = EdgeEndpoint(
        endpoint_id=new_id("ep"),
        account_id=new_id("acct"),
        environment="production",
        response=EdgeResponse(status=202, content_type="application/xml", body="<Response/>"),
    )
    keys = Keys(edge_settings.redis_prefix)
    await redis.set(keys.endpoint_config(token), encode(config))
    await redis.set(keys.config_marker, CONFIGS_COMPLETE)
    resp = await edge_client.post(f"/h/{token}", content=b"Body=hi", headers={"content-type": "text/plain"})
    assert (resp.status_code, resp.headers["content-type"], resp.text) == (202, "application/xml", "<Response/>")
    (record,) = await stored(redis, edge_settings)
    assert resp.headers["x-hookyard-event-id"] == record.id
    shake = await edge_client.post(f"/h/{token}", headers={"x-hook-secret": "abc"})  # Asana's handshake
    assert (shake.status_code, shake.headers["x-hook-secret"]) == (200, "abc")
