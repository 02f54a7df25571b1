"""Scheme families (shared/signatures/payments.py, identity.py, code_host.py, commerce.py) against the
official libraries (stripe, svix, standardwebhooks) and published vectors; multiple entries, v0 and other versions."""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
from datetime import UTC, datetime

import pytest
import standardwebhooks
import stripe
import svix.webhooks

from shared.signatures import HEADERS, sign
from tests.unit.signatures.support import (
    BODY,
    GITHUB_BODY,
    GITHUB_SECRET,
    GITHUB_SIGNATURE,
    IDENTITY_FAMILIES,
    NOW,
    PLAIN,
    WHSEC,
    bad,
    commerce_b64,
    identity_headers,
    identity_sig,
    ok,
    payments_hex,
    verify,
)


@pytest.mark.parametrize("header", ["stripe-signature", "pay-signature"])
def test_stripe_generated_header_verifies(header: str) -> None:
    value = stripe.WebhookSignature.generate_signature_header(BODY.decode(), "whsec_test", timestamp=NOW)
    assert verify({header: value}, BODY, "whsec_test", now=NOW) == ok("payments")
    assert verify({header: value}, BODY, "whsec_other", now=NOW) == bad("payments", "signature_mismatch")


@pytest.mark.parametrize("family", ["neutral", "vendor"])
def test_our_payments_signature_passes_stripe(family: str) -> None:
    headers = sign("payments", BODY, "whsec_test", header_family=family)
    (value,) = headers.values()
    assert list(headers) == [HEADERS["payments"][family][0]]
    assert stripe.WebhookSignature.verify_header(BODY.decode(), value, "whsec_test", 300)
    assert stripe.Webhook.construct_event(BODY.decode(), value, "whsec_test").type == "invoice.paid"
    with pytest.raises(stripe.SignatureVerificationError):
        stripe.WebhookSignature.verify_header(BODY.decode(), value, "whsec_other", 300)


def test_payments_signature_is_stripes_exact_string() -> None:
    ours = sign("payments", BODY, "whsec_test", timestamp=NOW, header_family="vendor")
    theirs = stripe.WebhookSignature.generate_signature_header(BODY.decode(), "whsec_test", timestamp=NOW)
    assert ours == {"stripe-signature": theirs}


@pytest.mark.parametrize("family", IDENTITY_FAMILIES)
def test_svix_signature_verifies_under_every_family(family: str) -> None:
    when = datetime.fromtimestamp(NOW, tz=UTC)
    value = svix.webhooks.Webhook(WHSEC).sign("msg_abc", when, BODY.decode())
    headers = identity_headers(family, value, "msg_abc")
    assert verify(headers, BODY, WHSEC, now=NOW) == ok("identity")


@pytest.mark.parametrize("family", IDENTITY_FAMILIES)
def test_standardwebhooks_signature_verifies_under_every_family(family: str) -> None:
    when = datetime.fromtimestamp(NOW, tz=UTC)
    value = standardwebhooks.Webhook(WHSEC).sign("msg_abc", when, BODY.decode())
    assert verify(identity_headers(family, value, "msg_abc"), BODY, WHSEC, now=NOW) == ok("identity")


def test_our_identity_signature_passes_svix() -> None:
    headers = sign("identity", BODY, WHSEC, header_family="vendor")
    assert set(headers) == {"svix-signature", "svix-id", "svix-timestamp"}
    svix.webhooks.Webhook(WHSEC).verify(BODY, headers)
    with pytest.raises(svix.webhooks.WebhookVerificationError):
        svix.webhooks.Webhook("whsec_" + base64.b64encode(b"x" * 32).decode()).verify(BODY, headers)


@pytest.mark.parametrize("family", IDENTITY_FAMILIES)
def test_our_identity_signature_passes_standardwebhooks(family: str) -> None:
    headers = sign("identity", BODY, WHSEC, msg_id="msg_xyz", header_family=family)
    sig_name, id_name, ts_name = HEADERS["identity"][family]
    assert headers[id_name] == "msg_xyz"
    assert abs(int(headers[ts_name]) - time.time()) < 5
    # The library reads only webhook-*: the neutral and svix families sign the very same content.
    as_standard = {
        "webhook-signature": headers[sig_name],
        "webhook-id": headers[id_name],
        "webhook-timestamp": headers[ts_name],
    }
    assert standardwebhooks.Webhook(WHSEC).verify(BODY, as_standard) == {
        "id": "evt_1",
        "type": "invoice.paid",
        "data": {"object": {"amount": 2000}},
    }


def test_identity_secret_without_whsec_prefix_is_its_utf8_bytes() -> None:
    """Decision: a secret without ``whsec_`` is the key as UTF-8 (standardwebhooks with a bytes key)."""
    headers = sign("identity", BODY, PLAIN, header_family="standard")
    standardwebhooks.Webhook(PLAIN.encode()).verify(BODY, headers)
    when = datetime.fromtimestamp(NOW, tz=UTC)
    value = standardwebhooks.Webhook(PLAIN.encode()).sign("m", when, BODY.decode())
    assert verify(identity_headers("neutral", value, "m"), BODY, PLAIN, now=NOW) == ok("identity")


