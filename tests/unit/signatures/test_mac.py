"""The MAC primitive (shared/signatures/mac.py), compiled and pure-Python, and verification over raw header
bytes as they arrived."""

from __future__ import annotations

import hmac
import time

import pytest
import svix.webhooks
from hypothesis import given
from hypothesis import strategies as st

from shared import attribution, signatures
from shared.headers import raw_headers
from shared.signatures import mac as signature_mac
from shared.signatures import sign
from tests.unit.signatures.support import BODY, GOOD_PAY_HEX, NOW, WHSEC, bad, ok, verify

MACS = [pytest.param(signature_mac.PyHmac, id="python")]
if signature_mac.Hmac is not signature_mac.PyHmac:
    MACS.append(pytest.param(signature_mac.Hmac, id="compiled"))


def test_the_compiled_parts_are_built_here(implementation: str) -> None:
    """The install builds shared/_native.c where a compiler and OpenSSL's headers exist, as on this machine
    and in CI; a build that silently fell back to Python would cost the edge a few points of its ratio to bare
    granian (docs/adr/0008-native-fast-path-for-signatures-and-attribution.md)."""
    import shared._native

    assert signature_mac.Hmac is shared._native.Mac
    assert isinstance(attribution.attribute, shared._native.Attributor)
    compiled = implementation == "compiled"
    assert isinstance(signatures.verifier("whsec_test"), shared._native.Verifier if compiled else signatures.Verifier)
    assert isinstance(signatures.verifier("whsec_test", header_name="x-sig"), signatures.Verifier)


@pytest.mark.parametrize("mac", MACS)
@given(key=st.binary(max_size=200), prefix=st.binary(max_size=40), body=st.binary(max_size=5000))
def test_mac_equals_the_stdlib_hmac(mac: type, key: bytes, prefix: bytes, body: bytes) -> None:
    """Keys shorter than, equal to and longer than a block; bodies past the size where the GIL is released."""
    assert mac(key)(prefix, body) == hmac.digest(key, prefix + body, "sha256")


@pytest.mark.parametrize("mac", MACS)
def test_mac_takes_any_bytes_like_and_is_reusable(mac: type) -> None:
    one = mac(bytearray(b"key"))
    assert one(memoryview(b"pre"), bytearray(b"body")) == hmac.digest(b"key", b"prebody", "sha256")
    assert one(b"", b"") == hmac.digest(b"key", b"", "sha256")
    assert one(b"pre", b"body") == one(b"pre", b"body")  # the keyed states are copied, never consumed


@pytest.mark.parametrize("mac", MACS)
def test_mac_refuses_text_and_wrong_arity(mac: type) -> None:
    with pytest.raises(TypeError):
        mac("text key")
    with pytest.raises(TypeError):
        mac(b"k")("text", b"body")
    if mac is not signature_mac.PyHmac:  # the compiled one checks arity itself
        with pytest.raises(TypeError):
            mac(b"k")(b"only one")
        with pytest.raises(TypeError):
            mac(b"k")(b"p", body=b"b")


def test_verifier_gives_verify_s_verdicts() -> None:
    """The edge keeps one Verifier per endpoint; verify() is the same check built per call."""
    headers = raw_headers({"stripe-signature": f"t={NOW},v1={GOOD_PAY_HEX}"})
    verifier = signatures.Verifier("whsec_test", tolerance_s=10)
    assert verifier(headers, BODY, NOW) == ok("payments")
    assert verifier(headers, BODY, NOW + 11) == bad("payments", "timestamp_out_of_tolerance")
    assert verifier(headers, BODY + b"!", NOW) == bad("payments", "signature_mismatch")
    custom = signatures.Verifier(WHSEC, header_name="X-Sig")
    assert custom(raw_headers({"x-sig": f"t={NOW},v1={GOOD_PAY_HEX}"}), BODY, NOW) == bad(
        "payments", "signature_mismatch"
    )


@pytest.mark.parametrize(
    ("signature", "reason"),
    [
        ("g" * 64, "malformed_header"),  # the usual shape, but not hex
        ("A" * 64, "signature_mismatch"),  # hex, uppercase: well formed, never ours
    ],
)
def test_usual_payments_shape_still_tells_malformed_from_mismatch(signature: str, reason: str) -> None:
    assert verify({"stripe-signature": f"t={NOW},v1={signature}"}, BODY, "whsec_test", now=NOW) == bad(
        "payments", reason
    )


def test_non_utf8_signature_bytes_are_a_failure_reason_not_an_error() -> None:
    headers = {b"stripe-signature": b"t=\xff\xfe,v1=" + b"\x80" * 64, b"x-shop-hmac-sha256": b"\xff" * 44}
    assert signatures.verify(headers, BODY, "whsec_test", now=NOW) == bad("commerce", "malformed_header")
    del headers[b"x-shop-hmac-sha256"]
    assert signatures.verify(headers, BODY, "whsec_test", now=NOW) == bad("payments", "malformed_timestamp")
    headers[b"stripe-signature"] = b"t=1,v1=" + b"\x80" * 64
    assert signatures.verify(headers, BODY, "whsec_test", now=NOW) == bad("payments", "malformed_header")


def test_identity_id_is_signed_as_the_bytes_that_arrived() -> None:
    """A non-ASCII message id: the sender signs its UTF-8 bytes (as svix does), and those bytes arrive."""
    now = int(time.time())
    headers = sign("identity", BODY, WHSEC, msg_id="msg_é", timestamp=now)
    svix.webhooks.Webhook(WHSEC).verify(BODY, {k.replace("relay", "svix"): v for k, v in headers.items()})
    assert verify(headers, BODY, WHSEC, now=now) == ok("identity")
    latin1 = {k.encode(): v.encode("latin-1") for k, v in headers.items()}  # the same text, other bytes
    assert signatures.verify(latin1, BODY, WHSEC, now=now) == bad("identity", "signature_mismatch")
