"""Repeated headers: a second copy of a signature header, or of an identity id/timestamp pair, is malformed."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
import standardwebhooks
import stripe
import svix.webhooks
from hypothesis import given
from hypothesis import strategies as st

from shared import signatures
from shared.signatures import Verdict
from tests.unit.signatures.support import (
    ALL_HEADER_NAMES,
    BODY,
    IDENTITY_FAMILIES,
    NOW,
    PLAIN,
    WHSEC,
    bad,
    commerce_b64,
    identity_headers,
    ok,
)


def check_list(headers: list[tuple[str, str]], secret: str, header_name: str | None = None) -> Verdict:
    """What the edge decides for a request's header list: a repeated header the check reads is
    malformed_header; anything else is the check of the dict (where the last copy wins)."""
    listed = [(name.lower().encode(), value.encode()) for name, value in headers]
    raw = dict(listed)
    return signatures.repeated_header(listed, raw, header_name) or signatures.verify(
        raw, BODY, secret, header_name=header_name, now=NOW
    )


@pytest.mark.parametrize("header", ["Stripe-Signature", "Pay-Signature"])
def test_a_second_copy_of_a_stripe_signature_is_malformed(header: str) -> None:
    value = stripe.WebhookSignature.generate_signature_header(BODY.decode(), "whsec_test", timestamp=NOW)
    other = stripe.WebhookSignature.generate_signature_header(BODY.decode(), "whsec_test", timestamp=NOW - 1)
    assert check_list([(header, value), ("content-type", "application/json")], "whsec_test") == ok("payments")
    for second in (value, other, ""):
        headers = [(header, value), ("content-type", "application/json"), (header, second)]
        assert check_list(headers, "whsec_test") == bad("payments", "malformed_header")
        assert check_list(headers[::-1], "whsec_test") == bad("payments", "malformed_header")


@pytest.mark.parametrize("family", IDENTITY_FAMILIES)
@pytest.mark.parametrize("library", ["svix", "standardwebhooks"])
@pytest.mark.parametrize("repeated", ["signature", "id", "timestamp"])
def test_a_second_copy_of_an_identity_header_is_malformed(family: str, library: str, repeated: str) -> None:
    when = datetime.fromtimestamp(NOW, tz=UTC)
    webhook = svix.webhooks.Webhook(WHSEC) if library == "svix" else standardwebhooks.Webhook(WHSEC)
    value = webhook.sign("msg_abc", when, BODY.decode())
    headers = list(identity_headers(family, value, "msg_abc").items())
    assert check_list(headers, WHSEC) == ok("identity")
    index = ("signature", "id", "timestamp").index(repeated)
    assert check_list([*headers, headers[index]], WHSEC) == bad("identity", "malformed_header")


def test_repeats_the_check_does_not_read_change_nothing() -> None:
    value = stripe.WebhookSignature.generate_signature_header(BODY.decode(), "whsec_test", timestamp=NOW)
    headers = [("stripe-signature", value), ("x-forwarded-for", "1.2.3.4"), ("x-forwarded-for", "5.6.7.8")]
    assert check_list(headers, "whsec_test") == ok("payments")
    # the id and timestamp headers of identity are read only when identity is the detected scheme
    assert check_list([*headers, ("svix-id", "a"), ("svix-id", "b")], "whsec_test") == ok("payments")
    # with a custom header, only that header (and an identity value's id/timestamp pair) is read
    custom = [("x-sig", commerce_b64(PLAIN, BODY)), ("stripe-signature", "x"), ("stripe-signature", "y")]
    assert check_list(custom, PLAIN, header_name="X-Sig") == ok("commerce")
    assert check_list([*custom, ("relay-id", "a"), ("relay-id", "b")], PLAIN, "x-sig") == ok("commerce")


def test_a_second_copy_of_a_custom_header_or_its_identity_pair_is_malformed() -> None:
    value = commerce_b64(PLAIN, BODY)
    assert check_list([("X-Sig", value), ("x-sig", value)], PLAIN, "x-sig") == bad("commerce", "malformed_header")
    when = datetime.fromtimestamp(NOW, tz=UTC)
    signature = standardwebhooks.Webhook(WHSEC).sign("msg_abc", when, BODY.decode())
    headers = [("x-sig", signature), ("webhook-id", "msg_abc"), ("webhook-timestamp", str(NOW))]
    assert check_list(headers, WHSEC, "x-sig") == ok("identity")
    assert check_list([*headers, ("webhook-id", "msg_abc")], WHSEC, "x-sig") == bad("identity", "malformed_header")
    # the pair a custom header uses is the first complete one: a repeat in an incomplete family is not read
    assert check_list([*headers, ("relay-id", "a"), ("relay-id", "b")], WHSEC, "x-sig") == ok("identity")


@given(
    headers=st.lists(
        st.tuples(st.sampled_from([*ALL_HEADER_NAMES, "x-sig", "x-other"]), st.text(max_size=20)), max_size=8
    ),
    header_name=st.sampled_from([None, "x-sig"]),
)
def test_only_a_repeated_name_can_make_a_request_malformed(
    headers: list[tuple[str, str]], header_name: str | None
) -> None:
    listed = [(name.encode(), value.encode()) for name, value in headers]
    raw = dict(listed)
    verdict = signatures.repeated_header(listed, raw, header_name)
    if len(raw) == len(listed):
        assert verdict is None
    else:
        assert verdict is None or (not verdict.valid and verdict.reason == "malformed_header")
