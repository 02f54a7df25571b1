"""The ``code_host`` scheme (GitHub's): its check and its signature.

Header: ``x-codehost-signature-256`` / ``x-hub-signature-256`` (neutral / vendor), ``sha256=<hex>``: the
HMAC-SHA256 of the raw body in lowercase hex. Key: the whole secret as UTF-8. No timestamp, so no
tolerance. Uppercase hex is a mismatch, as for the provider's own libraries; a value without the
``sha256=`` prefix is malformed, and a custom header whose value has the prefix is this scheme
(``shared.signatures.detect``).

Its own module, small as it is, so each scheme reads whole in one place: what its header holds, how it is
checked, and how replay signs it again.
"""

from __future__ import annotations

from typing import Final

from shared.signatures.mac import Hmac, compare, hexlify, is_hex_mac, plain_mac
from shared.signatures.schemes import MALFORMED_HEADER, SIGNATURE_MISMATCH, VALID, Verdict, verdict

__all__ = ("SHA256_PREFIX", "sign_code_host", "verify_code_host")

SHA256_PREFIX: Final = b"sha256="


def verify_code_host(value: bytes, body: bytes, mac: Hmac) -> Verdict:
    if not value.startswith(SHA256_PREFIX):
        return verdict("code_host", MALFORMED_HEADER)
    signature = value[len(SHA256_PREFIX) :]
    if compare(signature, hexlify(mac(b"", body))):
        return VALID["code_host"]
    return verdict("code_host", SIGNATURE_MISMATCH if is_hex_mac(signature) else MALFORMED_HEADER)


def sign_code_host(body: bytes, secret: str, signature_name: str) -> dict[str, str]:
    """The signature header: ``sha256=`` and the hex MAC of the body."""
    return {signature_name: "sha256=" + plain_mac(secret)(b"", body).hex()}
