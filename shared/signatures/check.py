"""One secret's check, built once per endpoint, with the compiled fast path in front where it is built.

Apart from the schemes because this is what the edge holds per endpoint and calls per request: the keyed
MAC states and a custom header's name prepared before any request, one dispatch to the detected scheme's
check, and, where ``shared/_native.c`` is built, the C ``Verifier`` that proves the usual validly signed
request (a known header, a plain timestamp, the canonical encoding) and hands every other request, every
failure included, to :class:`Verifier`, which defines every rule and reason. The table the C side gets is
made here from ``schemes``, so the header names and their order live in one place.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from shared.headers import RawHeaders
from shared.signatures import mac
from shared.signatures.code_host import verify_code_host
from shared.signatures.commerce import verify_commerce
from shared.signatures.detect import custom, find, raw_name, shape
from shared.signatures.identity import identity_mac, verify_identity
from shared.signatures.payments import verify_payments
from shared.signatures.schemes import IDENTITY_IDS, NO_HEADER, SIGNATURE_HEADERS, VALID, Verdict

__all__ = ("Check", "Verifier", "prover", "verifier", "verify")


class Verifier:
    """One secret's check with its settings, ready before any request: the keyed MAC states and a custom
    header's name as bytes. The definition of every scheme's check and failure reason; :func:`verifier`
    puts the compiled fast path in front of it."""

    __slots__ = ("_header", "_identity", "_plain", "_tolerance_s")

    def __init__(self, secret: str, *, tolerance_s: int = 300, header_name: str | None = None) -> None:
        self._plain = mac.plain_mac(secret)
        self._identity = identity_mac(secret)
        self._tolerance_s = tolerance_s
        self._header = raw_name(header_name) if header_name else None

    def __call__(self, headers: RawHeaders, body: bytes, now: float | None = None) -> Verdict:
        """With a custom header only that header is read, and its value's shape picks the scheme."""
        family: str | None = None
        value: bytes | None
        if self._header is None:
            found = find(headers)
            if found is None:
                return NO_HEADER
            scheme, family, value = found
        else:
            value = custom(headers, self._header)
            if value is None:
                return NO_HEADER
            scheme = shape(value)
        if scheme == "payments":
            return verify_payments(value, body, self._plain, self._tolerance_s, now)
        if scheme == "identity":
            return verify_identity(headers, family, value, body, self._identity, self._tolerance_s, now)
        if scheme == "code_host":
            return verify_code_host(value, body, self._plain)
        return verify_commerce(value, body, self._plain)


Check = Callable[[RawHeaders, bytes, float | None], Verdict]
"""What :func:`verifier` returns: ``check(headers, body, now)``; ``now`` ``None`` reads the clock."""

# For the compiled fast path: every signature header in detection order with its scheme, an identity header's
# id and timestamp header names, and the verdict that header proves. The names and their order live here only.
NATIVE_TABLE: Final = tuple(
    (name, scheme, *(IDENTITY_IDS[family] if scheme == "identity" else (None, None)), VALID[scheme])
    for name, (scheme, family, _) in SIGNATURE_HEADERS.items()
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
    if mac.native is None or header_name or not 0 <= tolerance_s < _EXACT_FLOAT:
        return check
    return compiled(secret, tolerance_s, check)


_UNPROVEN: Final = Verdict(False, None, None)


def _unproven(headers: RawHeaders, body: bytes, now: float | None = None) -> Verdict:
    return _UNPROVEN


def prover(secret: str, *, tolerance_s: int = 300, header_name: str | None = None) -> Check:
    """A check that only proves, for an endpoint whose verification is off: a request signed with
    ``secret`` (what hookyard signs itself, e.g. its samples) is valid; for anything else the verdict is
    not valid and means nothing (the edge stores "not checked"). What hookyard signs is always the usual
    form, which the compiled path proves alone, so a real provider's request signed with its own secret
    costs one MAC in C and no Python; without the compiled path, or with a custom ``header_name``, the
    Python check answers."""
    if mac.native is None or header_name or not 0 <= tolerance_s < _EXACT_FLOAT:
        return Verifier(secret, tolerance_s=tolerance_s, header_name=header_name)
    return compiled(secret, tolerance_s, _unproven)


def compiled(secret: str, tolerance_s: int, fallback: Check) -> Check:
    """The compiled check of ``secret``, asking ``fallback`` whenever it cannot prove a request signed."""
    return mac.native.Verifier(NATIVE_TABLE, mac.plain_mac(secret), identity_mac(secret), tolerance_s, fallback)


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
