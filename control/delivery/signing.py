"""hookyard's own signatures on what it sends to destinations: Standard Webhooks ``v1`` (HMAC-SHA256 with a
``whsec_`` secret) and ``v1a`` (Ed25519 with a ``whsk_`` secret key, verified with its ``whpk_`` public key).

The secret's prefix says its scheme, so a rotation may change scheme and the two signatures of its overlap
still come out right. Several secrets (the current one, then the previous one while a rotation's overlap
lasts) give one ``webhook-signature`` of space separated entries, as the spec allows for rotation: a
receiver holding either secret finds the entry it can verify.

Keys follow the spec and its reference libraries: ``whsk_`` is base64 of the 32-byte Ed25519 seed, ``whpk_``
base64 of the 32-byte public key, a ``v1a`` entry base64 of the 64-byte signature over
``{webhook-id}.{webhook-timestamp}.{body}``. Key objects are kept per secret (bounded), as building one
costs as much as a signature.
"""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Sequence

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from shared.bytes_lru import memoize
from shared.signatures.identity import identity_mac
from shared.signatures.mac import b64, utf8

__all__ = ("ED25519_PREFIX", "PUBLIC_PREFIX", "new_ed25519", "public_key", "signature_headers")

ED25519_PREFIX = "whsk_"
PUBLIC_PREFIX = "whpk_"


def new_ed25519() -> tuple[str, str]:
    """A new key pair: (``whsk_`` secret key, ``whpk_`` public key)."""
    seed = os.urandom(32)
    secret = ED25519_PREFIX + base64.b64encode(seed).decode("ascii")
    return secret, public_key(secret)


@memoize(1024 * 1024, size=lambda _key: 256)  # the key object: a 32-byte seed and its OpenSSL handle
def _private(secret: str) -> Ed25519PrivateKey:
    try:
        seed = base64.b64decode(secret.removeprefix(ED25519_PREFIX), validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("not a whsk_ Ed25519 secret key") from None
    return Ed25519PrivateKey.from_private_bytes(seed)


def public_key(secret: str) -> str:
    """The ``whpk_`` public key of a ``whsk_`` secret key."""
    raw = _private(secret).public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    return PUBLIC_PREFIX + base64.b64encode(raw).decode("ascii")


def _entry(secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    if secret.startswith(ED25519_PREFIX):
        signed = _private(secret).sign(f"{msg_id}.{timestamp}.".encode() + body)
        return "v1a," + base64.b64encode(signed).decode("ascii")
    # The identity scheme's MAC (``shared.signatures.identity.sign_identity``) without the three headers that
    # function builds for a caller that wants them: only the entry is used here, once per delivery.
    return "v1," + b64(identity_mac(secret)(b"%s.%d." % (utf8(msg_id), timestamp), body)).decode("ascii")


def signature_headers(msg_id: str, body: bytes, secrets: Sequence[str], timestamp: int) -> dict[str, str]:
    """``webhook-id``, ``webhook-timestamp`` and ``webhook-signature`` with one entry per secret, in order."""
    if len(secrets) == 1:  # nearly always: outside a rotation's overlap
        entries = _entry(secrets[0], msg_id, timestamp, body)
    else:
        entries = " ".join(_entry(secret, msg_id, timestamp, body) for secret in secrets)
    return {"webhook-id": msg_id, "webhook-timestamp": str(timestamp), "webhook-signature": entries}
