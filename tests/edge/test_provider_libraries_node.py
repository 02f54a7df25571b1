"""Provider schemes proven with the providers' own npm libraries (``tests/node/provider_proofs.mjs``):
``@sanity/webhook``, GitHub's ``@octokit/webhooks-methods`` and Meta's WhatsApp SDK (``whatsapp``) sign;
``@linear/sdk``, ``discord-interactions``, ``@mux/mux-node``, ``webflow-api``, ``@shopify/shopify-api`` and
Zoom's ``@zoom/rivet`` accept what the catalog signs and refuse the tampered copy (Rivet also answers Zoom's
URL validation as the edge does), and so does Twurple's ``@twurple/eventsub-http`` for Twitch EventSub (Twitch
publishes no Node library of its own; Twurple is the maintained one its developer docs' community points to).
The edge then stores each request verified and refuses the tampered copy, as in ``test_provider_libraries.py``."""

from __future__ import annotations

import json
import subprocess
import time

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519

from shared.signatures.commerce import sign_commerce
from tests.edge.test_edge_ingest import stored
from tests.edge.test_provider_libraries import SECRET, endpoint, ours, proves
from tests.helpers import redis_connection  # noqa: F401 - the `redis` fixture
from tests.node_packages import NODE, ensure_node_modules


def library(provider: str, body: bytes, tampered: bytes, headers: dict[str, str], secret: str, **extra) -> dict:
    ensure_node_modules()
    case = {
        "provider": provider,
        "body": body.decode(),
        "tampered": tampered.decode(),
        "headers": headers,
        "secret": secret,
        **extra,
    }
    done = subprocess.run(
        ["node", "provider_proofs.mjs"],
        cwd=NODE,
        input=json.dumps(case),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


async def test_sanity_webhook_signs(edge_client, redis, edge_settings) -> None:
    token = await endpoint(redis, edge_settings)
    body = b'{"_id":"movie_10681","_type":"movie","title":"WALL-E"}'
    tampered = body.replace(b"WALL-E", b"WALL-F")
    answer = library("sanity", body, tampered, {}, SECRET)
    assert (answer["valid"], answer["tampered"]) == (True, False)
    headers = {"content-type": "application/json", "sanity-operation": "create", **answer["headers"]}
    await proves(edge_client, redis, edge_settings, token, "sanity", body, headers, tampered)


async def test_linear_sdk_verifies(edge_client, redis, edge_settings) -> None:
    token = await endpoint(redis, edge_settings)
    body = json.dumps(
        {"action": "create", "type": "Issue", "data": {"id": "2174add1"}, "webhookTimestamp": int(time.time() * 1000)}
    ).encode()
    headers = ours("linear", body, SECRET, token, {"linear-event": "Issue", "linear-delivery": "234d1a4e"})
    tampered = body.replace(b"create", b"remove")
    assert library("linear", body, tampered, headers, SECRET) == {"valid": True, "tampered": False}
    await proves(edge_client, redis, edge_settings, token, "linear", body, headers, tampered)


async def test_discord_interactions_verifies(edge_client, redis, edge_settings) -> None:
    private = ed25519.Ed25519PrivateKey.generate()
    public = private.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw).hex()
    token = await endpoint(redis, edge_settings, public)
    body = b'{"type":2,"id":"786008729715212338","data":{"id":"771825006014889984","name":"blep","type":1}}'
    headers = ours("discord", body, public, token, private_key=private)
    tampered = body.replace(b"blep", b"bleep")
    assert library("discord", body, tampered, headers, public) == {"valid": True, "tampered": False}
    await proves(edge_client, redis, edge_settings, token, "discord", body, headers, tampered)


async def test_mux_node_verifies(edge_client, redis, edge_settings) -> None:
    token = await endpoint(redis, edge_settings)
    body = b'{"type":"video.asset.ready","id":"3a56ac3d-33da-4366-855b-f592d898409d","data":{"status":"ready"}}'
    headers = ours("mux", body, SECRET, token)
    tampered = body.replace(b"ready", b"errored")
    assert library("mux", body, tampered, headers, SECRET) == {"valid": True, "tampered": False}
    await proves(edge_client, redis, edge_settings, token, "mux", body, headers, tampered)


async def test_octokit_webhooks_methods_signs_a_github_delivery(edge_client, redis, edge_settings) -> None:
    token = await endpoint(redis, edge_settings)
    body = b'{"zen":"Design for failure.","hook_id":109948940,"hook":{"type":"Repository"}}'
    tampered = body.replace(b"failure", b"success")
    answer = library("code_host", body, tampered, {}, SECRET)
    assert (answer["valid"], answer["tampered"]) == (True, False)
    headers = {"content-type": "application/json", "x-github-event": "ping", **answer["headers"]}
    await proves(edge_client, redis, edge_settings, token, "code_host", body, headers, tampered)


async def test_webflow_api_verifies(edge_client, redis, edge_settings) -> None:
    token = await endpoint(redis, edge_settings)
    body = b'{"triggerType":"form_submission","payload":{"name":"Contact","data":{"email":"a@example.com"}}}'
    headers = ours("webflow", body, SECRET, token)
    tampered = body.replace(b"Contact", b"Contacts")
    assert library("webflow", body, tampered, headers, SECRET) == {"valid": True, "tampered": False}
    await proves(edge_client, redis, edge_settings, token, "webflow", body, headers, tampered)


