"""Removing an erased value from what a schema learned: the KMV sketch of each id-like field
(``control.schemas.state.Sketch``: hashes of the values, what correlation candidates and their links are
computed from), and the field names themselves where the value was an object key (a map keyed by customer
id, ``{"balances": {"cus_alice": 12}}``, is learned as the field ``balances.cus_alice``).

An erased value goes from every sketch of the schema, whatever the field (a customer id in
``data.object.customer`` is also in ``data.object.metadata.customer_id``). Removing a hash leaves a sketch
that estimates one distinct value fewer, which it now also has; a full sketch cannot know the next-smallest
hash it would have kept instead, so its estimate is a little lower until new values refill it.

A field named by the value goes with everything under it (``drop_keys``): from the state's paths and
sketches, and from every stored version's fields (``drop_fields``), so ``/v1/schemas``, the versions, their
diff and every generated language lose it alike. The state's digest is then that of the scrubbed structure,
so the next batch does not cut a version for the field's going (a ``removed`` change would name it).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from control.schemas.shape import split_path
from control.schemas.state import State, structure, structure_digest

__all__ = ("drop_fields", "drop_keys", "scrub")


def _escaped(key: str) -> str:
    """A key as it is written inside a path (``control.schemas.shape.join_key``)."""
    return key.replace("\\", "\\\\").replace(".", "\\.").replace("[", "\\[")


def named(path: str, keys: frozenset[str], written: Iterable[str]) -> bool:
    """Whether one of the keys of ``path`` is in ``keys`` (``written``: the keys as paths write them, a quick
    filter before the path is split)."""
    if not any(w in path for w in written):
        return False
    return any(key in keys for key, _ in split_path(path))


def drop_keys(state: State, keys: frozenset[str]) -> int:
    """Removes (in place) every path with one of ``keys`` as an object key, and its sketch; answers how many
    paths went."""
    written = [_escaped(k) for k in keys]
    gone = [path for path in state.paths if named(path, keys, written)]
    for path in gone:
        del state.paths[path]
    for path in [p for p in state.keys if named(p, keys, written)]:
        del state.keys[path]
    cut = [entry for entry in state.cut if not (entry and named(str(entry[0]), keys, written))]
    if gone or len(cut) != len(state.cut):
        state.cut = cut
        if state.version and not state.cut:
            state.digest = structure_digest(structure(state))
        state.due = -1  # recomputed by the next batch
    return len(gone)


def drop_fields(fields: list[dict[str, Any]], keys: frozenset[str]) -> list[dict[str, Any]] | None:
    """A stored version's fields without those named by ``keys``; None when none is."""
    written = [_escaped(k) for k in keys]
    kept = [f for f in fields if not named(str(f.get("path", "")), keys, written)]
    return kept if len(kept) != len(fields) else None


def scrub(state: State, hashes: set[int]) -> int:
    """Removes ``hashes`` from every sketch of ``state`` (in place); answers how many sketches held one."""
    touched = 0
    for sketch in state.keys.values():
        kept = [h for h in sketch.hashes if h not in hashes]
        if len(kept) != len(sketch.hashes):
            sketch.hashes = kept
            touched += 1
    return touched
