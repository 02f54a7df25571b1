"""Realistic, correctly signed sample webhooks of the four providers hookyard attributes.

Used by ``send_test_webhook`` (MCP, ``control.service.trigger``) and by ``hookyard trigger``: a sample is
what the provider itself would send for that event, its headers (event name, delivery id, content type,
user agent) and a body of the provider's shape (ids in its formats, timestamps, amounts, nested objects),
signed as the provider signs (``shared.signatures.sign``), so that it is attributed, verified, labelled and
routed exactly as real traffic is. Pure: no I/O, and reproducible when given ``seed`` and ``now``.

=============  ===================================  ==========================================
provider       event name                           idempotency key
=============  ===================================  ==========================================
``identity``   body ``type``                        ``relay-id`` header (``msg_...``)
``commerce``   ``X-Shop-Topic`` header              ``X-Shop-Webhook-Id`` header
``payments``   body ``type``                        body ``id`` (``evt_...``)
``code_host``  ``X-CodeHost-Event`` header          ``X-CodeHost-Delivery`` header
=============  ===================================  ==========================================

``family="neutral"`` uses hookyard's neutral header names (above, docs/reference/signatures.md); ``"vendor"``
the real providers' (``svix-*``, ``X-Shopify-*``, ``Stripe-Signature``, ``X-GitHub-*`` and
``X-Hub-Signature-256``), which is what ``send_test_webhook`` and ``hookyard trigger`` send unless asked for
the neutral ones: the providers' own libraries (``stripe.Webhook.construct_event``, ``svix``) read only their
own names. :data:`ALIASES` lets a person name a provider as they know it (``stripe``, ``clerk``...).
"""

from __future__ import annotations

import random
import time
from types import ModuleType
from typing import Final, Literal, NamedTuple

import msgspec

from shared.providers import CATALOG, canonical
from shared.samples import code_host, commerce, identity, payments
from shared.samples._gen import Gen
from shared.samples.catalog import catalog_sample, handshake_named
from shared.signatures import HEADERS, sign

__all__ = ("ALIASES", "EVENT_TYPES", "PROVIDERS", "Family", "Sample", "not_offered", "provider_name", "sample")

_MODULES: Final[dict[str, ModuleType]] = {
    "identity": identity,
    "commerce": commerce,
    "payments": payments,
    "code_host": code_host,
}
PROVIDERS: Final = tuple(_MODULES)
EVENT_TYPES: Final[dict[str, tuple[str, ...]]] = {
    **{name: module.EVENT_TYPES for name, module in _MODULES.items()},
    **{name: (p.sample.event_type,) for name, p in CATALOG.items() if p.kind is None and p.sample is not None},
}
"""Per provider, the event names it sends (docs/reference/events.md; the code host's are its most common ones);
for the catalog's other providers, their sample event (docs/reference/providers.md)."""

ALIASES: Final[dict[str, str]] = {
    "clerk": "identity",
    "svix": "identity",
    "shopify": "commerce",
    "stripe": "payments",
    "github": "code_host",
}
"""The real providers' names for the providers above (hookyard names them neutrally)."""

Family = Literal["neutral", "vendor"]


def not_offered(provider: str, event_type: str, named: str | None = None) -> str:
    """Why ``provider`` (one of :data:`EVENT_TYPES`; ``named`` as the caller wrote it) has no sample
    ``event_type``, and the ones it has: a provider's handshake is named as such, a request the provider
    makes to verify the URL rather than an event (``handshake_named``)."""
    named = named or provider
    names = ", ".join(EVENT_TYPES[provider])
    why = handshake_named(CATALOG[provider], event_type) if provider in CATALOG else None
    if why:
        return f"{named}'s {event_type!r} {why}; its samples: {names}"
    return f"{named} sends no {event_type!r}; one of {names}"


def provider_name(name: str) -> str | None:
    """The provider ``name`` means: one of :data:`PROVIDERS` or an alias (any case); None when neither."""
    own = canonical(name)
    return own if own in EVENT_TYPES else None


class Sample(NamedTuple):
    provider: str
    event_type: str
    headers: dict[str, str]
    """Lowercased names, text values, ready for an HTTP client (POST)."""
    body: bytes
    idempotency_key: str
    """The provider's delivery id: what a receiver deduplicates on."""
    signature_header: str | None
    """The header carrying the signature; None when unsigned."""


def sample(
    provider: str,
    event_type: str,
    *,
    secret: str | None = None,
    header_name: str | None = None,
    family: Family = "neutral",
    now: float | None = None,
    seed: int | None = None,
    url: str = "",
) -> Sample:
    """A sample of ``provider``'s ``event_type``, signed with ``secret`` (unsigned without one), the signature
    in ``header_name`` when given (an endpoint's custom verification header). ``ValueError`` for a provider
    or event name not listed in :data:`EVENT_TYPES`. ``url`` is where it is sent, for providers that sign it.

    A catalog provider beyond the four kinds sends its catalog sample with its own header names (``family``
    and ``header_name`` do not apply)."""
    names = EVENT_TYPES.get(provider)
    if names is None:
        raise ValueError(f"unknown provider {provider!r}; one of {', '.join(EVENT_TYPES)}")
    if event_type not in names:
        raise ValueError(not_offered(provider, event_type))
    g = Gen(random.Random(seed), time.time() if now is None else now)  # noqa: S311 - sample data, not secrets
    module = _MODULES.get(provider)
    if module is None:
        headers, body, key, signature = catalog_sample(CATALOG[provider], g, secret, url)
        return Sample(provider, event_type, headers, body, key, signature)
    draft = module.draft(event_type, g, family)
    body = msgspec.json.encode(draft.body)
    headers = dict(draft.headers)
    signature_name, id_name, timestamp_name = HEADERS[provider][family]
    if secret is None:
        signature = None
        if id_name is not None and timestamp_name is not None:  # identity: delivery id and time, unsigned
            headers.update({id_name: draft.idempotency_key, timestamp_name: str(g.seconds)})
    else:
        signature = header_name.lower() if header_name else signature_name
        headers.update(
            sign(
                provider,
                body,
                secret,
                msg_id=draft.idempotency_key,
                timestamp=g.seconds,
                header_name=header_name,
                header_family=family,
            )
        )
    return Sample(provider, event_type, headers, body, draft.idempotency_key, signature)
