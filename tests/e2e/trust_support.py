"""The client and request helpers of the trust end-to-end tests: a /v1 client for a stack and account,
senders of requests signed by the providers' official libraries and published vectors, and waiting for a
change to reach the edge."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from collections.abc import Callable
from typing import Any

import httpx
import stripe

from tests.conftest import Account
from tests.stack import Stack

APPLY_WITHIN_S = 1.0  # a change to auth config or allowlist applies on the edge within a second


# GitHub's documented test vector ("Validating webhook deliveries").
GITHUB_SECRET = "It's a Secret to Everybody"
GITHUB_BODY = b"Hello, World!"
GITHUB_SIGNATURE = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"


class Api:
    """The control plane over real HTTP, as the test's account."""

    def __init__(self, stack: Stack, account: Account) -> None:
        self.stack, self.account = stack, account
        self.http = httpx.Client(base_url=stack.control_url, headers=account.headers, timeout=10)

    def endpoint(self, **auth: Any) -> dict[str, Any]:
        """A new endpoint, with its auth config patched before any request reaches it."""
        resp = self.http.post("/v1/endpoints", json={"name": "trust-e2e"})
        assert resp.status_code == 201, resp.text
        made = resp.json()
        if auth:
            self.auth(made, **auth)
        return made

    def auth(self, endpoint: dict[str, Any], **change: Any) -> dict[str, Any]:
        resp = self.http.patch(f"/v1/endpoints/{endpoint['id']}/auth-config", json=change)
        assert resp.status_code == 200, resp.text
        return resp.json()

    def allow(self, endpoint: dict[str, Any], cidr: str) -> dict[str, Any]:
        resp = self.http.post(f"/v1/endpoints/{endpoint['id']}/allowlist", json={"cidr": cidr})
        assert resp.status_code == 201, resp.text
        return resp.json()

    def disallow(self, entry: dict[str, Any]) -> None:
        assert self.http.delete(f"/v1/allowlist/{entry['id']}").status_code == 200

    def events(self, endpoint: dict[str, Any], want: int, timeout_s: float = 10) -> list[dict[str, Any]]:
        """The endpoint's events, oldest first, once at least ``want`` are stored (or the deadline passed)."""
        deadline = time.monotonic() + timeout_s
        while True:
            resp = self.http.get(f"/v1/endpoints/{endpoint['id']}/events", params={"limit": 100})
            assert resp.status_code == 200, resp.text
            events = resp.json()["events"]
            if len(events) >= want or time.monotonic() > deadline:
                return events[::-1]
            time.sleep(0.05)

    def stored(self, endpoint: dict[str, Any], event_id: str) -> dict[str, Any]:
        deadline = time.monotonic() + 10
        while (resp := self.http.get(f"/v1/events/{event_id}")).status_code == 404:
            assert time.monotonic() < deadline, f"event {event_id} not stored within 10 s"
            time.sleep(0.05)
        assert resp.status_code == 200, resp.text
        event = resp.json()
        assert event["endpoint_id"] == endpoint["id"]
        return event


def send(url: str, body: bytes, headers: dict[str, str]) -> httpx.Response:
    return httpx.post(url, content=body, headers=headers, timeout=10)


def until(request: Callable[[], httpx.Response], status: int, timeout_s: float = APPLY_WITHIN_S) -> httpx.Response:
    """Repeats ``request`` until it answers ``status``; fails when that takes longer than ``timeout_s``."""
    started = time.monotonic()
    while (resp := request()).status_code != status:
        assert time.monotonic() - started < timeout_s, f"still {resp.status_code} {resp.text} after {timeout_s}s"
        time.sleep(0.02)
    return resp


def assert_refused(resp: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert resp.status_code == status, resp.text
    body = resp.json()
    assert set(body) == {"error"}
    assert body["error"]["code"] == code, body
    assert "x-hookyard-event-id" not in resp.headers
    return body["error"]


def payment(event_id: str, event_type: str = "payment_intent.succeeded") -> bytes:
    return json.dumps({"id": event_id, "object": "event", "type": event_type, "data": {"object": {}}}).encode()


def stripe_headers(body: bytes, secret: str, timestamp: int | None = None) -> dict[str, str]:
    return {
        "Stripe-Signature": stripe.WebhookSignature.generate_signature_header(body.decode(), secret, timestamp),
        "Content-Type": "application/json; charset=utf-8",
    }


def shopify_hmac(body: bytes, secret: str) -> str:
    return base64.b64encode(hmac.new(secret.encode(), body, hashlib.sha256).digest()).decode()