async def test_zoom_rivet_receives_what_the_edge_verifies_and_answers_the_validation_alike(
    edge_client, redis, edge_settings
) -> None:
    token = await endpoint(redis, edge_settings)
    body = b'{"event":"meeting.started","event_ts":1626230691572,"payload":{"object":{"id":"1234567890"}}}'
    headers = ours("zoom", body, SECRET, token)
    plain = b'{"plainToken":"qgg8vlvZRS6UYooatFL8Aw"}'
    validation = b'{"payload":' + plain + b',"event_ts":1654503849680,"event":"endpoint.url_validation"}'
    validation_headers = ours("zoom", validation, SECRET, token)
    tampered = body.replace(b"started", b"ended")
    answer = library(
        "zoom",
        body,
        tampered,
        headers,
        SECRET,
        validation=validation.decode(),
        validation_headers=validation_headers,
    )
    assert (answer["valid"], answer["tampered"]) == (True, False)
    shaken = await edge_client.post(f"/h/{token}", content=validation, headers=validation_headers)
    assert shaken.status_code == 200, shaken.text
    assert shaken.json() == answer["validation"]
    assert answer["validation"]["plainToken"] == "qgg8vlvZRS6UYooatFL8Aw"
    (handshake,) = await stored(redis, edge_settings)
    assert (handshake.provider, handshake.handshake) == ("zoom", True)
    await proves_after(edge_client, redis, edge_settings, token, body, headers, tampered)


async def proves_after(edge_client, redis, edge_settings, token: str, body: bytes, headers, tampered: bytes) -> None:
    """As ``proves``, with the handshake already stored before it."""
    resp = await edge_client.post(f"/h/{token}", content=body, headers=headers)
    assert resp.status_code == 200, resp.text
    _, record = await stored(redis, edge_settings)
    assert (record.provider, record.signature_valid, record.handshake) == ("zoom", True, False)
    refused = await edge_client.post(f"/h/{token}", content=tampered, headers=headers)
    assert refused.status_code == 401
    assert len(await stored(redis, edge_settings)) == 2


async def test_shopify_api_validates_the_webhook(edge_client, redis, edge_settings) -> None:
    token = await endpoint(redis, edge_settings)
    body = b'{"id":820982911946154508,"email":"jon@example.com","total_price":"403.00"}'
    headers = {
        "content-type": "application/json",
        "x-shopify-topic": "orders/create",
        "x-shopify-shop-domain": "example.myshopify.com",
        "x-shopify-api-version": "2025-01",
        "x-shopify-webhook-id": "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043",
        **sign_commerce(body, SECRET, "x-shopify-hmac-sha256"),
    }
    tampered = body.replace(b"403.00", b"4.03")
    assert library("commerce", body, tampered, headers, SECRET) == {"valid": True, "tampered": False}
    await proves(edge_client, redis, edge_settings, token, "commerce", body, headers, tampered)


async def test_twurple_eventsub_http_verifies_a_twitch_notification(edge_client, redis, edge_settings) -> None:
    token = await endpoint(redis, edge_settings)
    body = (
        b'{"subscription":{"id":"f1c2a387-161a-49f9-a165-0f21d7a4e1c4","type":"channel.follow","version":"2"},'
        b'"event":{"user_id":"1234","user_login":"cool_user","broadcaster_user_id":"1337"}}'
    )
    sent = {
        "twitch-eventsub-message-id": "befa7b53-d79d-478f-86b9-120f112b044e",
        "twitch-eventsub-message-timestamp": time.strftime("%Y-%m-%dT%H:%M:%S.000000000Z", time.gmtime()),
        "twitch-eventsub-message-type": "notification",
        "twitch-eventsub-subscription-type": "channel.follow",
    }
    headers = ours("twitch", body, SECRET, token, sent)
    tampered = body.replace(b"cool_user", b"cool_usex")
    assert library("twitch", body, tampered, headers, SECRET) == {"valid": True, "tampered": False}
    await proves(edge_client, redis, edge_settings, token, "twitch", body, headers, tampered)


async def test_metas_whatsapp_sdk_signs_a_webhook_delivery(edge_client, redis, edge_settings) -> None:
    """Meta's own SDK signs; a Meta POST carries no header that names Meta (GitHub's X-Hub-Signature-256 looks
    the same), so the endpoint names the provider, as a user does for Meta."""
    token = await endpoint(redis, edge_settings, provider="meta")
    body = (
        b'{"object":"whatsapp_business_account","entry":[{"id":"102290129340398","changes":[{"field":"messages",'
        b'"value":{"messaging_product":"whatsapp","messages":[{"from":"16315551181","type":"text",'
        b'"text":{"body":"this is a text message"}}]}}]}]}'
    )
    tampered = body.replace(b"a text message", b"a text massage")
    answer = library("meta", body, tampered, {}, SECRET)
    assert (answer["valid"], answer["tampered"]) == (True, False)
    headers = {"content-type": "application/json", **answer["headers"]}
    await proves(edge_client, redis, edge_settings, token, "meta", body, headers, tampered)
