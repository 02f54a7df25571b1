"""shared.signatures: every scheme against the official libraries and published vectors, every failure reason,
and round-trip / tamper properties. Pure unit tests: no servers."""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
import standardwebhooks
import stripe
import svix.webhooks
from hypothesis import given, settings
from hypothesis import strategies as st

from shared import attribution, signatures
from shared.headers import raw_headers
from shared.signatures import FAILURE_REASONS, HEADERS, SCHEMES, Verdict, sign
from shared.signatures import mac as signature_mac

# The tests write headers as text, as an HTTP client sends them; the edge hands the scheme code the raw form
# (lowercased byte names, as ASGI delivers them), which raw_headers gives.


@pytest.fixture(scope="module", autouse=True, params=["compiled", "python"])
def implementation(request: pytest.FixtureRequest) -> Iterator[str]:
    """Every test here runs twice: through the compiled fast path in front of the Python checks (what the
    edge runs), and through the Python checks alone (what runs where shared._native is not built)."""
    if request.param == "compiled" and signature_mac.native is None:
        pytest.fail("shared._native is not built here (see test_the_compiled_parts_are_built_here)")
    with pytest.MonkeyPatch.context() as patch:
        if request.param == "python":
            patch.setattr(signature_mac, "native", None)
        yield request.param


def verify(headers: dict[str, str], body: bytes, secret: str, **options: object) -> Verdict:
    return signatures.verify(raw_headers(headers), body, secret, **options)  # type: ignore[arg-type]


def detect_scheme(headers: dict[str, str], header_name: str | None = None) -> str | None:
    return signatures.detect_scheme(raw_headers(headers), header_name)


def detect_family(headers: dict[str, str]) -> str | None:
    return signatures.detect_family(raw_headers(headers))


NOW = 1_700_000_000
BODY = b'{"id":"evt_1","type":"invoice.paid","data":{"object":{"amount":2000}}}'
WHSEC = "whsec_" + base64.b64encode(bytes(range(32))).decode()
OTHER_WHSEC = "whsec_" + base64.b64encode(b"y" * 32).decode()
PLAIN = "a-plain-secret-of-some-length"
GITHUB_SECRET = "It's a Secret to Everybody"
GITHUB_BODY = b"Hello, World!"
GITHUB_SIGNATURE = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"

IDENTITY_FAMILIES = ("neutral", "standard", "vendor")
FAMILIES = [(scheme, family) for scheme, families in HEADERS.items() for family in families]


def ok(scheme: str) -> Verdict:
    return Verdict(True, None, scheme)


def bad(scheme: str | None, reason: str) -> Verdict:
    return Verdict(False, reason, scheme)


def identity_headers(family: str, signature: str, msg_id: str = "msg_1", ts: str = str(NOW)) -> dict[str, str]:
    sig_name, id_name, ts_name = HEADERS["identity"][family]
    assert id_name is not None
    assert ts_name is not None
    return {sig_name: signature, id_name: msg_id, ts_name: ts}


def identity_sig(secret_key: bytes, msg_id: str, ts: int, body: bytes) -> str:
    mac = hmac.new(secret_key, f"{msg_id}.{ts}.".encode() + body, hashlib.sha256).digest()
    return "v1," + base64.b64encode(mac).decode()


def payments_hex(secret: str, ts: int, body: bytes) -> str:
    return hmac.new(secret.encode(), f"{ts}.".encode() + body, hashlib.sha256).hexdigest()


def commerce_b64(secret: str, body: bytes) -> str:
    """Shopify's documented algorithm, written out independently of the module under test."""
    return base64.b64encode(hmac.new(secret.encode("utf-8"), body, hashlib.sha256).digest()).decode()


# -- oracles: payments (stripe) ---------------------------------------------------------------------


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


# -- oracles: identity (svix, standardwebhooks) -----------------------------------------------------


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


# -- oracles: code host (GitHub vector), commerce (Shopify algorithm) --------------------------------


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


# -- multiple entries, v0, non-v1 versions ----------------------------------------------------------


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


# -- failure reasons --------------------------------------------------------------------------------

GOOD_ID_SIG = identity_sig(bytes(range(32)), "msg_1", NOW, BODY)
GOOD_PAY_HEX = payments_hex("whsec_test", NOW, BODY)
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


# -- custom header_name -----------------------------------------------------------------------------


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


# -- detection --------------------------------------------------------------------------------------


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


# -- sign -------------------------------------------------------------------------------------------


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


# -- hostile input ----------------------------------------------------------------------------------


def test_non_utf8_body_and_odd_headers() -> None:
    body = b"\xff\xfe\x00binary\x80"
    for scheme in SCHEMES:
        headers = sign(scheme, body, WHSEC, msg_id="ид\udcff", timestamp=NOW)
        assert verify(headers, body, WHSEC, now=NOW) == ok(scheme)
    assert verify({"x-hub-signature-256": "sha256=" + "é" * 64}, body, WHSEC) == bad("code_host", "malformed_header")
    assert verify({"x-shop-hmac-sha256": "ü" * 44}, body, WHSEC) == bad("commerce", "malformed_header")


ALL_HEADER_NAMES = sorted({name for fams in HEADERS.values() for names in fams.values() for name in names if name})


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


# -- properties -------------------------------------------------------------------------------------

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


# -- the MAC primitive: compiled and pure-Python --------------------------------------------------------

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


# -- raw headers: bytes as they arrived ------------------------------------------------------------------


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


# -- repeated headers -------------------------------------------------------------------------------


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
