"""The provider catalog: every provider hookyard recognises, verifies and answers the handshake of, as data.

``catalog.json`` holds one entry per provider (``model``: how it is recognised, where its event type and
idempotency key are, its signature scheme as parameters of a few kinds, its handshake, a sample event, and
how its test proves the scheme); ``catalog`` indexes it (one dict lookup by header name); ``values`` reads a
value where an entry says; ``verify`` and ``sign`` are the scheme kinds; ``recognise`` attributes a request;
``handshake`` answers a provider's challenge. The four spec kinds (``payments``, ``commerce``,
``code_host``, ``identity``) are entries too, checked by ``shared.signatures`` with its compiled path, and
their real names (``stripe``...) are aliases. docs/reference/providers.md is generated from the catalog.
"""

from __future__ import annotations

from shared.providers.catalog import BUILTIN, BY_HEADER, CATALOG, NAMES, RECOGNISING, canonical, get
from shared.providers.model import Provider

__all__ = ("BUILTIN", "BY_HEADER", "CATALOG", "NAMES", "RECOGNISING", "Provider", "canonical", "get")
