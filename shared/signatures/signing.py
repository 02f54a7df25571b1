"""Signing in any scheme, and signing a captured request again in its own scheme and header family.

Apart from the check because its callers are others (delivery signing, replay's ``resign_with``,
``hookyard listen --resign-with``, the samples and the benches, never the edge) and it answers a different
question: which headers make a body verify. Each scheme's signature is made next to its check (one module
per scheme), so the two cannot drift apart; this module picks the scheme, the header family and the
timestamp, and for a captured request keeps what a receiver deduplicates on (the ``identity`` message id).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Final

from shared.headers import raw_headers
from shared.providers.catalog import CATALOG
from shared.providers.model import Provider
from shared.signatures.code_host import sign_code_host
from shared.signatures.commerce import sign_commerce
from shared.signatures.detect import detect_family, detect_scheme
from shared.signatures.identity import sign_identity
from shared.signatures.payments import sign_payments
from shared.signatures.schemes import HEADERS, SCHEMES, HeaderFamily

__all__ = ("CATALOG_SIGNATURE_HEADERS", "own_signature_header", "provider_signature_header", "resign", "sign")


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
    :func:`~shared.signatures.verify` reads.

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
        return sign_commerce(body, secret, signature_name)
    if scheme == "code_host":
        return sign_code_host(body, secret, signature_name)
    if timestamp is None:
        timestamp = int(time.time())
    elif timestamp < 0:
        raise ValueError("timestamp must be >= 0 (Unix seconds)")
    if scheme == "payments":
        return sign_payments(body, secret, timestamp, signature_name)
    return sign_identity(body, secret, timestamp, msg_id, signature_name, header_family)


_Names = tuple[str, str | None, str | None]

_SECRET_SIGNED = frozenset({"hmac", "token", "basic", "jws"})


def _catalog_signed(provider: str | None) -> Provider | None:
    """The catalog entry of ``provider`` when it is none of the four kinds and a secret makes its signature in a
    header of its own, so that a re-signature can be the provider's own; else None."""
    entry = CATALOG.get(provider) if provider is not None and provider not in SCHEMES else None
    if entry is None or entry.kind is not None:
        return None
    scheme = entry.scheme
    if scheme.kind not in _SECRET_SIGNED or scheme.header is None or scheme.signature_body is not None:
        return None
    return entry


CATALOG_SIGNATURE_HEADERS: Final[dict[str, str]] = {
    name: str(entry.scheme.header) for name in CATALOG if (entry := _catalog_signed(name)) is not None
}
"""The catalog providers beyond the four kinds that ``resign`` signs as they sign → the header it signs in (the
inbox's re-sign box shows it)."""


def _resign_as(
    entry: Provider,
    headers: Mapping[str, str],
    body: bytes,
    secret: str,
    signature_header: str | None,
    url: str,
    method: str,
) -> tuple[dict[str, str], str | None]:
    """``resign`` for a catalog provider: its own signature (and timestamp) headers, the captured id kept.
    ``shared.providers.sign`` is imported here: it imports ``shared.providers.verify``, which imports this
    package's schemes, so a module-level import would be circular for whichever is imported first."""
    from shared.providers.sign import sign as sign_as_provider

    scheme = entry.scheme
    lowered = {name.lower(): value for name, value in headers.items()}
    msg_id = lowered.get(scheme.id_header or "") or None
    signed = sign_as_provider(entry, body, secret, headers=lowered, url=url, method=method, msg_id=msg_id)
    own = str(scheme.header)
    if signature_header and signature_header.lower() != own and own in signed:
        signed[signature_header.lower()] = signed.pop(own)
    return signed, own


def _names(headers: Mapping[str, str], provider: str | None) -> tuple[str, HeaderFamily, _Names]:
    """The scheme a captured request is signed again in, its header family and that family's names: the
    event's provider, else detected from ``headers``; an unattributed request gets Standard Webhooks."""
    raw = raw_headers(headers)
    scheme = provider if provider in SCHEMES else detect_scheme(raw)
    family = detect_family(raw) or "neutral"
    if scheme is None:
        scheme, family = "identity", "standard"
    if family not in HEADERS[scheme]:
        family = "neutral"
    return scheme, family, HEADERS[scheme][family]  # type: ignore[return-value]  # a key of HEADERS: a HeaderFamily


def own_signature_header(headers: Mapping[str, str], provider: str | None) -> str:
    """Where :func:`resign` puts the signature when no ``signature_header`` is given: the scheme's own header
    in the captured request's family (``stripe-signature``, ``svix-signature``...), where the provider's
    library looks. ``hookyard replay --resign-with`` asks ``/v1`` replay for this header, so it signs as
    ``hookyard listen --resign-with`` does."""
    entry = _catalog_signed(provider)
    if entry is not None:
        return str(entry.scheme.header)
    return _names(headers, provider)[2][0]


def provider_signature_header(headers: Mapping[str, str], provider: str | None) -> str | None:
    """The event's own signature header when it has a provider scheme (its provider, else one detected from
    ``headers``): ``stripe-signature`` for a payments event captured with Stripe's names, ``pay-signature``
    with the neutral ones, ``svix-signature``, ``x-shopify-hmac-sha256``, ``x-hub-signature-256``...; None
    for a request of no known scheme. Replay's ``signature_header`` defaults to it (else ``x-signature``):
    a re-signed replay then verifies with the provider's own library, as ``listen --resign-with`` does."""
    if provider not in SCHEMES and _catalog_signed(provider) is None and detect_scheme(raw_headers(headers)) is None:
        return None
    return own_signature_header(headers, provider)


def resign(
    headers: Mapping[str, str],
    provider: str | None,
    body: bytes,
    secret: str,
    *,
    signature_header: str | None = None,
    url: str = "",
    method: str = "POST",
) -> tuple[dict[str, str], str | None]:
    """Signs a captured request again, in its own scheme and header family, with a fresh timestamp:
    (headers to set, the captured signature header they replace). For replay's ``resign_with`` and
    ``hookyard listen --resign-with``.

    The scheme is the event's provider, else detected from ``headers`` (text names and values as captured);
    an unattributed request gets Standard Webhooks (``webhook-*``). The identity scheme keeps the event's own
    message id (its ``*-id`` header: the idempotency key receivers deduplicate on) and sets the id and
    timestamp headers its libraries read; payments signs ``t=`` now; the signature goes in
    ``signature_header`` when given, else in the scheme's own header (where the provider's library looks).

    A catalog provider beyond the four kinds that a secret signs in a header of its own (Slack's
    ``x-slack-signature``, Twilio's, Zoom's...: HMAC, a token, Basic, a JWS) is signed as that provider signs
    (``shared.providers.sign``), its captured id header kept; ``url`` and ``method`` are where the request goes,
    for those that sign them (Twilio signs the URL). One that signs with a private key (Discord's Ed25519) or
    inside the body cannot be signed with a secret: Standard Webhooks, as an unattributed request.
    """
    entry = _catalog_signed(provider)
    if entry is not None:
        return _resign_as(entry, headers, body, secret, signature_header, url, method)
    scheme, family, names = _names(headers, provider)
    msg_id = None
    if scheme == "identity":
        own = {name.lower(): value for name, value in headers.items()}.get(names[1] or "", "").strip()
        msg_id = own or None
    signed = sign(scheme, body, secret, msg_id=msg_id, header_name=signature_header, header_family=family)
    return signed, names[0]
