"""The ``payments`` scheme (Stripe's): its check and its signature.

Header: ``pay-signature`` / ``stripe-signature`` (neutral / vendor), ``t=<unix>,v1=<hex>[,v1=..][,v0=..]``
in any order and spacing; each ``v1`` is HMAC-SHA256 over ``{t}.{body}``, hex. Key: the whole secret as
UTF-8, ``whsec_`` prefix included, as the real provider does. A header with only ``v0`` entries (the
provider's test events) has no signature we check, so it is malformed, as is one without ``t=``.

The usual header (one ``v1``, no ``v0``, a timestamp without leading zeros, so it is signed as it stands) is
read by one regular expression without the general parse; everything else takes the general parse, and
both give the same verdicts.
"""

from __future__ import annotations

import re
import time
from typing import Final

from shared.signatures.mac import Hmac, compare, hexlify, in_tolerance, is_hex_mac, plain_mac, timestamp
from shared.signatures.schemes import (
    MALFORMED_HEADER,
    MALFORMED_TIMESTAMP,
    SIGNATURE_MISMATCH,
    TIMESTAMP_OUT_OF_TOLERANCE,
    VALID,
    Verdict,
    verdict,
)

__all__ = ("sign_payments", "verify_payments")

_PAYMENTS_USUAL: Final = re.compile(rb"t=([1-9][0-9]{0,29}),v1=(.{64})")
"""What payment providers send nearly always (one ``v1``, no ``v0``, a timestamp without leading zeros, so
it is signed as it stands): read without the general parse. Whether the signature is hex matters only
when it does not match, so the pattern does not check it."""


def verify_payments(value: bytes, body: bytes, mac: Hmac, tolerance_s: int, now: float | None) -> Verdict:
    usual = _PAYMENTS_USUAL.fullmatch(value)
    if usual is not None:
        signed, signature = usual.groups()
        if compare(signature, hexlify(mac(signed + b".", body))):
            if abs((time.time() if now is None else now) - int(signed)) <= tolerance_s:
                return VALID["payments"]
            return verdict("payments", TIMESTAMP_OUT_OF_TOLERANCE)
        return verdict("payments", SIGNATURE_MISMATCH if is_hex_mac(signature) else MALFORMED_HEADER)
    ts_text, signatures = _payments_items(value)
    if ts_text is None or not signatures:  # v0-only (test events) lands here too
        return verdict("payments", MALFORMED_HEADER)
    ts = timestamp(ts_text)
    if ts is None:
        return verdict("payments", MALFORMED_TIMESTAMP)
    signed, ts_value = ts
    expected = hexlify(mac(signed + b".", body))
    if not any(compare(sig, expected) for sig in signatures):
        well_formed = any(is_hex_mac(sig) for sig in signatures)
        return verdict("payments", SIGNATURE_MISMATCH if well_formed else MALFORMED_HEADER)
    if not in_tolerance(ts_value, tolerance_s, now):
        return verdict("payments", TIMESTAMP_OUT_OF_TOLERANCE)
    return VALID["payments"]


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


def sign_payments(body: bytes, secret: str, ts: int, signature_name: str) -> dict[str, str]:
    """The signature header, ``t=<ts>,v1=<hex>``."""
    return {signature_name: f"t={ts},v1={plain_mac(secret)(b'%d.' % ts, body).hex()}"}
