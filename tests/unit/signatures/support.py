"""What the signature modules share: verify/detect wrappers taking text headers, sample secrets and bodies,
and independent signers for the identity, payments and commerce schemes."""

from __future__ import annotations

import base64
import hashlib
import hmac

from shared import signatures
from shared.headers import raw_headers
from shared.signatures import HEADERS, Verdict

# The tests write headers as text, as an HTTP client sends them; the edge hands the scheme code the raw form
# (lowercased byte names, as ASGI delivers them), which raw_headers gives.


def verify(headers: dict[str, str], body: bytes, secret: str, **options: object) -> Verdict:
    return signatures.verify(raw_headers(headers), body, secret, **options)  # type: ignore[arg-type]


def detect_scheme(headers: dict[str, str], header_name: str | None = None) -> str | None:
    return signatures.detect_scheme(raw_headers(headers), header_name)


NOW = 1_700_000_000
BODY = b'{"id":"evt_1","type":"invoice.paid","data":{"object":{"amount":2000}}}'
WHSEC = "whsec_" + base64.b64encode(bytes(range(32))).decode()


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


GOOD_PAY_HEX = payments_hex("whsec_test", NOW, BODY)


ALL_HEADER_NAMES = sorted({name for fams in HEADERS.values() for names in fams.values() for name in names if name})
