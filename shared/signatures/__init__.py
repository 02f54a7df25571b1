"""Webhook signatures: verify every inbound scheme, and sign with the same code when replay re-signs.

Pure (no I/O) and lean: the edge calls a :func:`verifier` per request. No algorithm is ever configured; the
scheme is detected from which signature header is present, or, for a custom ``header_name``, from the
shape of its value. Headers are :data:`~shared.headers.RawHeaders` (lowercased byte names, raw byte values,
as ASGI delivers them): nothing is decoded to text to check a signature. An empty or blank header counts
as absent. With several signature headers present the first in this table wins (identity, commerce,
payments, code_host; neutral name before the real one), the order attribution uses too.

=============  ===============================================  ==========================================
scheme         signature header (neutral / real provider)       rule
=============  ===============================================  ==========================================
``identity``   ``relay-signature`` / ``webhook-signature`` /    ``v1,<base64>`` entries, space separated,
               ``svix-signature``, with the ``*-id`` and        any may match; HMAC-SHA256 over
               ``*-timestamp`` headers of the same family       ``{id}.{timestamp}.{body}``
``commerce``   ``x-shop-hmac-sha256`` / ``x-shopify-hmac-...``  base64 HMAC-SHA256 of the raw body
``payments``   ``pay-signature`` / ``stripe-signature``         ``t=<unix>,v1=<hex>[,v1=..][,v0=..]``;
                                                                HMAC-SHA256 over ``{t}.{body}``
``code_host``  ``x-codehost-signature-256`` / ``x-hub-...``     ``sha256=<hex>`` HMAC-SHA256 of the body
=============  ===============================================  ==========================================

Keys. ``identity``: the base64-decoded part after ``whsec_`` (decoded as leniently as the Svix / Standard
Webhooks libraries do, so unpadded secrets work); a secret without the ``whsec_`` prefix, or whose
``whsec_`` part decodes to nothing, is used as its UTF-8 bytes. Every other scheme: the whole secret
string as UTF-8 (for ``payments`` that includes the ``whsec_`` prefix, as the real provider does).

Verification order and failure reasons (exactly SPEC.md's):

1. no (non-empty) signature header, or for ``identity`` no id or timestamp header: ``missing_header``;
2. the signature header does not parse (no ``v1`` entry, no ``t=``, bad base64 or hex, wrong length):
   ``malformed_header``. A ``payments`` header with only ``v0`` entries has no signature we check, so it is
   malformed too, just as an ``identity`` header without any ``v1`` entry;
3. the timestamp is not an unsigned ASCII integer: ``malformed_timestamp``;
4. no entry matches the MAC: ``signature_mismatch``;
5. ``|now - timestamp| > tolerance_s`` (both directions, exactly at the tolerance passes):
   ``timestamp_out_of_tolerance``.

The MAC is checked before the tolerance: a wrong secret then always reads ``signature_mismatch``, and
``timestamp_out_of_tolerance`` only ever describes a genuine but delayed or replayed delivery (SPEC.md's
meaning), never a forged one with an old timestamp. The signed timestamp is the integer's decimal form, as
the reference libraries use it (``t=0017`` signs ``17``).

A header the check reads that arrives more than once is ``malformed_header`` (:func:`repeated_header`):
a ``dict`` of the headers keeps only the last copy, while the stored event keeps both (joined with ", "),
so a verdict from one copy would describe a request other than the one stored. Without a custom header
the check reads every known signature header (detection looks at all of them) and, for ``identity``, the
id and timestamp headers of the detected family; with one, that header and, for an ``identity``-shaped
value, the id and timestamp pair it uses.

A custom header's value shape: ``sha256=...`` is code_host; a first comma-separated item starting with
``t=``, ``v1=`` or ``v0=`` is payments; any other value with a comma is identity (``v1,<b64>`` entries, id
and timestamp from the first complete ``relay-*`` / ``webhook-*`` / ``svix-*`` pair); no comma is commerce
(bare base64). Only that header is read.

Comparisons are constant time (:func:`hmac.compare_digest`) against the canonical encoding the providers
send (standard padded base64, lowercase hex: uppercase hex is a mismatch, as for the providers' own
libraries); nothing here raises on hostile headers or bodies, and bodies, ids and timestamps are signed as
the bytes that arrived (they need not be UTF-8). Per secret, the keyed HMAC states are computed once (LRU
cache) so each MAC is just hashing. Where ``shared/_native.c`` is built, the usual validly signed request is
proven in C before any of this runs (:func:`verifier`); everything here stays the definition.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import math
import re
import time
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache
from typing import Final, Literal, NamedTuple

from shared.headers import RawHeaders, raw_headers
from shared.ids import ulid

__all__ = (
    "FAILURE_REASONS",
    "HEADERS",
    "MALFORMED_HEADER",
    "MALFORMED_TIMESTAMP",
    "MISSING_HEADER",
    "SCHEMES",
    "SIGNATURE_MISMATCH",
    "TIMESTAMP_OUT_OF_TOLERANCE",
    "Check",
    "HeaderFamily",
    "Verdict",
    "Verifier",
    "detect_family",
    "detect_scheme",
    "repeated_header",
    "resign",
    "sign",
    "verifier",
    "verify",
)

MISSING_HEADER: Final = "missing_header"
MALFORMED_HEADER: Final = "malformed_header"
MALFORMED_TIMESTAMP: Final = "malformed_timestamp"
TIMESTAMP_OUT_OF_TOLERANCE: Final = "timestamp_out_of_tolerance"
SIGNATURE_MISMATCH: Final = "signature_mismatch"
FAILURE_REASONS: Final = frozenset(
    {MISSING_HEADER, MALFORMED_HEADER, MALFORMED_TIMESTAMP, TIMESTAMP_OUT_OF_TOLERANCE, SIGNATURE_MISMATCH}
)

SCHEMES: Final = ("identity", "commerce", "payments", "code_host")
"""Also the provider values of attribution, in the order both modules check them."""

HeaderFamily = Literal["neutral", "standard", "vendor"]
"""Which header names to use: SPEC.md's neutral ones (``relay-*``, ``pay-signature``...), the Standard
Webhooks ``webhook-*`` ones (``identity`` only), or the real provider's (``svix-*``, ``stripe-signature``...)."""

