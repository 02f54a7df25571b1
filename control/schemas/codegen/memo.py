"""Generated code kept by what it is made of: a schema version's structure, exactly.

Generated code depends only on the structure of the versions it covers (each field's path, types and
optional flag), on the provider and event types (names) and on what was asked (language, framework, union);
the header line (schema id, version, sample count) is added per answer. So each answer's text, less its
header, is kept under a key holding those inputs with the structures' encoded bytes themselves: a structure
that changes (a new version, a warm-up amendment) is another key, never a stale answer, and two schemas
(two accounts) share an entry only when their code is the same text. Learning rewrites a schema's state with
every batch, but its structure only when a version changes, so under live traffic the same key keeps being
asked for. Bounded by what the entries weigh (text and keys), least recently used out first.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable

__all__ = ("HEADER", "CodeCache")

HEADER = "@@hookyard-header@@"
"""Stands for the header, replaced per answer: its first occurrence is the header's place (the text's start;
JSON Schema's description, which comes before any field)."""


def _weight(key: Hashable) -> int:
    if isinstance(key, bytes | str):
        return len(key)
    if isinstance(key, tuple):
        return 8 + sum(_weight(k) for k in key)
    return 8


class CodeCache:
    def __init__(self, budget: int = 32 * 1024 * 1024) -> None:
        self._entries: OrderedDict[Hashable, tuple[str, int]] = OrderedDict()
        self._weight = 0
        self.budget = budget

    def get(self, key: Hashable) -> str | None:
        found = self._entries.get(key)
        if found is None:
            return None
        self._entries.move_to_end(key)
        return found[0]

    def put(self, key: Hashable, text: str) -> None:
        weight = len(text) + _weight(key)
        if weight > self.budget // 4:
            return  # one answer never pushes out most of the others
        old = self._entries.pop(key, None)
        if old is not None:
            self._weight -= old[1]
        self._entries[key] = (text, weight)
        self._weight += weight
        while self._weight > self.budget:
            _, (_, dropped) = self._entries.popitem(last=False)
            self._weight -= dropped

    def __len__(self) -> int:
        return len(self._entries)
