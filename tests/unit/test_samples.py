"""The sample generator (``shared.samples``): every provider's every event is attributed, verified and shaped
as the real provider's, under both header families; the providers' official libraries are the oracles
where one exists (payments: ``stripe``; identity: ``svix`` and ``standardwebhooks``)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time

import pytest
import standardwebhooks
import stripe
import svix.webhooks

from shared.attribution import attribute
from shared.headers import raw_headers
from shared.samples import EVENT_TYPES, PROVIDERS, sample
from shared.signatures import verify

WHSEC = "whsec_" + base64.b64encode(b"k" * 32).decode()
ALL = [(provider, name) for provider in PROVIDERS for name in EVENT_TYPES[provider]]
"""The four kinds' samples; the catalog's other providers' are in test_provider_samples.py."""


def test_every_spec_event_name_is_covered() -> None:
    """The event names the samples cover for three providers; the code host's names are its usual ones."""
    assert PROVIDERS == ("identity", "commerce", "payments", "code_host")
    assert len(EVENT_TYPES["identity"]) == 10
    assert len(EVENT_TYPES["commerce"]) == 9
    assert len(EVENT_TYPES["payments"]) == 10
    assert {"push", "pull_request", "ping"} <= set(EVENT_TYPES["code_host"])


@pytest.mark.parametrize("family", ["neutral", "vendor"])
@pytest.mark.parametrize(("provider", "event_type"), ALL)
def test_attributed_and_verified_like_real_traffic(provider: str, event_type: str, family: str) -> None:
    made = sample(provider, event_type, secret=WHSEC, family=family)
    raw = raw_headers(made.headers)
    found = attribute(raw, made.body)
    assert (found.provider, found.event_type, found.idempotency_key) == (provider, event_type, made.idempotency_key)
    verdict = verify(raw, made.body, WHSEC)
    assert verdict.valid, verdict
    assert verdict.scheme == provider
    assert not verify(raw, made.body, WHSEC[:-2] + "xx").valid
    body = json.loads(made.body)
    assert isinstance(body, dict)
    assert made.headers["content-type"].startswith("application/json")
    assert made.signature_header in made.headers
    assert all(name == name.lower() for name in made.headers)


@pytest.mark.parametrize("event_type", EVENT_TYPES["payments"])
def test_payments_sample_passes_stripe(event_type: str) -> None:
    made = sample("payments", event_type, secret=WHSEC, family="vendor")
    assert made.headers["content-type"] == "application/json; charset=utf-8"
    assert stripe.WebhookSignature.verify_header(made.body.decode(), made.headers["stripe-signature"], WHSEC, 300)
    event = stripe.Event.construct_from(json.loads(made.body), "sk_test")
    assert event.id == made.idempotency_key
    assert event.id.startswith("evt_")
    assert event.type == event_type
    assert event.data.object.object in {
        "payment_intent",
        "checkout.session",
        "subscription",
        "invoice",
        "charge",
        "dispute",
    }


@pytest.mark.parametrize("event_type", EVENT_TYPES["identity"])
def test_identity_sample_passes_svix_and_standardwebhooks(event_type: str) -> None:
    made = sample("identity", event_type, secret=WHSEC, family="vendor")
    svix.webhooks.Webhook(WHSEC).verify(made.body, made.headers)  # raises unless it verifies
    standard = {name.replace("svix-", "webhook-"): value for name, value in made.headers.items()}
    assert standardwebhooks.Webhook(WHSEC).verify(made.body, standard)["type"] == event_type
    assert made.idempotency_key == made.headers["svix-id"]
    assert made.idempotency_key.startswith("msg_")