_IDENTITY_HEADERS: Final[Mapping[str, tuple[str, str, str]]] = {
    "neutral": ("relay-signature", "relay-id", "relay-timestamp"),
    "standard": ("webhook-signature", "webhook-id", "webhook-timestamp"),
    "vendor": ("svix-signature", "svix-id", "svix-timestamp"),
}
HEADERS: Final[Mapping[str, Mapping[str, tuple[str, str | None, str | None]]]] = {
    "identity": _IDENTITY_HEADERS,
    "commerce": {"neutral": ("x-shop-hmac-sha256", None, None), "vendor": ("x-shopify-hmac-sha256", None, None)},
    "payments": {"neutral": ("pay-signature", None, None), "vendor": ("stripe-signature", None, None)},
    "code_host": {
        "neutral": ("x-codehost-signature-256", None, None),
        "vendor": ("x-hub-signature-256", None, None),
    },
}
"""scheme → family → (signature header, id header, timestamp header); id/timestamp only for ``identity``."""


class Verdict(NamedTuple):
    valid: bool
    reason: str | None
    """One of :data:`FAILURE_REASONS`; ``None`` when valid."""
    scheme: str | None
    """The detected scheme; ``None`` when there is no signature header at all."""


# Every known signature header (as bytes, the form headers arrive in) → (scheme, family, detection rank).
_SIGNATURE_HEADERS: Final = {
    names[0].encode(): (scheme, family, rank)
    for rank, (scheme, family, names) in enumerate(
        (scheme, family, names) for scheme, families in HEADERS.items() for family, names in families.items()
    )
}
_SIGNATURE_NAMES: Final = frozenset(_SIGNATURE_HEADERS)
# Per identity family, its (id header, timestamp header); a custom header tries them in this order.
_IDENTITY_IDS: Final = {
    family: (id_name.encode(), ts_name.encode()) for family, (_, id_name, ts_name) in _IDENTITY_HEADERS.items()
}
_IDENTITY_PAIRS: Final = tuple(_IDENTITY_IDS.values())

