"""Verification failure reasons (shared/signatures/check.py): every reason reached, and the timestamp
tolerance in both directions."""

from __future__ import annotations

import base64

import pytest

from shared.signatures import FAILURE_REASONS, sign
from tests.unit.signatures.support import (
    BODY,
    GITHUB_SIGNATURE,
    GOOD_PAY_HEX,
    NOW,
    PLAIN,
    WHSEC,
    bad,
    identity_headers,
    identity_sig,
    ok,
    payments_hex,
    verify,
)

OTHER_WHSEC = "whsec_" + base64.b64encode(b"y" * 32).decode()


GOOD_ID_SIG = identity_sig(bytes(range(32)), "msg_1", NOW, BODY)


WRONG_HEX = "0" * 64
WRONG_B64 = base64.b64encode(b"\0" * 32).decode()


REASON_CASES = [
    # no signature header at all
    ({}, None, "missing_header"),
    ({"content-type": "application/json", "relay-id": "msg_1"}, None, "missing_header"),
    ({"stripe-signature": ""}, None, "missing_header"),
    ({"x-hub-signature-256": "   "}, None, "missing_header"),
    # identity without id or timestamp
    ({"relay-signature": GOOD_ID_SIG, "relay-timestamp": str(NOW)}, "identity", "missing_header"),
    ({"relay-signature": GOOD_ID_SIG, "relay-id": "msg_1"}, "identity", "missing_header"),
    ({"relay-signature": GOOD_ID_SIG, "relay-id": "", "relay-timestamp": str(NOW)}, "identity", "missing_header"),
    # id/timestamp of another family do not count
    ({"svix-signature": GOOD_ID_SIG, "relay-id": "msg_1", "relay-timestamp": str(NOW)}, "identity", "missing_header"),
    # malformed headers
    (identity_headers("neutral", "sig-without-version"), "identity", "malformed_header"),
    (identity_headers("neutral", "v1a,ZWQ= v2,abc"), "identity", "malformed_header"),
    (identity_headers("neutral", "v1,not*base64"), "identity", "malformed_header"),
    (identity_headers("neutral", "v1,"), "identity", "malformed_header"),
    (identity_headers("neutral", "v1,YWJj"), "identity", "malformed_header"),  # base64, but not 32 bytes
    (identity_headers("neutral", "v1,ÿÿÿÿ"), "identity", "malformed_header"),
    ({"pay-signature": f"v1={GOOD_PAY_HEX}"}, "payments", "malformed_header"),
    ({"pay-signature": f"t={NOW}"}, "payments", "malformed_header"),
    ({"pay-signature": f"t={NOW},v1=xyz"}, "payments", "malformed_header"),
    ({"pay-signature": f"t={NOW},v1={GOOD_PAY_HEX[:-2]}"}, "payments", "malformed_header"),
    ({"pay-signature": "garbage"}, "payments", "malformed_header"),
    ({"x-hub-signature-256": GITHUB_SIGNATURE[7:]}, "code_host", "malformed_header"),
    ({"x-hub-signature-256": "sha1=" + "0" * 40}, "code_host", "malformed_header"),
    ({"x-hub-signature-256": "sha256=" + "g" * 64}, "code_host", "malformed_header"),
    ({"x-shop-hmac-sha256": "not base64!"}, "commerce", "malformed_header"),
    ({"x-shop-hmac-sha256": "YWJj"}, "commerce", "malformed_header"),
    # malformed timestamps
    (identity_headers("neutral", GOOD_ID_SIG, ts="soon"), "identity", "malformed_timestamp"),
    (identity_headers("neutral", GOOD_ID_SIG, ts="1700000000.5"), "identity", "malformed_timestamp"),
    (identity_headers("neutral", GOOD_ID_SIG, ts="-1700000000"), "identity", "malformed_timestamp"),
    (identity_headers("neutral", GOOD_ID_SIG, ts="１７００"), "identity", "malformed_timestamp"),
    ({"pay-signature": f"t=,v1={GOOD_PAY_HEX}"}, "payments", "malformed_timestamp"),
    ({"pay-signature": f"t=1e9,v1={GOOD_PAY_HEX}"}, "payments", "malformed_timestamp"),
    ({"pay-signature": f"t=+{NOW},v1={GOOD_PAY_HEX}"}, "payments", "malformed_timestamp"),
    # out of tolerance (the MAC is right)
    (
        identity_headers("neutral", identity_sig(bytes(range(32)), "m", NOW - 301, BODY), "m", str(NOW - 301)),
        "identity",
        "timestamp_out_of_tolerance",
    ),
    (
        identity_headers("vendor", identity_sig(bytes(range(32)), "m", NOW + 301, BODY), "m", str(NOW + 301)),
        "identity",
        "timestamp_out_of_tolerance",
    ),
    (
        {"pay-signature": f"t={NOW - 3600},v1={payments_hex('whsec_test', NOW - 3600, BODY)}"},
        "payments",
        "timestamp_out_of_tolerance",
    ),
    (
        {"pay-signature": f"t={NOW + 3600},v1={payments_hex('whsec_test', NOW + 3600, BODY)}"},
        "payments",
        "timestamp_out_of_tolerance",
    ),
    ({"pay-signature": f"t={'9' * 5000},v1={payments_hex('whsec_test', 0, BODY)}"}, "payments", "signature_mismatch"),
    # mismatches
    (identity_headers("standard", "v1," + WRONG_B64), "identity", "signature_mismatch"),
    (identity_headers("neutral", GOOD_ID_SIG, msg_id="msg_2"), "identity", "signature_mismatch"),
    (identity_headers("neutral", GOOD_ID_SIG, ts=str(NOW + 1)), "identity", "signature_mismatch"),
    ({"stripe-signature": f"t={NOW},v1={WRONG_HEX}"}, "payments", "signature_mismatch"),
    ({"stripe-signature": f"t={NOW + 1},v1={GOOD_PAY_HEX}"}, "payments", "signature_mismatch"),
    ({"stripe-signature": f"t={NOW},v1={GOOD_PAY_HEX.upper()}"}, "payments", "signature_mismatch"),
    ({"x-codehost-signature-256": "sha256=" + WRONG_HEX}, "code_host", "signature_mismatch"),
    ({"x-shop-hmac-sha256": WRONG_B64}, "commerce", "signature_mismatch"),
]


