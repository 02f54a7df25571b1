"""The MAC every scheme uses (HMAC-SHA256 with its keyed states computed once per secret) and the canonical
forms around it: the encodings the providers send, constant-time comparison, the signed timestamp.

Apart from the schemes because it is the part that costs: per secret, the keyed HMAC states are computed
once (LRU cache) so each MAC is just hashing, and where ``shared/_native.c`` is built the primitive is C
(``shared._native.Mac``, the same interface as :class:`PyHmac`); :data:`native` is that extension, or None
where it was not built (everything then runs in Python; the tests run both).

Comparisons are constant time (:func:`hmac.compare_digest`) against the canonical encoding the providers
send (standard padded base64, lowercase hex: uppercase hex is a mismatch, as for the providers' own
libraries). Bodies, ids and timestamps are signed as the bytes that arrived (they need not be UTF-8).
"""

from __future__ import annotations

import binascii
import hashlib
import hmac
import math
import time
from typing import TYPE_CHECKING, Final

from shared.bytes_lru import memoize

__all__ = (
    "Hmac",
    "PyHmac",
    "b64",
    "compare",
    "hexlify",
    "in_tolerance",
    "is_b64_mac",
    "is_hex_mac",
    "native",
    "plain_mac",
    "timestamp",
    "utf8",
)

_MAC_SIZE: Final = 32
_HEX_SIZE: Final = 2 * _MAC_SIZE
_HEX: Final = frozenset(b"0123456789abcdefABCDEF")
_MAX_TIMESTAMP_DIGITS: Final = 30  # more digits than any clock: out of tolerance, and int() stays cheap
compare = hmac.compare_digest
hexlify = binascii.hexlify


def utf8(text: str) -> bytes:
    # surrogatepass: never raises, and is plain UTF-8 for every well-formed string.
    return text.encode("utf-8", "surrogatepass")


_IPAD: Final = bytes(x ^ 0x36 for x in range(256))
_OPAD: Final = bytes(x ^ 0x5C for x in range(256))
_BLOCK: Final = 64


class PyHmac:
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
    # The compiled parts of this package (shared/_native.c): the MAC primitive, and a fast path that proves the
    # usual validly signed request and hands everything else to ``check.Verifier``. Built when a compiler and
    # OpenSSL's headers are there; without them everything here runs in Python (the tests run both).
    from shared import _native as native
except ImportError:
    native = None  # type: ignore[assignment]  # optional: mypy cannot type a module that may be None
if TYPE_CHECKING:
    Hmac = PyHmac  # what type checkers see: the compiled Mac has the same interface (shared/_native.pyi)
else:
    Hmac = PyHmac if native is None else native.Mac


@memoize(8 * 1024 * 1024, size=lambda _mac: 512)  # a MAC keeps its two padded key states
def plain_mac(secret: str) -> Hmac:
    """Every scheme but ``identity``: the key is the whole secret as UTF-8."""
    return Hmac(utf8(secret))


def b64(mac: bytes) -> bytes:
    return binascii.b2a_base64(mac, newline=False)


def is_b64_mac(text: bytes) -> bool:
    """Whether ``text`` is a MAC in (strict) base64: a mismatch rather than a malformed header."""
    try:
        return len(binascii.a2b_base64(text, strict_mode=True)) == _MAC_SIZE
    except (binascii.Error, ValueError):
        return False


def is_hex_mac(text: bytes) -> bool:
    """Whether ``text`` is a MAC in hex (either case): a mismatch rather than a malformed header."""
    return len(text) == _HEX_SIZE and _HEX.issuperset(text)


def timestamp(text: bytes) -> tuple[bytes, float] | None:
    """(the decimal form that is signed, the value) of an unsigned ASCII integer; ``None`` otherwise."""
    text = text.strip()
    if not text.isdigit():  # bytes.isdigit is ASCII digits only
        return None
    canonical = text.lstrip(b"0") or b"0"
    value = int(canonical) if len(canonical) <= _MAX_TIMESTAMP_DIGITS else math.inf
    return canonical, value


def in_tolerance(value: float, tolerance_s: int, now: float | None) -> bool:
    """``|now - value| <= tolerance_s`` (both directions; exactly at the tolerance passes)."""
    return abs((time.time() if now is None else now) - value) <= tolerance_s