_MISSING: Final = Verdict(False, MISSING_HEADER, None)
_VERDICTS: Final = {
    (scheme, reason): Verdict(reason is None, reason, scheme)
    for scheme in SCHEMES
    for reason in (None, *sorted(FAILURE_REASONS))
}
_VALID: Final = {scheme: _VERDICTS[scheme, None] for scheme in SCHEMES}
_SHA256_PREFIX: Final = b"sha256="
_HEX: Final = frozenset(b"0123456789abcdefABCDEF")
_MAC_SIZE: Final = 32
_HEX_SIZE: Final = 2 * _MAC_SIZE
_MAX_TIMESTAMP_DIGITS: Final = 30  # more digits than any clock: out of tolerance, and int() stays cheap
_compare = hmac.compare_digest
_hexlify = binascii.hexlify


def _verdict(scheme: str, reason: str) -> Verdict:
    return _VERDICTS[scheme, reason]


# -- keys and MACs ----------------------------------------------------------------------------------


def _utf8(text: str) -> bytes:
    # surrogatepass: never raises, and is plain UTF-8 for every well-formed string.
    return text.encode("utf-8", "surrogatepass")


_IPAD: Final = bytes(x ^ 0x36 for x in range(256))
_OPAD: Final = bytes(x ^ 0x5C for x in range(256))
_BLOCK: Final = 64


class _PyHmac:
    """HMAC-SHA256 (RFC 2104) with the keyed inner and outer states computed once per secret.

    Each MAC then costs two state copies and the hashing itself, not a fresh OpenSSL HMAC setup, and the
    body is fed in place (``prefix`` and ``body`` are never concatenated). The fallback for
    ``shared._native.Mac`` (the same interface in C), used where that extension was not built.
    """

    __slots__ = ("_inner", "_outer")

    def __init__(self, key: bytes) -> None:
        if len(key) > _BLOCK:
            key = hashlib.sha256(key).digest()
        key = key.ljust(_BLOCK, b"\0")
        self._inner = hashlib.sha256(key.translate(_IPAD))
        self._outer = hashlib.sha256(key.translate(_OPAD))

    def __call__(self, prefix: bytes, body: bytes) -> bytes:
        inner = self._inner.copy()
        if prefix:
            inner.update(prefix)
        inner.update(body)
        outer = self._outer.copy()
        outer.update(inner.digest())
        return outer.digest()


try:
    # The compiled parts of this module (shared/_native.c): the MAC primitive, and a fast path that proves the
    # usual validly signed request and hands everything else to :class:`Verifier`. Built when a compiler and
    # OpenSSL's headers are there; without them everything here runs in Python (the tests run both).
    from shared import _native
except ImportError:
    _native = None  # type: ignore[assignment]
_Hmac = _PyHmac if _native is None else _native.Mac


@lru_cache(maxsize=4096)
def _plain_mac(secret: str) -> _Hmac:
    """Every scheme but ``identity``: the key is the whole secret as UTF-8."""
    return _Hmac(_utf8(secret))


@lru_cache(maxsize=4096)
def _identity_mac(secret: str) -> _Hmac:
    if secret.startswith("whsec_"):
        try:
            # The same lenient decoding as the svix / standardwebhooks libraries (extra padding is skipped).
            key = base64.b64decode(secret[6:] + "==")
        except (binascii.Error, ValueError):
            key = b""
        if key:
            return _Hmac(key)
    return _Hmac(_utf8(secret))


def _b64(mac: bytes) -> bytes:
    return binascii.b2a_base64(mac, newline=False)


def _is_b64_mac(text: bytes) -> bool:
    try:
        return len(binascii.a2b_base64(text, strict_mode=True)) == _MAC_SIZE
    except (binascii.Error, ValueError):
        return False


