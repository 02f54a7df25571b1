"""The provider catalog: ``catalog.json`` decoded once into :class:`~shared.providers.model.Provider` entries,
with the two indexes everything else reads.

``BY_HEADER`` maps each recognising header name (bytes, the form the edge's headers arrive in) to its
provider, so the edge recognises a provider with one set intersection over the request's own header names
and one dict lookup, never a scan of the catalog (its cost does not grow with the catalog). ``names`` says
which name a person may use for a provider: its own, an alias (``stripe`` is ``payments``), any case.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

import msgspec

from shared.providers.model import Provider

__all__ = ("BUILTIN", "BY_HEADER", "CATALOG", "NAMES", "RECOGNISING", "canonical", "get")


class _File(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    providers: tuple[Provider, ...]


def _load() -> tuple[Provider, ...]:
    entries = msgspec.json.decode((Path(__file__).parent / "catalog.json").read_bytes(), type=_File).providers
    seen: dict[str, str] = {}
    for entry in entries:
        for name in (entry.name, *entry.aliases):
            if name in seen:  # a catalog that names one provider twice is a bug, found at import
                raise ValueError(f"provider catalog: {name!r} names both {seen[name]} and {entry.name}")
            seen[name] = entry.name
    return entries


CATALOG: Final[dict[str, Provider]] = {entry.name: entry for entry in _load()}
"""Every provider by its own name, in the catalog's order (the four spec kinds first)."""
BUILTIN: Final = tuple(name for name, entry in CATALOG.items() if entry.kind is not None)
"""The four kinds ``shared.signatures`` and ``shared.attribution`` handle with their compiled path."""
NAMES: Final[dict[str, str]] = {name: entry.name for entry in CATALOG.values() for name in (entry.name, *entry.aliases)}
"""Every name a provider may be given (its own and its aliases) → its own name."""


def _by_header() -> dict[bytes, Provider]:
    index: dict[bytes, Provider] = {}
    for entry in CATALOG.values():
        for header in entry.recognise:
            if header.encode() in index:
                raise ValueError(f"provider catalog: header {header!r} recognises two providers")
            index[header.encode()] = entry
    return index


BY_HEADER: Final = _by_header()
"""Recognising header name (lowercase bytes) → provider; each name recognises one provider only."""
RECOGNISING: Final = frozenset(BY_HEADER)


def canonical(name: str) -> str | None:
    """The catalog's own name for ``name`` (an own name or an alias, any case); None when unknown."""
    return NAMES.get(name.strip().lower())


def get(name: str) -> Provider | None:
    own = canonical(name)
    return None if own is None else CATALOG[own]
