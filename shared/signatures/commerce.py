"""The ``commerce`` scheme (Shopify's): its check and its signature.

Header: ``x-shop-hmac-sha256`` / ``x-shopify-hmac-sha256`` (neutral / vendor), the bare base64 of the
HMAC-SHA256 of the raw body. Key: the whole secret as UTF-8. No timestamp, so no tolerance check. The
value is compared as the canonical (padded, standard alphabet) base64 the provider sends; a value that is
base64 of a MAC but does not match is a mismatch, anything else is malformed.

Its own module, small as it is, so each scheme reads whole in one place: what its header holds, how it is
checked, and how replay signs it again.
"""

from __future__ import annotations

from shared.signatures.mac import Hmac, b64, compare, is_b64_mac, plain_mac
from shared.signatures.schemes import MALFORMED_HEADER, SIGNATURE_MISMATCH, VALID, Verdict, verdict

__all__ = ("sign_commerce", "verify_commerce")


def verify_commerce(value: bytes, body: bytes, mac: Hmac) -> Verdict:
    if compare(value, b64(mac(b"", body))):
        return VALID["commerce"]
    return verdict("commerce", SIGNATURE_MISMATCH if is_b64_mac(value) else MALFORMED_HEADER)


def sign_commerce(body: bytes, secret: str, signature_name: str) -> dict[str, str]:
    """The signature header: the base64 MAC of the body."""
    return {signature_name: b64(plain_mac(secret)(b"", body)).decode()}