def _is_hex_mac(text: bytes) -> bool:
    return len(text) == _HEX_SIZE and _HEX.issuperset(text)


def _timestamp(text: bytes) -> tuple[bytes, float] | None:
    """(the decimal form that is signed, the value) of an unsigned ASCII integer; ``None`` otherwise."""
    text = text.strip()
    if not text.isdigit():  # bytes.isdigit is ASCII digits only
        return None
    canonical = text.lstrip(b"0") or b"0"
    value = int(canonical) if len(canonical) <= _MAX_TIMESTAMP_DIGITS else math.inf
    return canonical, value


def _in_tolerance(value: float, tolerance_s: int, now: float | None) -> bool:
    return abs((time.time() if now is None else now) - value) <= tolerance_s


# -- detection --------------------------------------------------------------------------------------


def _shape(value: bytes) -> str:
    """The scheme a signature value's shape says (for a custom header)."""
    if value.startswith(_SHA256_PREFIX):
        return "code_host"
    head = value.split(b",", 1)[0]
    if head.startswith((b"t=", b"v1=", b"v0=")):
        return "payments"
    if b"," in value:
        return "identity"
    return "commerce"


def _find(headers: RawHeaders) -> tuple[str, str, bytes] | None:
    """(scheme, family, value) of the first non-blank known signature header.

    One C-level set intersection finds which known headers are present (a request nearly always has one),
    instead of a lookup per known name.
    """
    present = _SIGNATURE_NAMES.intersection(headers)
    for name in present if len(present) < 2 else sorted(present, key=lambda n: _SIGNATURE_HEADERS[n][2]):
        value = headers[name]
        if value and not value.isspace():
            scheme, family, _ = _SIGNATURE_HEADERS[name]
            return scheme, family, value.strip()
    return None


def _custom(headers: RawHeaders, name: bytes) -> bytes | None:
    """A custom signature header's value, stripped; None when absent or blank."""
    value = headers.get(name)
    return None if not value or value.isspace() else value.strip()


def _header_name(header_name: str) -> bytes:
    return header_name.lower().encode("latin-1", "replace")


def detect_scheme(headers: RawHeaders, header_name: str | None = None) -> str | None:
    """The scheme :func:`verify` would check, or ``None`` when there is no signature header."""
    if header_name:
        value = _custom(headers, _header_name(header_name))
        return None if value is None else _shape(value)
    found = _find(headers)
    return None if found is None else found[0]


def detect_family(headers: RawHeaders) -> str | None:
    """Which :data:`HeaderFamily` of names an inbound request's signature header used (``None``: none), so
    replay can re-sign with the same names."""
    found = _find(headers)
    return None if found is None else found[1]


def repeated_header(
    headers: Sequence[tuple[bytes, bytes]], raw: RawHeaders, header_name: str | None = None
) -> Verdict | None:
    """``malformed_header`` when a header the check of this request reads arrived more than once; else None.

    ``headers`` is the request's list (ASGI's), ``raw`` its ``dict``. Only worth calling when the two differ
    in length, which is the only way any header can be repeated: the edge calls it for those requests alone.
    """
    seen: set[bytes] = set()
    repeated: set[bytes] = set()
    for name, _ in headers:
        if name in seen:
            repeated.add(name)
        seen.add(name)
    if header_name:
        custom = _header_name(header_name)
        value = _custom(raw, custom)
        if custom in repeated:
            return _verdict(_shape(value or b""), MALFORMED_HEADER)
        if value is None or _shape(value) != "identity":
            return None
        pair = next((p for p in _IDENTITY_PAIRS if raw.get(p[0]) and raw.get(p[1])), None)
        return None if pair is None or repeated.isdisjoint(pair) else _verdict("identity", MALFORMED_HEADER)
    names = _SIGNATURE_NAMES.intersection(repeated)
    if names:
        return _verdict(_SIGNATURE_HEADERS[min(names, key=lambda n: _SIGNATURE_HEADERS[n][2])][0], MALFORMED_HEADER)
    found = _find(raw)
    if found is None or found[0] != "identity" or repeated.isdisjoint(_IDENTITY_IDS[found[1]]):
        return None
    return _verdict("identity", MALFORMED_HEADER)


