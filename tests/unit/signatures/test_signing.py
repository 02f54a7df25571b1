"""Signing (shared/signatures/signing.py), hostile input that must never raise, and round-trip / tamper
properties (hypothesis)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shared.signatures import FAILURE_REASONS, HEADERS, SCHEMES, sign
from tests.unit.signatures.support import (
    ALL_HEADER_NAMES,
    BODY,
    FAMILIES,
    NOW,
    WHSEC,
    bad,
    commerce_b64,
    detect_scheme,
    identity_sig,
    ok,
    verify,
)


def test_sign_rejects_what_it_cannot_do() -> None:
    with pytest.raises(ValueError, match="unknown signature scheme"):
        sign("hmac-sha1", BODY, WHSEC)
    with pytest.raises(ValueError, match="no 'standard' headers"):
        sign("payments", BODY, WHSEC, header_family="standard")
    with pytest.raises(ValueError, match="timestamp"):
        sign("identity", BODY, WHSEC, timestamp=-1)


def test_sign_gives_fresh_ids_and_timestamps() -> None:
    first = sign("identity", BODY, WHSEC)
    second = sign("identity", BODY, WHSEC)
    assert first["relay-id"] != second["relay-id"]
    assert first["relay-id"].startswith("msg_")
    assert abs(int(first["relay-timestamp"]) - time.time()) < 5
    assert sign("identity", BODY, WHSEC, msg_id="a", timestamp=5) == sign(
        "identity", BODY, WHSEC, msg_id="a", timestamp=5
    )


def test_sign_only_identity_has_id_and_timestamp_headers() -> None:
    assert len(sign("identity", BODY, WHSEC)) == 3
    for scheme in ("commerce", "payments", "code_host"):
        assert len(sign(scheme, BODY, WHSEC, msg_id="x", timestamp=NOW)) == 1


def test_non_utf8_body_and_odd_headers() -> None:
    body = b"\xff\xfe\x00binary\x80"
    for scheme in SCHEMES:
        headers = sign(scheme, body, WHSEC, msg_id="ид\udcff", timestamp=NOW)
        assert verify(headers, body, WHSEC, now=NOW) == ok(scheme)
    assert verify({"x-hub-signature-256": "sha256=" + "é" * 64}, body, WHSEC) == bad("code_host", "malformed_header")
    assert verify({"x-shop-hmac-sha256": "ü" * 44}, body, WHSEC) == bad("commerce", "malformed_header")


@settings(max_examples=300)
@given(
    headers=st.dictionaries(
        st.sampled_from([*ALL_HEADER_NAMES, "x-sig"]),
        st.one_of(
            st.text(max_size=80),
            st.builds(lambda t, s: f"t={t},v1={s}", st.text(max_size=12), st.text(max_size=70)),
            st.builds(lambda s: f"v1,{s}", st.text(max_size=50)),
            st.builds(lambda s: f"sha256={s}", st.text(max_size=70)),
        ),
        max_size=6,
    ),
    body=st.binary(max_size=64),
    secret=st.text(max_size=40),
    header_name=st.sampled_from([None, "x-sig", "X-Sig"]),
)
def test_verify_never_raises(headers: dict[str, str], body: bytes, secret: str, header_name: str | None) -> None:
    verdict = verify(headers, body, secret, header_name=header_name, now=NOW)
    assert verdict.valid is (verdict.reason is None)
    assert verdict.reason is None or verdict.reason in FAILURE_REASONS
    assert verdict.scheme is None or verdict.scheme in SCHEMES
    assert detect_scheme(headers, header_name) == verdict.scheme


secrets_ = st.one_of(
    st.text(max_size=48),
    st.binary(min_size=1, max_size=48).map(lambda key: "whsec_" + base64.b64encode(key).decode()),
)
timestamps = st.integers(min_value=0, max_value=2**40)
msg_ids = st.text(min_size=1, max_size=40)


@given(
    scheme_family=st.sampled_from(FAMILIES),
    body=st.binary(max_size=512),
    secret=secrets_,
    ts=timestamps,
    msg_id=msg_ids,
    custom=st.booleans(),
)
def test_sign_then_verify_is_valid(
    scheme_family: tuple[str, str], body: bytes, secret: str, ts: int, msg_id: str, custom: bool
) -> None:
    scheme, family = scheme_family
    header_name = "x-custom-signature" if custom else None
    headers = sign(scheme, body, secret, msg_id=msg_id, timestamp=ts, header_name=header_name, header_family=family)
    assert verify(headers, body, secret, header_name=header_name, now=ts) == ok(scheme)


@given(
    scheme_family=st.sampled_from(FAMILIES),
    body=st.binary(min_size=1, max_size=512),
    secret=secrets_,
    ts=timestamps,
    data=st.data(),
)
def test_any_changed_body_byte_is_a_mismatch(
    scheme_family: tuple[str, str], body: bytes, secret: str, ts: int, data: st.DataObject
) -> None:
    scheme, family = scheme_family
    headers = sign(scheme, body, secret, timestamp=ts, header_family=family)
    index = data.draw(st.integers(0, len(body) - 1))
    flip = data.draw(st.integers(1, 255))
    tampered = bytearray(body)
    tampered[index] ^= flip
    assert verify(headers, bytes(tampered), secret, now=ts) == bad(scheme, "signature_mismatch")


@given(
    scheme_family=st.sampled_from(FAMILIES),
    body=st.binary(max_size=128),
    secret=secrets_,
    ts=timestamps,
    data=st.data(),
)
def test_any_changed_signature_character_fails(
    scheme_family: tuple[str, str], body: bytes, secret: str, ts: int, data: st.DataObject
) -> None:
    scheme, family = scheme_family
    headers = sign(scheme, body, secret, timestamp=ts, header_family=family)
    name = HEADERS[scheme][family][0]
    value = headers[name]
    index = data.draw(st.integers(0, len(value) - 1))
    replacement = data.draw(st.characters(codec="latin-1").filter(lambda c: c != value[index]))
    headers[name] = value[:index] + replacement + value[index + 1 :]
    verdict = verify(headers, body, secret, now=ts)
    assert not verdict.valid
    assert verdict.reason in FAILURE_REASONS


@given(body=st.binary(max_size=300), secret=st.text(max_size=120), ts=timestamps)
def test_macs_equal_the_stdlib_hmac(body: bytes, secret: str, ts: int) -> None:
    """The precomputed-pad HMAC against ``hmac``, for keys shorter than, equal to and longer than a block."""
    key = secret.encode("utf-8", "surrogatepass")
    assert sign("code_host", body, secret)["x-codehost-signature-256"] == (
        "sha256=" + hmac.new(key, body, hashlib.sha256).hexdigest()
    )
    assert sign("payments", body, secret, timestamp=ts)["pay-signature"] == (
        f"t={ts},v1=" + hmac.new(key, f"{ts}.".encode() + body, hashlib.sha256).hexdigest()
    )
    if key:  # (an empty whsec_ key falls back to the secret's bytes: tested below)
        whsec = "whsec_" + base64.b64encode(key).decode()
        headers = sign("identity", body, whsec, msg_id="m", timestamp=ts)
        assert headers["relay-signature"] == identity_sig(key, "m", ts, body)


@pytest.mark.parametrize("size", [0, 1, 63, 64, 65, 128, 1000])
def test_macs_at_block_size_edges(size: int) -> None:
    secret = "k" * size
    assert sign("commerce", BODY, secret)["x-shop-hmac-sha256"] == commerce_b64(secret, BODY)
    key = (bytes(range(256)) * 4)[:size]
    whsec = "whsec_" + base64.b64encode(key).decode()
    expected = identity_sig(key, "m", NOW, BODY) if key else identity_sig(whsec.encode(), "m", NOW, BODY)
    assert sign("identity", BODY, whsec, msg_id="m", timestamp=NOW)["relay-signature"] == expected


@given(body=st.binary(max_size=128), secret=secrets_, ts=timestamps, msg_id=msg_ids, other=msg_ids)
def test_identity_id_is_signed(body: bytes, secret: str, ts: int, msg_id: str, other: str) -> None:
    headers = sign("identity", body, secret, msg_id=msg_id, timestamp=ts)
    headers["relay-id"] = other
    expected = ok("identity") if other == msg_id else bad("identity", "signature_mismatch")
    assert verify(headers, body, secret, now=ts) == expected
