"""The ``identity`` scheme (Svix / Standard Webhooks): its key, its check and its signature.

Headers: ``relay-signature`` / ``webhook-signature`` / ``svix-signature`` (neutral / standard / vendor), with
the ``*-id`` and ``*-timestamp`` headers of the same family. The signature header holds ``v1,<base64>``
entries, space separated, any of which may match; each is HMAC-SHA256 over ``{id}.{timestamp}.{body}``.

Key: the base64-decoded part after ``whsec_`` (decoded as leniently as the Svix / Standard Webhooks
libraries do, so unpadded secrets work); a secret without the ``whsec_`` prefix, or whose ``whsec_`` part
decodes to nothing, is used as its UTF-8 bytes. A header without any ``v1`` entry is malformed (``v1`` is
the only version we check). Signing keeps a given message id (the idempotency key receivers deduplicate on).
"""

from __future__ import annotations

import base64
import binascii

from shared.bytes_lru import memoize
from shared.headers import RawHeaders
from shared.ids import ulid
from shared.signatures.mac import Hmac, b64, compare, in_tolerance, is_b64_mac, timestamp, utf8
from shared.signatures.schemes import (
    IDENTITY_HEADERS,
    IDENTITY_IDS,
    IDENTITY_PAIRS,
    MALFORMED_HEADER,
    MALFORMED_TIMESTAMP,
    MISSING_HEADER,
    SIGNATURE_MISMATCH,
    TIMESTAMP_OUT_OF_TOLERANCE,
    VALID,
    HeaderFamily,
    Verdict,
    verdict,
)

__all__ = ("identity_mac", "sign_identity", "verify_identity")


@memoize(8 * 1024 * 1024, size=lambda _mac: 512)  # a MAC keeps its two padded key states
def identity_mac(secret: str) -> Hmac:
    """The keyed MAC of ``secret``'s identity key (cached: the edge builds one per endpoint)."""
    if secret.startswith("whsec_"):
        try:
            # The same lenient decoding as the svix / standardwebhooks libraries (extra padding is skipped).
            key = base64.b64decode(secret[6:] + "==")
        except (binascii.Error, ValueError):
            key = b""
        if key:
            return Hmac(key)
    return Hmac(utf8(secret))


def verify_identity(
    headers: RawHeaders,
    family: str | None,
    value: bytes,
    body: bytes,
    mac: Hmac,
    tolerance_s: int,
    now: float | None,
) -> Verdict:
    """``family`` None: a custom signature header, whose id and timestamp come from the first complete pair."""
    if family is not None:
        id_name, ts_name = IDENTITY_IDS[family]
        msg_id, ts_text = headers.get(id_name), headers.get(ts_name)
    else:  # custom header: the first id/timestamp family that is complete
        msg_id = ts_text = None
        for id_name, ts_name in IDENTITY_PAIRS:
            msg_id, ts_text = headers.get(id_name), headers.get(ts_name)
            if msg_id and ts_text:
                break
    if not msg_id or not ts_text:
        return verdict("identity", MISSING_HEADER)
    signatures = [entry[3:] for entry in value.split() if entry.startswith(b"v1,")]
    if not signatures:
        return verdict("identity", MALFORMED_HEADER)
    ts = timestamp(ts_text)
    if ts is None:
        return verdict("identity", MALFORMED_TIMESTAMP)
    signed, ts_value = ts
    expected = b64(mac(b"%s.%s." % (msg_id, signed), body))
    if not any(compare(sig, expected) for sig in signatures):
        well_formed = any(is_b64_mac(sig) for sig in signatures)
        return verdict("identity", SIGNATURE_MISMATCH if well_formed else MALFORMED_HEADER)
    if not in_tolerance(ts_value, tolerance_s, now):
        return verdict("identity", TIMESTAMP_OUT_OF_TOLERANCE)
    return VALID["identity"]


def sign_identity(
    body: bytes, secret: str, ts: int, msg_id: str | None, signature_name: str, header_family: HeaderFamily
) -> dict[str, str]:
    """The signature, id and timestamp headers (id and timestamp named by ``header_family``); a fresh
    ``msg_<ulid>`` id when none is given."""
    if msg_id is None:
        msg_id = f"msg_{ulid()}"
    mac = identity_mac(secret)(b"%s.%d." % (utf8(msg_id), ts), body)
    _, id_name, ts_name = IDENTITY_HEADERS[header_family]
    return {signature_name: "v1," + b64(mac).decode(), id_name: msg_id, ts_name: str(ts)}