# -- verification -----------------------------------------------------------------------------------


class Verifier:
    """One secret's check with its settings, ready before any request: the keyed MAC states and a custom
    header's name as bytes. The definition of every scheme's check and failure reason; :func:`verifier`
    puts the compiled fast path in front of it."""

    __slots__ = ("_header", "_identity", "_plain", "_tolerance_s")

    def __init__(self, secret: str, *, tolerance_s: int = 300, header_name: str | None = None) -> None:
        self._plain = _plain_mac(secret)
        self._identity = _identity_mac(secret)
        self._tolerance_s = tolerance_s
        self._header = _header_name(header_name) if header_name else None

    def __call__(self, headers: RawHeaders, body: bytes, now: float | None = None) -> Verdict:
        """With a custom header only that header is read, and its value's shape picks the scheme."""
        family: str | None = None
        if self._header is None:
            found = _find(headers)
            if found is None:
                return _MISSING
            scheme, family, value = found
        else:
            value = _custom(headers, self._header)
            if value is None:
                return _MISSING
            scheme = _shape(value)
        if scheme == "payments":
            return _verify_payments(value, body, self._plain, self._tolerance_s, now)
        if scheme == "identity":
            return _verify_identity(headers, family, value, body, self._identity, self._tolerance_s, now)
        if scheme == "code_host":
            return _verify_code_host(value, body, self._plain)
        return _verify_commerce(value, body, self._plain)


Check = Callable[[RawHeaders, bytes, float | None], Verdict]
"""What :func:`verifier` returns: ``check(headers, body, now)``; ``now`` ``None`` reads the clock."""

# For the compiled fast path: every signature header in detection order with its scheme, an identity header's
# id and timestamp header names, and the verdict that header proves. The names and their order live here only.
_NATIVE_TABLE: Final = tuple(
    (name, scheme, *(_IDENTITY_IDS[family] if scheme == "identity" else (None, None)), _VALID[scheme])
    for name, (scheme, family, _) in _SIGNATURE_HEADERS.items()
)
_EXACT_FLOAT: Final = 2**53


def verifier(secret: str, *, tolerance_s: int = 300, header_name: str | None = None) -> Check:
    """One secret's check, built once per endpoint: what the edge calls per request.

    Where ``shared._native`` is built, its ``Verifier`` answers the usual validly signed request (a known
    header, a plain timestamp, the canonical encoding) in C and passes every other request, every failure
    included, to :class:`Verifier`, which defines every rule and reason. A custom ``header_name`` (rare)
    and tolerances too large for exact float arithmetic are checked in Python only.
    """
    check = Verifier(secret, tolerance_s=tolerance_s, header_name=header_name)
    if _native is None or header_name or not 0 <= tolerance_s < _EXACT_FLOAT:
        return check
    return _compiled(secret, tolerance_s, check)


def _compiled(secret: str, tolerance_s: int, fallback: Check) -> Check:
    """The compiled check of ``secret``, asking ``fallback`` whenever it cannot prove a request signed."""
    return _native.Verifier(_NATIVE_TABLE, _plain_mac(secret), _identity_mac(secret), tolerance_s, fallback)


def verify(
    headers: RawHeaders,
    body: bytes,
    secret: str,
    *,
    tolerance_s: int = 300,
    header_name: str | None = None,
    now: float | None = None,
) -> Verdict:
    """Check a request's signature. With ``header_name`` only that header is read (scheme from its shape)."""
    return verifier(secret, tolerance_s=tolerance_s, header_name=header_name)(headers, body, now)


