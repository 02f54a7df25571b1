"""Ed25519 (Standard Webhooks ``v1a``) verified with libsodium (``pynacl``) exactly as the spec says, and
rotation with overlap: during it both signatures go out and a receiver holding either secret verifies
(``standardwebhooks`` and ``svix``); once the overlap ends on the worker's clock, only the new one."""

from __future__ import annotations

import base64
from typing import Any

import nacl.exceptions
import nacl.signing
import pytest
import standardwebhooks
import svix
from standardwebhooks.webhooks import WebhookVerificationError

from control.db.context import Context
from tests.destination import Destination, Received, make_task, running, settled
from tests.helpers import endpoint_with_destination


def verify_v1a(public_key: str, got: Received) -> None:
    """The spec's asymmetric check: base64 Ed25519 signature over ``{id}.{timestamp}.{body}``, any ``v1a``
    entry of the space separated list may match (nacl raises BadSignatureError otherwise)."""
    key = nacl.signing.VerifyKey(base64.b64decode(public_key.removeprefix("whpk_")))
    signed = f"{got.headers['webhook-id']}.{got.headers['webhook-timestamp']}.".encode() + got.body
    entries = [e.split(",", 1)[1] for e in got.headers["webhook-signature"].split(" ") if e.startswith("v1a,")]
    for entry in entries:
        try:
            key.verify(signed, base64.b64decode(entry))
            return
        except nacl.exceptions.BadSignatureError:
            continue
    raise nacl.exceptions.BadSignatureError("no v1a entry verifies")


async def _rotate(client: Any, account: Any, destination_id: str, **body: Any) -> dict[str, Any]:
    resp = await client.post(
        f"/v1/destinations/{destination_id}/rotate-secret", json=body or None, headers=account.headers
    )
    assert resp.status_code == 200, resp.text
    return resp.json()


async def _delivered(ctx: Context, destination: Destination, endpoint: str, destination_id: str) -> Received:
    count = len(destination.requests)
    made = await make_task(ctx, destination.url, endpoint_id=endpoint, destination_id=destination_id, body=b'{"n":1}')
    await settled(ctx, made["task"], "succeeded")
    return destination.requests[count]


async def test_ed25519_deliveries_verify_with_the_public_key(
    ctx: Context, client: Any, account: Any, destination: Destination
) -> None:
    endpoint, created = await endpoint_with_destination(
        client, account.headers, destination.url, signing_scheme="ed25519"
    )
    assert created["signing_scheme"] == "ed25519"
    assert created["signing_secret"] is None  # the private key never leaves hookyard
    public = created["signing_public_key"]
    assert public.startswith("whpk_")
    assert len(base64.b64decode(public[5:])) == 32
    read = (await client.get(f"/v1/destinations/{created['id']}", headers=account.headers)).json()
    assert read["signing_public_key"] == public
    async with running(ctx):
        got = await _delivered(ctx, destination, endpoint, created["id"])
    assert got.headers["webhook-signature"].startswith("v1a,")
    verify_v1a(public, got)
    other = nacl.signing.SigningKey.generate().verify_key.encode()
    with pytest.raises(nacl.exceptions.BadSignatureError):
        verify_v1a("whpk_" + base64.b64encode(other).decode(), got)


async def test_hmac_rotation_sends_both_until_the_overlap_ends(
    ctx: Context, client: Any, account: Any, destination: Destination
) -> None:
    endpoint, created = await endpoint_with_destination(client, account.headers, destination.url)
    old = created["signing_secret"]
    rotated = await _rotate(client, account, created["id"], overlap_s=3600)
    new = rotated["signing_secret"]
    assert new != old
    assert rotated["previous_secret_expires_at"] is not None
    async with running(ctx) as deliver:
        during = await _delivered(ctx, destination, endpoint, created["id"])
        assert len(during.headers["webhook-signature"].split(" ")) == 2
        for secret in (old, new):  # a receiver holding either verifies
            standardwebhooks.Webhook(secret).verify(during.body, during.headers)
            svix.Webhook(secret).verify(during.body, during.headers)
        later = deliver.attempts.now() + 3601
        deliver.attempts.now = lambda: later  # the overlap is over on the worker's clock
        after = await _delivered(ctx, destination, endpoint, created["id"])
    assert len(after.headers["webhook-signature"].split(" ")) == 1
    standardwebhooks.Webhook(new).verify(after.body, after.headers)
    with pytest.raises(WebhookVerificationError):
        standardwebhooks.Webhook(old).verify(after.body, after.headers)


