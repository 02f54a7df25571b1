"""Scheme detection (shared/signatures/detect.py): by header, and through a custom header_name."""

from __future__ import annotations

import pytest

from shared import signatures
from shared.headers import raw_headers
from shared.signatures import SCHEMES, sign
from tests.unit.signatures.support import (
    BODY,
    FAMILIES,
    GITHUB_BODY,
    GITHUB_SECRET,
    GITHUB_SIGNATURE,
    IDENTITY_FAMILIES,
    NOW,
    WHSEC,
    bad,
    detect_scheme,
    identity_sig,
    ok,
    verify,
)


def detect_family(headers: dict[str, str]) -> str | None:
    return signatures.detect_family(raw_headers(headers))


@pytest.mark.parametrize("scheme", SCHEMES)
def test_custom_header_detects_each_shape(scheme: str) -> None:
    headers = sign(scheme, BODY, WHSEC, timestamp=NOW, header_name="X-My-Signature")
    assert "x-my-signature" in headers
    assert detect_scheme(headers, "X-My-Signature") == scheme
    assert verify(headers, BODY, WHSEC, header_name="X-My-Signature", now=NOW) == ok(scheme)
    assert verify(headers, BODY, WHSEC, header_name="x-my-signature", now=NOW) == ok(scheme)
    assert verify(headers, BODY + b" ", WHSEC, header_name="x-my-signature", now=NOW) == bad(
        scheme, "signature_mismatch"
    )


@pytest.mark.parametrize("family", IDENTITY_FAMILIES)
def test_custom_identity_header_takes_id_and_timestamp_from_any_family(family: str) -> None:
    headers = sign("identity", BODY, WHSEC, timestamp=NOW, header_name="x-sig", header_family=family)
    assert verify(headers, BODY, WHSEC, header_name="x-sig", now=NOW) == ok("identity")


def test_custom_identity_header_uses_the_first_complete_family() -> None:
    headers = sign("identity", BODY, WHSEC, timestamp=NOW, header_name="x-sig", header_family="vendor")
    headers["relay-id"] = "msg_incomplete_family"  # relay has no timestamp: skipped
    assert verify(headers, BODY, WHSEC, header_name="x-sig", now=NOW) == ok("identity")


def test_custom_identity_header_without_id_headers_is_missing() -> None:
    value = identity_sig(bytes(range(32)), "m", NOW, BODY)
    assert verify({"x-sig": value}, BODY, WHSEC, header_name="x-sig", now=NOW) == bad("identity", "missing_header")


def test_custom_header_is_the_only_one_read() -> None:
    headers = {"x-hub-signature-256": GITHUB_SIGNATURE}
    assert verify(headers, GITHUB_BODY, GITHUB_SECRET, header_name="x-sig") == bad(None, "missing_header")
    assert detect_scheme(headers, "x-sig") is None
    # the known header named as the custom one still works, by shape
    assert verify(headers, GITHUB_BODY, GITHUB_SECRET, header_name="X-Hub-Signature-256") == ok("code_host")


@pytest.mark.parametrize(
    ("value", "scheme"),
    [
        ("t=1,v1=ab", "payments"),
        ("v1=ab,t=1", "payments"),
        ("t=1", "payments"),
        ("v1,abc= v1,def=", "identity"),
        ("v1a,abc", "identity"),
        ("sha256=ab", "code_host"),
        ("abc/+=", "commerce"),
        ("sha1=ab", "commerce"),
    ],
)
def test_custom_header_shapes(value: str, scheme: str) -> None:
    assert detect_scheme({"x-sig": value}, "x-sig") == scheme
    assert not verify({"x-sig": value}, BODY, WHSEC, header_name="x-sig", now=NOW).valid


@pytest.mark.parametrize(("scheme", "family"), FAMILIES)
def test_detection_by_header(scheme: str, family: str) -> None:
    headers = sign(scheme, BODY, WHSEC, header_family=family)
    assert detect_scheme(headers) == scheme
    assert detect_family(headers) == family


def test_detection_without_signature() -> None:
    assert detect_scheme({"content-type": "application/json"}) is None
    assert detect_family({}) is None


def test_detection_order_is_fixed() -> None:
    both = {"stripe-signature": "t=1,v1=ab", "svix-signature": "v1,abc"}
    assert detect_scheme(both) == "identity"
    assert detect_scheme({"stripe-signature": "t=1,v1=ab", "relay-signature": ""}) == "payments"