def _verify_identity(
    headers: RawHeaders,
    family: str | None,
    value: bytes,
    body: bytes,
    mac: _Hmac,
    tolerance_s: int,
    now: float | None,
) -> Verdict:
    if family is not None:
        id_name, ts_name = _IDENTITY_IDS[family]
        msg_id, ts_text = headers.get(id_name), headers.get(ts_name)
    else:  # custom header: the first id/timestamp family that is complete
        msg_id = ts_text = None
        for id_name, ts_name in _IDENTITY_PAIRS:
            msg_id, ts_text = headers.get(id_name), headers.get(ts_name)
            if msg_id and ts_text:
                break
    if not msg_id or not ts_text:
        return _verdict("identity", MISSING_HEADER)
    signatures = [entry[3:] for entry in value.split() if entry.startswith(b"v1,")]
    if not signatures:
        return _verdict("identity", MALFORMED_HEADER)
    ts = _timestamp(ts_text)
    if ts is None:
        return _verdict("identity", MALFORMED_TIMESTAMP)
    signed, ts_value = ts
    expected = _b64(mac(b"%s.%s." % (msg_id, signed), body))
    if not any(_compare(sig, expected) for sig in signatures):
        well_formed = any(_is_b64_mac(sig) for sig in signatures)
        return _verdict("identity", SIGNATURE_MISMATCH if well_formed else MALFORMED_HEADER)
    if not _in_tolerance(ts_value, tolerance_s, now):
        return _verdict("identity", TIMESTAMP_OUT_OF_TOLERANCE)
    return _VALID["identity"]


_PAYMENTS_USUAL: Final = re.compile(rb"t=([1-9][0-9]{0,29}),v1=(.{64})")
"""What payment providers send nearly always (one ``v1``, no ``v0``, a timestamp without leading zeros, so
it is signed as it stands): read without the general parse. Whether the signature is hex matters only
when it does not match, so the pattern does not check it."""


def _verify_payments(value: bytes, body: bytes, mac: _Hmac, tolerance_s: int, now: float | None) -> Verdict:
    usual = _PAYMENTS_USUAL.fullmatch(value)
    if usual is not None:
        signed, signature = usual.groups()
        if _compare(signature, _hexlify(mac(signed + b".", body))):
            if abs((time.time() if now is None else now) - int(signed)) <= tolerance_s:
                return _VALID["payments"]
            return _verdict("payments", TIMESTAMP_OUT_OF_TOLERANCE)
        return _verdict("payments", SIGNATURE_MISMATCH if _is_hex_mac(signature) else MALFORMED_HEADER)
    ts_text, signatures = _payments_items(value)
    if ts_text is None or not signatures:  # v0-only (test events) lands here too
        return _verdict("payments", MALFORMED_HEADER)
    ts = _timestamp(ts_text)
    if ts is None:
        return _verdict("payments", MALFORMED_TIMESTAMP)
    signed, ts_value = ts
    expected = _hexlify(mac(signed + b".", body))
    if not any(_compare(sig, expected) for sig in signatures):
        well_formed = any(_is_hex_mac(sig) for sig in signatures)
        return _verdict("payments", SIGNATURE_MISMATCH if well_formed else MALFORMED_HEADER)
    if not _in_tolerance(ts_value, tolerance_s, now):
        return _verdict("payments", TIMESTAMP_OUT_OF_TOLERANCE)
    return _VALID["payments"]


def _payments_items(value: bytes) -> tuple[bytes | None, list[bytes]]:
    """The first ``t`` and every ``v1`` of a ``t=...,v1=...,v0=...`` header, in any order and spacing."""
    ts_text: bytes | None = None
    signatures: list[bytes] = []
    for item in value.split(b","):
        key, _, item_value = item.strip().partition(b"=")
        if key == b"v1":
            signatures.append(item_value)
        elif key == b"t" and ts_text is None:
            ts_text = item_value
    return ts_text, signatures


def _verify_code_host(value: bytes, body: bytes, mac: _Hmac) -> Verdict:
    if not value.startswith(_SHA256_PREFIX):
        return _verdict("code_host", MALFORMED_HEADER)
    signature = value[len(_SHA256_PREFIX) :]
    if _compare(signature, _hexlify(mac(b"", body))):
        return _VALID["code_host"]
    return _verdict("code_host", SIGNATURE_MISMATCH if _is_hex_mac(signature) else MALFORMED_HEADER)