def test_identity_whsec_secret_is_base64_decoded_even_unpadded() -> None:
    key = b"\x01\x02\x03\x04\x05"  # base64 "AQIDBAU=": the unpadded form is what some dashboards show
    value = identity_sig(key, "m", NOW, BODY)
    for secret in ("whsec_AQIDBAU=", "whsec_AQIDBAU"):
        assert verify(identity_headers("neutral", value, "m"), BODY, secret, now=NOW) == ok("identity")
    assert svix.webhooks.Webhook("whsec_AQIDBAU").sign("m", datetime.fromtimestamp(NOW, tz=UTC), BODY.decode()) == value


def test_identity_whsec_decoding_is_as_lenient_as_the_libraries() -> None:
    """Characters after the base64 padding are skipped, by svix and by us alike: the same key."""
    value = svix.webhooks.Webhook(WHSEC).sign("m", datetime.fromtimestamp(NOW, tz=UTC), BODY.decode())
    assert verify(identity_headers("neutral", value, "m"), BODY, WHSEC + "junk", now=NOW) == ok("identity")


def test_identity_whsec_secret_that_decodes_to_nothing_falls_back_to_utf8() -> None:
    value = identity_sig(b"whsec_", "m", NOW, BODY)
    assert verify(identity_headers("neutral", value, "m"), BODY, "whsec_", now=NOW) == ok("identity")
    assert sign("identity", BODY, "whsec_", msg_id="m", timestamp=NOW)["relay-signature"] == value


@pytest.mark.parametrize("header", ["x-hub-signature-256", "x-codehost-signature-256"])
def test_github_published_vector(header: str) -> None:
    assert verify({header: GITHUB_SIGNATURE}, GITHUB_BODY, GITHUB_SECRET) == ok("code_host")
    assert verify({header: GITHUB_SIGNATURE}, GITHUB_BODY + b"!", GITHUB_SECRET) == bad(
        "code_host", "signature_mismatch"
    )
    assert sign("code_host", GITHUB_BODY, GITHUB_SECRET, header_family="vendor") == {
        "x-hub-signature-256": GITHUB_SIGNATURE
    }


@pytest.mark.parametrize("header", ["x-shopify-hmac-sha256", "x-shop-hmac-sha256"])
def test_commerce_independent_vector(header: str) -> None:
    expected = commerce_b64("shpss_app_client_secret", BODY)
    assert verify({header: expected}, BODY, "shpss_app_client_secret") == ok("commerce")
    family = "vendor" if header == "x-shopify-hmac-sha256" else "neutral"
    assert sign("commerce", BODY, "shpss_app_client_secret", header_family=family) == {header: expected}


def test_commerce_fixed_vector() -> None:
    # base64(HMAC-SHA256(b"hush", b"{}")), computed once with the stdlib and pinned.
    vector = base64.b64encode(hmac.new(b"hush", b"{}", hashlib.sha256).digest()).decode()
    assert vector == "UFwgrGBPZilFtmKh8TqcovA78LGYb1BdWu9I4Q2oyRg="
    assert verify({"x-shopify-hmac-sha256": vector}, b"{}", "hush") == ok("commerce")


def test_identity_any_v1_entry_may_match() -> None:
    good = identity_sig(bytes(range(32)), "msg_1", NOW, BODY)
    wrong = identity_sig(b"k" * 32, "msg_1", NOW, BODY)
    value = f"v1a,ZWQyNTUxOQ== {wrong} v2,abc {good}"
    assert verify(identity_headers("neutral", value), BODY, WHSEC, now=NOW) == ok("identity")
    value = f"{wrong}  {wrong}"
    assert verify(identity_headers("neutral", value), BODY, WHSEC, now=NOW) == bad("identity", "signature_mismatch")


def test_payments_any_v1_entry_may_match_and_v0_is_ignored() -> None:
    good = payments_hex("whsec_test", NOW, BODY)
    wrong = payments_hex("whsec_other", NOW, BODY)
    value = f"t={NOW},v1={wrong},v1={good},v0={wrong}"
    assert verify({"stripe-signature": value}, BODY, "whsec_test", now=NOW) == ok("payments")
    # v0 carrying the right MAC is still not a signature we accept
    value = f"t={NOW},v1={wrong},v0={good}"
    assert verify({"pay-signature": value}, BODY, "whsec_test", now=NOW) == bad("payments", "signature_mismatch")


def test_payments_v0_only_is_malformed() -> None:
    """Decision: no v1 entry means nothing we check is there, the same as identity without v1."""
    value = f"t={NOW},v0={payments_hex('whsec_test', NOW, BODY)}"
    assert verify({"pay-signature": value}, BODY, "whsec_test", now=NOW) == bad("payments", "malformed_header")


def test_payments_header_with_spaces_after_commas() -> None:
    value = f"t={NOW}, v1={payments_hex('whsec_test', NOW, BODY)}"
    assert verify({"pay-signature": value}, BODY, "whsec_test", now=NOW) == ok("payments")


def test_leading_zeros_in_timestamp_sign_the_integer() -> None:
    value = f"t=00{NOW},v1={payments_hex('whsec_test', NOW, BODY)}"
    assert verify({"pay-signature": value}, BODY, "whsec_test", now=NOW) == ok("payments")
