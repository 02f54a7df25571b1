"""Signature verification and the allowlist end to end, through real processes (control, edge, flush
worker): the providers' official libraries and published vectors sign, the edge decides, /v1 shows it.
Helpers: trust_support.py."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import httpx
import pytest
import stripe
from standardwebhooks import Webhook as StandardWebhook
from svix.webhooks import Webhook as SvixWebhook

from shared.ids import signing_secret
from tests.conftest import Account
from tests.e2e.trust_support import (
    APPLY_WITHIN_S,
    GITHUB_BODY,
    GITHUB_SECRET,
    GITHUB_SIGNATURE,
    Api,
    assert_refused,
    payment,
    send,
    shopify_hmac,
    stripe_headers,
    until,
)
from tests.stack import Stack, free_port

pytestmark = pytest.mark.slow


@pytest.fixture
async def api(shared_stack: tuple[Stack, Account]) -> AsyncIterator[Api]:
    """One stack for the module (its tests each work on endpoints of their own account)."""
    client = Api(*shared_stack)
    yield client
    client.http.close()


async def test_requests_signed_by_the_official_libraries_verify(api: Api) -> None:
    # payments: stripe's own header generator, verified with the provider's secret set through PATCH
    stripe_secret = "whsec_" + uuid.uuid4().hex
    payments = api.endpoint(hmac_enabled=True, secret=stripe_secret)
    body = payment("evt_1Pq2Stripe", "invoice.paid")
    resp = send(payments["ingest_url"], body, stripe_headers(body, stripe_secret))
    assert resp.status_code == 200, resp.text
    event = api.stored(payments, resp.json()["id"])
    assert (event["signature_valid"], event["signature_failure_reason"]) == (True, None)
    assert (event["provider"], event["event_type"], event["idempotency_key"]) == (
        "payments",
        "invoice.paid",
        "evt_1Pq2Stripe",
    )
    assert event["ip_allowed"] is None
    stripe.Webhook.construct_event(event["body"], event["headers"]["stripe-signature"], stripe_secret)

    # identity: svix's and standardwebhooks' signers, each with its own header names
    identity_secret = signing_secret()
    identity = api.endpoint(hmac_enabled=True, secret=identity_secret)
    now = datetime.now(tz=UTC)
    body = b'{"type":"user.created","data":{"id":"user_1"}}'
    svix_id, std_id = f"msg_{uuid.uuid4().hex}", f"msg_{uuid.uuid4().hex}"
    signed = {
        svix_id: {
            "svix-id": svix_id,
            "svix-timestamp": str(int(now.timestamp())),
            "svix-signature": SvixWebhook(identity_secret).sign(svix_id, now, body.decode()),
        },
        std_id: {
            "webhook-id": std_id,
            "webhook-timestamp": str(int(now.timestamp())),
            "webhook-signature": StandardWebhook(identity_secret).sign(std_id, now, body.decode()),
        },
    }
    for msg_id, headers in signed.items():
        resp = send(identity["ingest_url"], body, headers)
        assert resp.status_code == 200, resp.text
        event = api.stored(identity, resp.json()["id"])
        assert (event["signature_valid"], event["signature_failure_reason"]) == (True, None)
        assert (event["provider"], event["event_type"], event["idempotency_key"]) == (
            "identity",
            "user.created",
            msg_id,
        )
    SvixWebhook(identity_secret).verify(body, signed[svix_id])  # the oracle agrees with what was sent

    # code_host: GitHub's published test vector, byte for byte
    github = api.endpoint(hmac_enabled=True, secret=GITHUB_SECRET)
    delivery = str(uuid.uuid4())
    resp = send(
        github["ingest_url"],
        GITHUB_BODY,
        {"X-Hub-Signature-256": GITHUB_SIGNATURE, "X-GitHub-Event": "push", "X-GitHub-Delivery": delivery},
    )
    assert resp.status_code == 200, resp.text
    event = api.stored(github, resp.json()["id"])
    assert (event["signature_valid"], event["provider"], event["event_type"]) == (True, "code_host", "push")
    assert event["idempotency_key"] == delivery

    # commerce: the documented construction, base64 HMAC-SHA256 of the raw body with the app secret
    shop_secret = "shpss_" + uuid.uuid4().hex
    shop = api.endpoint(hmac_enabled=True, secret=shop_secret)
    body = b'{"id":820982911946154508,"email":"jon@example.com"}'
    webhook_id = str(uuid.uuid4())
    headers = {
        "X-Shopify-Hmac-Sha256": shopify_hmac(body, shop_secret),
        "X-Shopify-Topic": "orders/create",
        "X-Shopify-Webhook-Id": webhook_id,
        "X-Shopify-Shop-Domain": "example.myshopify.com",
    }
    resp = send(shop["ingest_url"], body, headers)
    assert resp.status_code == 200, resp.text
    event = api.stored(shop, resp.json()["id"])
    assert (event["signature_valid"], event["provider"], event["event_type"]) == (True, "commerce", "orders/create")
    assert event["idempotency_key"] == webhook_id

    # a custom header_name: the scheme comes from the value's shape (here code_host's sha256=<hex>)
    custom = api.endpoint(hmac_enabled=True, secret=GITHUB_SECRET, header_name="X-Acme-Signature")
    resp = send(custom["ingest_url"], GITHUB_BODY, {"X-Acme-Signature": GITHUB_SIGNATURE})
    assert resp.status_code == 200, resp.text
    assert api.stored(custom, resp.json()["id"])["signature_valid"] is True
    assert_refused(
        send(custom["ingest_url"], GITHUB_BODY, {"X-Hub-Signature-256": GITHUB_SIGNATURE}), 401, "signature_invalid"
    )


def failing_requests(secret: str) -> dict[str, tuple[bytes, dict[str, str], str]]:
    """case → (body, headers, the reason docs/reference/signatures.md names for it), each a real provider-shaped
    request."""
    now = int(time.time())
    body = payment("evt_failing")
    wrong = "whsec_" + uuid.uuid4().hex
    svix_id = f"msg_{uuid.uuid4().hex}"
    svix_signature = SvixWebhook(signing_secret()).sign(svix_id, datetime.now(tz=UTC), body.decode())
    return {
        "unsigned": (body, {"Content-Type": "application/json"}, "missing_header"),
        "identity-without-id": (body, {"svix-signature": svix_signature, "svix-timestamp": str(now)}, "missing_header"),
        "no-t": (body, {"Stripe-Signature": "v1=" + "ab" * 32}, "malformed_header"),
        "not-hex": (body, {"Stripe-Signature": f"t={now},v1=not-a-signature"}, "malformed_header"),
        "bad-timestamp": (body, {"Stripe-Signature": f"t=yesterday,v1={'ab' * 32}"}, "malformed_timestamp"),
        "old": (body, stripe_headers(body, secret, now - 120), "timestamp_out_of_tolerance"),
        "future": (body, stripe_headers(body, secret, now + 120), "timestamp_out_of_tolerance"),
        "wrong-secret": (body, stripe_headers(body, wrong), "signature_mismatch"),
    }


async def test_accept_log_stores_each_failure_with_its_reason(api: Api) -> None:
    secret = "whsec_" + uuid.uuid4().hex
    made = api.endpoint(hmac_enabled=True, secret=secret, on_failure="accept_log", tolerance_seconds=5)
    cases = failing_requests(secret)
    for case, (body, headers, reason) in cases.items():
        resp = send(made["ingest_url"], body, {**headers, "x-case": case})
        assert resp.status_code == 200, (case, resp.text)
        event = api.stored(made, resp.json()["id"])
        assert event["headers"]["x-case"] == case
        assert (event["signature_valid"], event["signature_failure_reason"]) == (False, reason), case
    body = payment("evt_good")
    good = send(made["ingest_url"], body, stripe_headers(body, secret))
    event = api.stored(made, good.json()["id"])
    assert (event["signature_valid"], event["signature_failure_reason"]) == (True, None)
    assert len(api.events(made, len(cases) + 1)) == len(cases) + 1


async def test_reject_refuses_each_failure_and_stores_nothing(api: Api) -> None:
    secret = "whsec_" + uuid.uuid4().hex
    made = api.endpoint(hmac_enabled=True, secret=secret, tolerance_seconds=5)  # on_failure defaults to reject
    for case, (body, headers, reason) in failing_requests(secret).items():
        err = assert_refused(send(made["ingest_url"], body, headers), 401, "signature_invalid")
        assert reason in err["message"], case
    body = payment("evt_only_this_one")
    good = send(made["ingest_url"], body, stripe_headers(body, secret))
    assert good.status_code == 200, good.text
    api.stored(made, good.json()["id"])
    events = api.events(made, 1)
    assert [e["id"] for e in events] == [good.json()["id"]]
    assert events[0]["signature_valid"] is True


async def test_without_hmac_nothing_is_verified(api: Api) -> None:
    made = api.endpoint()
    body = payment("evt_unchecked")
    for headers in (stripe_headers(body, "whsec_" + uuid.uuid4().hex), {"Stripe-Signature": "garbage"}, {}):
        resp = send(made["ingest_url"], body, headers)
        assert resp.status_code == 200, resp.text
        event = api.stored(made, resp.json()["id"])
        assert (event["signature_valid"], event["signature_failure_reason"]) == (None, None)


async def test_auth_config_and_allowlist_changes_apply_within_a_second(api: Api) -> None:
    made = api.endpoint()
    url = made["ingest_url"]
    secret = "whsec_" + uuid.uuid4().hex
    body = payment("evt_apply")

    def unsigned() -> httpx.Response:
        return send(url, body, {})

    assert unsigned().status_code == 200  # the edge now holds the endpoint's config in its cache
    api.auth(made, hmac_enabled=True, secret=secret)
    assert_refused(until(unsigned, 401), 401, "signature_invalid")
    assert send(url, body, stripe_headers(body, secret)).status_code == 200

    api.auth(made, on_failure="accept_log")
    logged = until(unsigned, 200)
    assert api.stored(made, logged.json()["id"])["signature_failure_reason"] == "missing_header"

    api.auth(made, on_failure="reject")
    until(unsigned, 401)
    api.auth(made, hmac_enabled=False)
    plain = until(lambda: send(url, body, {"Stripe-Signature": "garbage"}), 200)
    assert api.stored(made, plain.json()["id"])["signature_valid"] is None

    entry = api.allow(made, "10.0.0.0/8")
    assert_refused(until(unsigned, 403), 403, "ip_not_allowed")
    api.disallow(entry)
    reopened = until(unsigned, 200)
    assert api.stored(made, reopened.json()["id"])["ip_allowed"] is None


async def test_rotating_the_platform_secret_stops_the_old_one_verifying(api: Api) -> None:
    made = api.endpoint(hmac_enabled=True)  # no secret of its own: the platform secret verifies
    body = b'{"type":"user.created"}'
    old = made["signing_secret"]

    def signed_with(secret: str) -> httpx.Response:
        now = datetime.now(tz=UTC)
        msg_id = f"msg_{uuid.uuid4().hex}"
        headers = {
            "webhook-id": msg_id,
            "webhook-timestamp": str(int(now.timestamp())),
            "webhook-signature": StandardWebhook(secret).sign(msg_id, now, body.decode()),
        }
        return send(made["ingest_url"], body, headers)

    first = signed_with(old)
    assert first.status_code == 200, first.text
    assert api.stored(made, first.json()["id"])["signature_valid"] is True

    rotated = api.http.post(f"/v1/endpoints/{made['id']}/auth-config/rotate-secret")
    assert rotated.status_code == 200, rotated.text
    new = rotated.json()["signing_secret"]
    assert new != old
    err = assert_refused(until(lambda: signed_with(old), 401), 401, "signature_invalid")
    assert "signature_mismatch" in err["message"]
    fresh = signed_with(new)
    assert fresh.status_code == 200, fresh.text
    assert api.stored(made, fresh.json()["id"])["signature_valid"] is True


async def test_the_allowlist_blocks_logs_and_admits(api: Api) -> None:
    made = api.endpoint()
    url = made["ingest_url"]
    api.allow(made, "10.0.0.0/8")  # deny by default from now on; 127.0.0.1 is outside
    err = assert_refused(send(url, b'{"n":1}', {}), 403, "ip_not_allowed")
    assert "127.0.0.1" in err["message"]

    api.auth(made, log_blocked_ips=True)
    logged = until(lambda: send(url, b'{"n":2}', {}), 403)
    deadline = time.monotonic() + APPLY_WITHIN_S
    while "x-hookyard-event-id" not in logged.headers:  # blocked all the same, but now stored
        assert time.monotonic() < deadline, "log_blocked_ips did not apply within a second"
        logged = send(url, b'{"n":2}', {})
    assert logged.json()["error"]["code"] == "ip_not_allowed"
    event = api.stored(made, logged.headers["x-hookyard-event-id"])
    assert (event["ip_allowed"], event["source_ip"]) == (False, "127.0.0.1")

    api.allow(made, "127.0.0.1")
    admitted = until(lambda: send(url, b'{"n":3}', {}), 200)
    event = api.stored(made, admitted.json()["id"])
    assert (event["ip_allowed"], event["source_ip"]) == (True, "127.0.0.1")
    stored = api.events(made, 2)
    assert [e["ip_allowed"] for e in stored] == [False] * (len(stored) - 1) + [True]
    assert all(json.loads(e["body"])["n"] != 1 for e in stored)  # the first, unlogged refusal left no trace


async def test_a_blocked_source_fails_before_verification(api: Api) -> None:
    secret = "whsec_" + uuid.uuid4().hex
    made = api.endpoint(hmac_enabled=True, secret=secret)
    api.allow(made, "192.0.2.0/24")
    body = payment("evt_blocked")
    assert_refused(send(made["ingest_url"], body, stripe_headers(body, secret)), 403, "ip_not_allowed")
    assert_refused(send(made["ingest_url"], body, {}), 403, "ip_not_allowed")
    api.allow(made, "127.0.0.0/8")
    ok = until(lambda: send(made["ingest_url"], body, stripe_headers(body, secret)), 200)
    event = api.stored(made, ok.json()["id"])
    assert (event["ip_allowed"], event["signature_valid"]) == (True, True)
    assert_refused(send(made["ingest_url"], body, {}), 401, "signature_invalid")


async def test_an_ipv6_sender_is_matched_against_ipv6_ranges(api: Api) -> None:
    port = free_port()
    api.stack.start("edge6", "edge", "--host", "::1", "--port", str(port))
    edge6 = f"http://[::1]:{port}"
    api.stack.wait_healthy(f"{edge6}/healthz", api.stack.procs["edge6"])
    made = api.endpoint()
    token = made["ingest_url"].rsplit("/h/", 1)[1]
    url6 = f"{edge6}/h/{token}"
    api.allow(made, "2001:db8::/32")
    err = assert_refused(send(url6, b"{}", {}), 403, "ip_not_allowed")
    assert "::1" in err["message"]
    assert_refused(send(made["ingest_url"], b"{}", {}), 403, "ip_not_allowed")  # the IPv4 edge: 127.0.0.1
    api.allow(made, "::1")
    admitted = until(lambda: send(url6, b"{}", {}), 200)
    event = api.stored(made, admitted.json()["id"])
    assert (event["source_ip"], event["ip_allowed"]) == ("::1", True)
    assert_refused(send(made["ingest_url"], b"{}", {}), 403, "ip_not_allowed")


async def test_forwarded_for_is_believed_only_from_a_trusted_proxy(api: Api) -> None:
    stack = api.stack
    stack.env["HOOKYARD_TRUSTED_PROXIES"] = "127.0.0.1/32"
    port = free_port()
    behind_proxy = stack.start_edge("edge-proxied", port=port)
    made = api.endpoint()
    token = made["ingest_url"].rsplit("/h/", 1)[1]
    proxied, direct = f"{behind_proxy}/h/{token}", made["ingest_url"]  # `direct` trusts no proxy

    def via(url: str, forwarded: str, n: int) -> httpx.Response:
        return send(url, b'{"n":%d}' % n, {"X-Forwarded-For": forwarded})

    # No allowlist: source_ip is the forwarded address behind the trusted proxy, the socket's otherwise.
    resp = via(proxied, "203.0.113.9", 1)
    assert api.stored(made, resp.json()["id"])["source_ip"] == "203.0.113.9"
    resp = via(proxied, "198.51.100.23, 10.1.2.3", 2)  # the rightmost untrusted hop is the sender
    assert api.stored(made, resp.json()["id"])["source_ip"] == "10.1.2.3"
    resp = via(direct, "203.0.113.9", 3)
    assert api.stored(made, resp.json()["id"])["source_ip"] == "127.0.0.1"

    # The allowlist decides on that same address.
    api.allow(made, "203.0.113.0/24")
    admitted = until(lambda: via(proxied, "203.0.113.9", 4), 200)
    event = api.stored(made, admitted.json()["id"])
    assert (event["source_ip"], event["ip_allowed"]) == ("203.0.113.9", True)
    assert_refused(via(proxied, "198.51.100.23", 5), 403, "ip_not_allowed")
    spoofed = until(lambda: via(direct, "203.0.113.9", 6), 403)  # a spoofed header changes nothing
    assert "127.0.0.1" in spoofed.json()["error"]["message"]

    # IPv6 ranges match forwarded IPv6 senders.
    api.allow(made, "2001:db8::/32")
    admitted = until(lambda: via(proxied, "2001:db8::5", 7), 200)
    event = api.stored(made, admitted.json()["id"])
    assert (event["source_ip"], event["ip_allowed"]) == ("2001:db8::5", True)
    assert_refused(via(proxied, "2001:db9::5", 8), 403, "ip_not_allowed")