def _verify_commerce(value: bytes, body: bytes, mac: _Hmac) -> Verdict:
    if _compare(value, _b64(mac(b"", body))):
        return _VALID["commerce"]
    return _verdict("commerce", SIGNATURE_MISMATCH if _is_b64_mac(value) else MALFORMED_HEADER)


# -- signing ----------------------------------------------------------------------------------------


def sign(
    scheme: str,
    body: bytes,
    secret: str,
    *,
    msg_id: str | None = None,
    timestamp: int | None = None,
    header_name: str | None = None,
    header_family: HeaderFamily = "neutral",
) -> dict[str, str]:
    """The headers that make ``body`` verify under ``scheme``: the signature, plus id and timestamp for
    ``identity``. A fresh timestamp (now) and id (``msg_<ulid>``) when not given; ``msg_id`` is used only by
    ``identity`` and ``timestamp`` only by ``identity`` and ``payments``. ``header_name`` puts the signature
    in a custom header (the id/timestamp names still come from ``header_family``).

    Headers come back as text, ready for an HTTP client; :func:`shared.headers.raw_headers` gives the form
    :func:`verify` reads.

    Raises ``ValueError`` for an unknown scheme, a family the scheme has no headers for, or a negative
    timestamp.
    """
    families = HEADERS.get(scheme)
    if families is None:
        raise ValueError(f"unknown signature scheme {scheme!r}")
    names = families.get(header_family)
    if names is None:
        raise ValueError(f"scheme {scheme!r} has no {header_family!r} headers")
    signature_name = header_name.lower() if header_name else names[0]
    if scheme == "commerce":
        return {signature_name: _b64(_plain_mac(secret)(b"", body)).decode()}
    if scheme == "code_host":
        return {signature_name: "sha256=" + _plain_mac(secret)(b"", body).hex()}
    if timestamp is None:
        timestamp = int(time.time())
    elif timestamp < 0:
        raise ValueError("timestamp must be >= 0 (Unix seconds)")
    ts = b"%d" % timestamp
    if scheme == "payments":
        return {signature_name: f"t={timestamp},v1={_plain_mac(secret)(ts + b'.', body).hex()}"}
    if msg_id is None:
        msg_id = f"msg_{ulid()}"
    mac = _identity_mac(secret)(b"%s.%s." % (_utf8(msg_id), ts), body)
    _, id_name, ts_name = _IDENTITY_HEADERS[header_family]
    return {signature_name: "v1," + _b64(mac).decode(), id_name: msg_id, ts_name: str(timestamp)}


def resign(
    headers: Mapping[str, str],
    provider: str | None,
    body: bytes,
    secret: str,
    *,
    signature_header: str | None = None,
) -> tuple[dict[str, str], str | None]:
    """Signs a captured request again, in its own scheme and header family, with a fresh timestamp:
    (headers to set, the captured signature header they replace). For replay's ``resign_with`` and
    ``hookyard listen --resign-with``.

    The scheme is the event's provider, else detected from ``headers`` (text names and values as captured);
    an unattributed request gets Standard Webhooks (``webhook-*``). The identity scheme keeps the event's own
    message id (its ``*-id`` header: the idempotency key receivers deduplicate on) and sets the id and
    timestamp headers its libraries read; payments signs ``t=`` now; the signature goes in
    ``signature_header`` when given, else in the scheme's own header (where the provider's library looks).
    """
    raw = raw_headers(headers)
    scheme = provider if provider in SCHEMES else detect_scheme(raw)
    family = detect_family(raw) or "neutral"
    if scheme is None:
        scheme, family = "identity", "standard"
    if family not in HEADERS[scheme]:
        family = "neutral"
    names = HEADERS[scheme][family]
    msg_id = None
    if scheme == "identity":
        own = {name.lower(): value for name, value in headers.items()}.get(names[1] or "", "").strip()
        msg_id = own or None
    signed = sign(scheme, body, secret, msg_id=msg_id, header_name=signature_header, header_family=family)  # type: ignore[arg-type]
    return signed, names[0]