async def test_rotation_without_overlap_drops_the_old_secret_at_once(
    ctx: Context, client: Any, account: Any, destination: Destination
) -> None:
    endpoint, created = await endpoint_with_destination(client, account.headers, destination.url)
    rotated = await _rotate(client, account, created["id"], overlap_s=0)
    assert rotated["previous_secret_expires_at"] is None
    async with running(ctx):
        got = await _delivered(ctx, destination, endpoint, created["id"])
    assert len(got.headers["webhook-signature"].split(" ")) == 1
    svix.Webhook(rotated["signing_secret"]).verify(got.body, got.headers)
    with pytest.raises(svix.webhooks.WebhookVerificationError):
        svix.Webhook(created["signing_secret"]).verify(got.body, got.headers)


async def test_rotation_defaults_to_a_day_and_can_move_to_ed25519(
    ctx: Context, client: Any, account: Any, destination: Destination
) -> None:
    endpoint, created = await endpoint_with_destination(client, account.headers, destination.url)
    rotated = await _rotate(client, account, created["id"])  # no body: the default overlap
    assert rotated["previous_secret_expires_at"] is not None
    moved = await _rotate(client, account, created["id"], signing_scheme="ed25519", overlap_s=600)
    assert moved["signing_secret"] is None
    assert moved["signing_scheme"] == "ed25519"
    async with running(ctx):
        got = await _delivered(ctx, destination, endpoint, created["id"])
    kinds = [entry.split(",")[0] for entry in got.headers["webhook-signature"].split(" ")]
    assert kinds == ["v1a", "v1"]
    verify_v1a(moved["signing_public_key"], got)
    standardwebhooks.Webhook(rotated["signing_secret"]).verify(got.body, got.headers)  # the HMAC one still works
    again = await _rotate(client, account, created["id"], overlap_s=600)
    assert again["previous_public_key"] == moved["signing_public_key"]
    async with running(ctx):
        both = await _delivered(ctx, destination, endpoint, created["id"])
    verify_v1a(moved["signing_public_key"], both)
    verify_v1a(again["signing_public_key"], both)


async def test_rotation_is_checked(client: Any, account: Any, destination: Destination) -> None:
    _, created = await endpoint_with_destination(client, account.headers, destination.url)
    for body, field in (({"overlap_s": -1}, "overlap_s"), ({"overlap_s": 10**9}, "overlap_s"), ({"x": 1}, "x")):
        resp = await client.post(f"/v1/destinations/{created['id']}/rotate-secret", json=body, headers=account.headers)
        assert resp.status_code == 400, resp.text
        assert field in resp.json()["error"]["message"], resp.text


async def test_a_patch_of_the_scheme_says_that_rotating_changes_it(client: Any, account: Any, settings: Any) -> None:
    """`signing_scheme` in a PATCH is refused naming the operation that changes it, on /v1 and over MCP alike;
    a bare "unknown field" read as if destinations had no scheme at all."""
    from tests.events_support import live_app
    from tests.mcp_client import call, connected

    _, created = await endpoint_with_destination(client, account.headers, "http://127.0.0.1:9/hook")
    patch = {"signing_scheme": "ed25519"}
    resp = await client.patch(f"/v1/destinations/{created['id']}", json=patch, headers=account.headers)
    assert resp.status_code == 400, resp.text
    message = resp.json()["error"]["message"]
    assert message.startswith("signing_scheme: ")
    assert "/rotate-secret" in message
    async with live_app(settings) as (_, app), connected(app, account.key) as mcp:
        is_error, answer = await call(mcp, "update_destination", destination_id=created["id"], **patch)
    assert is_error
    assert answer["error"]["message"] == message
    resp = await client.patch(f"/v1/destinations/{created['id']}", json={"nope": 1}, headers=account.headers)
    assert resp.json()["error"]["message"] == "nope: unknown field"