@pytest.mark.parametrize(("headers", "scheme", "reason"), REASON_CASES)
def test_failure_reasons(headers: dict[str, str], scheme: str | None, reason: str) -> None:
    secret = "whsec_test" if scheme == "payments" else WHSEC
    assert verify(headers, BODY, secret, now=NOW) == bad(scheme, reason)


def test_every_reason_is_reached() -> None:
    assert {reason for _, _, reason in REASON_CASES} == FAILURE_REASONS


def test_the_right_headers_verify() -> None:
    assert verify(identity_headers("neutral", GOOD_ID_SIG), BODY, WHSEC, now=NOW) == ok("identity")
    assert verify({"pay-signature": f"t={NOW},v1={GOOD_PAY_HEX}"}, BODY, "whsec_test", now=NOW) == ok("payments")


@pytest.mark.parametrize("scheme", ["identity", "payments"])
def test_wrong_secret_with_stale_timestamp_reports_mismatch(scheme: str) -> None:
    """Decision: the MAC is checked first, so out-of-tolerance only ever means a genuine old delivery."""
    headers = sign(scheme, BODY, WHSEC, timestamp=NOW - 10_000)
    assert verify(headers, BODY, OTHER_WHSEC, now=NOW) == bad(scheme, "signature_mismatch")
    assert verify(headers, BODY, WHSEC, now=NOW) == bad(scheme, "timestamp_out_of_tolerance")


@pytest.mark.parametrize("scheme", ["identity", "payments"])
@pytest.mark.parametrize("tolerance", [1, 300, 3600])
def test_tolerance_boundary_both_directions(scheme: str, tolerance: int) -> None:
    headers = sign(scheme, BODY, WHSEC, timestamp=NOW)
    for now in (NOW - tolerance, NOW + tolerance, NOW + tolerance + 0.0):
        assert verify(headers, BODY, WHSEC, tolerance_s=tolerance, now=now) == ok(scheme)
    for now in (NOW - tolerance - 1, NOW + tolerance + 1, NOW + tolerance + 0.001):
        assert verify(headers, BODY, WHSEC, tolerance_s=tolerance, now=now) == bad(scheme, "timestamp_out_of_tolerance")


def test_default_now_is_the_clock() -> None:
    assert verify(sign("payments", BODY, WHSEC), BODY, WHSEC) == ok("payments")
    assert verify(sign("payments", BODY, WHSEC, timestamp=NOW), BODY, WHSEC) == bad(
        "payments", "timestamp_out_of_tolerance"
    )


@pytest.mark.parametrize("scheme", ["commerce", "code_host"])
def test_untimed_schemes_ignore_tolerance(scheme: str) -> None:
    headers = sign(scheme, BODY, PLAIN, timestamp=0)
    assert verify(headers, BODY, PLAIN, tolerance_s=1, now=NOW * 2) == ok(scheme)