def test_commerce_headers_and_signature() -> None:
    made = sample("commerce", "orders/paid", secret="shpss_" + "a" * 32)
    expected = base64.b64encode(hmac.new(b"shpss_" + b"a" * 32, made.body, hashlib.sha256).digest()).decode()
    assert made.headers["x-shop-hmac-sha256"] == expected
    assert made.headers["x-shop-topic"] == "orders/paid"
    assert made.headers["x-shop-webhook-id"] == made.idempotency_key
    assert made.headers["x-shop-webhook-id"] != made.headers["x-shop-event-id"]
    assert made.headers["x-shop-shop-domain"].endswith(".example")
    assert made.headers["x-shop-api-version"]
    order = json.loads(made.body)
    assert order["financial_status"] == "paid"
    assert order["admin_graphql_api_id"] == f"gid://shop/Order/{order['id']}"
    assert order["line_items"][0]["price"].count(".") == 1  # amounts as decimal strings


def test_code_host_headers_and_signature() -> None:
    made = sample("code_host", "pull_request", secret="s3cret-s3cret-s3cret", family="vendor")
    mac = hmac.new(b"s3cret-s3cret-s3cret", made.body, hashlib.sha256).hexdigest()
    assert made.headers["x-hub-signature-256"] == f"sha256={mac}"
    assert made.headers["x-github-event"] == "pull_request"
    assert made.headers["x-github-delivery"] == made.idempotency_key
    body = json.loads(made.body)
    assert body["action"] == "opened"
    assert {"repository", "sender", "pull_request"} <= set(body)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_custom_signature_header(provider: str) -> None:
    """An endpoint verifying a custom ``header_name`` reads the signature there (scheme from its shape)."""
    made = sample(provider, EVENT_TYPES[provider][0], secret=WHSEC, header_name="X-Custom-Sig")
    assert made.signature_header == "x-custom-sig"
    raw = raw_headers(made.headers)
    assert verify(raw, made.body, WHSEC, header_name="x-custom-sig").valid


@pytest.mark.parametrize("provider", ["identity", "commerce", "code_host"])
def test_unsigned_sample_is_still_attributed(provider: str) -> None:
    made = sample(provider, EVENT_TYPES[provider][-1])
    assert made.signature_header is None
    found = attribute(raw_headers(made.headers), made.body)
    assert (found.provider, found.idempotency_key) == (provider, made.idempotency_key)
    assert verify(raw_headers(made.headers), made.body, WHSEC).reason == "missing_header"


def test_unsigned_payments_sample_is_unattributed() -> None:
    """The payments provider is recognised by its signature header alone (docs/reference/events.md), and always
    signs."""
    made = sample("payments", "invoice.paid")
    assert "pay-signature" not in made.headers
    assert attribute(raw_headers(made.headers), made.body).provider is None


def test_seed_and_clock_make_a_sample_reproducible() -> None:
    first = sample("payments", "invoice.paid", secret=WHSEC, seed=7, now=1_800_000_000)
    again = sample("payments", "invoice.paid", secret=WHSEC, seed=7, now=1_800_000_000)
    other = sample("payments", "invoice.paid", secret=WHSEC, seed=8, now=1_800_000_000)
    assert first == again
    assert other.body != first.body
    assert json.loads(first.body)["created"] == 1_800_000_000
    assert first.headers["pay-signature"].startswith("t=1800000000,v1=")


def test_fresh_samples_are_current_and_distinct() -> None:
    before = int(time.time())
    one, two = (sample("identity", "user.created", secret=WHSEC) for _ in range(2))
    assert one.idempotency_key != two.idempotency_key
    assert before <= int(one.headers["relay-timestamp"]) <= time.time() + 1
    user = json.loads(one.body)["data"]
    assert user["id"].startswith("user_")
    assert user["primary_email_address_id"] == user["email_addresses"][0]["id"]


def test_unknown_provider_or_event_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown provider"):
        sample("mail", "sent")
    with pytest.raises(ValueError, match="payments sends no 'orders/create'"):
        sample("payments", "orders/create")
    with pytest.raises(ValueError, match="discord's 'PING' is its handshake, which hookyard cannot sign"):
        sample("discord", "PING")
