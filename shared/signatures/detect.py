"""Which scheme a request's signature is in, and which header family it used; and whether a header the
check reads arrived more than once.

No algorithm is ever configured: the scheme is detected from which signature header is present (the first
in ``schemes.HEADERS`` order when there are several; an empty or blank header counts as absent), or, for a
custom ``header_name``, from the shape of its value: ``sha256=...`` is code_host; a first comma-separated
item starting with ``t=``, ``v1=`` or ``v0=`` is payments; any other value with a comma is identity
(``v1,<b64>`` entries, id and timestamp from the first complete ``relay-*`` / ``webhook-*`` / ``svix-*``
pair); no comma is commerce (bare base64). Only that header is read.

A header the check reads that arrives more than once is ``malformed_header`` (:func:`repeated_header`): a
``dict`` of the headers keeps only the last copy, while the stored event keeps both (joined with ", "), so
a verdict from one copy would describe a request other than the one stored. Without a custom header the
check reads every known signature header (detection looks at all of them) and, for ``identity``, the id
and timestamp headers of the detected family; with one, that header and, for an ``identity``-shaped
value, the id and timestamp pair it uses.
"""

from __future__ import annotations

from collections.abc import Sequence

from shared.headers import RawHeaders
from shared.signatures.code_host import SHA256_PREFIX
from shared.signatures.schemes import (
    IDENTITY_IDS,
    IDENTITY_PAIRS,
    MALFORMED_HEADER,
    SIGNATURE_HEADERS,
    SIGNATURE_NAMES,
    Verdict,
    verdict,
)

__all__ = ("custom", "detect_family", "detect_scheme", "find", "raw_name", "repeated_header", "shape")


def shape(value: bytes) -> str:
    """The scheme a signature value's shape says (for a custom header)."""
    if value.startswith(SHA256_PREFIX):
        return "code_host"
    head = value.split(b",", 1)[0]
    if head.startswith((b"t=", b"v1=", b"v0=")):
        return "payments"
    if b"," in value:
        return "identity"
    return "commerce"


def find(headers: RawHeaders) -> tuple[str, str, bytes] | None:
    """(scheme, family, value) of the first non-blank known signature header.

    One C-level set intersection finds which known headers are present (a request nearly always has one),
    instead of a lookup per known name.
    """
    present = SIGNATURE_NAMES.intersection(headers)
    for name in present if len(present) < 2 else sorted(present, key=lambda n: SIGNATURE_HEADERS[n][2]):
        value = headers[name]
        if value and not value.isspace():
            scheme, family, _ = SIGNATURE_HEADERS[name]
            return scheme, family, value.strip()
    return None


def custom(headers: RawHeaders, name: bytes) -> bytes | None:
    """A custom signature header's value, stripped; None when absent or blank."""
    value = headers.get(name)
    return None if not value or value.isspace() else value.strip()


def raw_name(header_name: str) -> bytes:
    """A custom header's name in the form headers arrive in (lowercased bytes)."""
    return header_name.lower().encode("latin-1", "replace")


def detect_scheme(headers: RawHeaders, header_name: str | None = None) -> str | None:
    """The scheme :func:`~shared.signatures.verify` would check, or ``None`` when there is no signature
    header."""
    if header_name:
        value = custom(headers, raw_name(header_name))
        return None if value is None else shape(value)
    found = find(headers)
    return None if found is None else found[0]


def detect_family(headers: RawHeaders) -> str | None:
    """Which :data:`~shared.signatures.schemes.HeaderFamily` of names an inbound request's signature header
    used (``None``: none), so replay can re-sign with the same names."""
    found = find(headers)
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
        wanted = raw_name(header_name)
        value = custom(raw, wanted)
        if wanted in repeated:
            return verdict(shape(value or b""), MALFORMED_HEADER)
        if value is None or shape(value) != "identity":
            return None
        pair = next((p for p in IDENTITY_PAIRS if raw.get(p[0]) and raw.get(p[1])), None)
        return None if pair is None or repeated.isdisjoint(pair) else verdict("identity", MALFORMED_HEADER)
    names = SIGNATURE_NAMES.intersection(repeated)
    if names:
        return verdict(SIGNATURE_HEADERS[min(names, key=lambda n: SIGNATURE_HEADERS[n][2])][0], MALFORMED_HEADER)
    found = find(raw)
    if found is None or found[0] != "identity" or repeated.isdisjoint(IDENTITY_IDS[found[1]]):
        return None
    return verdict("identity", MALFORMED_HEADER)
