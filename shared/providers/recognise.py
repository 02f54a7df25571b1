"""Which catalog provider sent a request, and its event type and idempotency key: the edge's step after the
four spec kinds' attribution found none of theirs.

Recognition is one C-level set intersection of the request's header names with every recognising name and
one dict lookup (``catalog.BY_HEADER``): its cost does not grow with the catalog. An endpoint whose
``provider`` is set skips recognition (a GET challenge carries no provider header).
"""

from __future__ import annotations

from shared.attribution import Attribution
from shared.headers import RawHeaders
from shared.providers.catalog import BY_HEADER, RECOGNISING
from shared.providers.model import Provider
from shared.providers.values import Body, read

__all__ = ("attribute_as", "recognise")


def recognise(headers: RawHeaders) -> Provider | None:
    """The provider whose recognising header is present; with several, the first name in sort order."""
    hits = RECOGNISING.intersection(headers)
    if not hits:
        return None
    return BY_HEADER[next(iter(hits)) if len(hits) == 1 else min(hits)]


def attribute_as(provider: Provider, headers: RawHeaders, body: Body) -> Attribution:
    """The request attributed to ``provider``: its name, and the event type and key where its entry says."""
    return Attribution(
        provider.name, read(provider.event_type, headers, body), read(provider.idempotency, headers, body)
    )
