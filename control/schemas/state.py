"""What a schema remembers between batches, how a batch of shapes updates it, and the version rule.

Everything is counted in samples (learned events), in arrival order; a batch's samples count as arriving
together at its end. Per path the state keeps how often it was present, when it was first and last seen,
when it was last absent (its parent object present and looked at, the key missing) and how often, in how
many samples its parent was looked at (``looked``: what its presence is a share of), how often it was an
object looked at whole (``opened``: what its children's are counted against), and every type it had.
Presence and absence are relative to the parent: a field first seen late was missing only from the earlier
samples that had its parent, and a parent a bound cut (``control.schemas.shape``) was not looked at.

The version rule (docs/reference/schemas.md): the fields of a schema are derived from its state,
and a new version is cut exactly when they differ from the current version's, which happens only when

- a field appears (``added``);
- a field is absent from its recent window (``removed``): the last ``max(WINDOW, 20 × its mean gap)``
  samples, its mean gap being the samples per sighting over the schema's life, so a rare optional field
  must stay away twenty times longer than it ever did before it is called gone (it does not flap);
- a type appears in it (``type_changed``; types are kept while the field lives), including ``null``
  (``became_nullable``);
- it was present in every one of its last ``max(WINDOW, 20 × its mean gap between absences)`` samples
  (``became_required``); a required field seen missing again is optional at once (the consumer's type
  widens: reported as ``type_changed``).

The first ``WARMUP`` samples amend version 1 instead of cutting new versions when only fields were added or
became optional or required: a schema's first events are too few to tell an optional field from a late one.
A type change (``null`` included) cuts a version at once, in the warm-up too: code generated from version 1
breaks on it.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable
from typing import Any

import msgspec

from control.schemas.batch import Batch, hash_value, hash_values
from control.schemas.shape import MAX_PATHS, parent_path

__all__ = (
    "WARMUP",
    "WINDOW",
    "Batch",
    "PathStat",
    "Paths",
    "State",
    "decode_paths",
    "decode_state",
    "encode_state",
    "hash_value",
    "hash_values",
    "stored_digest",
    "structure_digest",
)

WINDOW = 1000
"""Samples: the least a field must be missing to be removed, or present without a miss to become required."""
WARMUP = 100
"""Samples over which version 1 is still being settled."""
GAPS = 20
"""Mean gaps a field must be away (or present without a miss) before that counts as a change."""
SKETCH = 256
"""Smallest value hashes kept per id-like field (a KMV sketch: distinct counts and overlaps)."""


class PathStat(msgspec.Struct, array_like=True):
    n: int
    first: int
    last: int
    absent_last: int = 0
    """Sample index of its last absence; 0: never absent since the schema's first sample."""
    absences: int = 0
    types: list[str] = []
    gone: bool = False
    opened: int = 0
    """Samples in which it was an object looked at whole: what its children's presence is a share of, and a
    late child's misses are counted from."""
    cut_seen: int = 0
    """Samples where it was seen under an object a bound cut (looked at, though its parent was not whole)."""


class Sketch(msgspec.Struct, array_like=True):
    occurrences: int = 0
    hashes: list[int] = []
    """The smallest value hashes seen, ascending, at most ``SKETCH``."""


class State(msgspec.Struct, kw_only=True):
    total: int = 0
    opened: int = -1
    """Samples whose body was looked at whole (the top-level fields' parent); -1 in a state written before it
    was counted (``merge`` carries such a state over first)."""
    paths: dict[str, PathStat] = {}
    keys: dict[str, Sketch] = {}
    version: int = 0
    cut: list[Any] = []
    """A state written before ``digest``: the current version's fields as ``[path, types, optional]`` (read once
    to carry it over, then emptied)."""
    digest: bytes = b""
    """``structure_digest`` of the current version's fields: what the next batch compares to, and what
    generated code is kept by (``control.schemas.codegen.memo``). The structure itself is not stored: it is
    derived from ``paths``, and would be nearly half of what every batch writes."""
    due: int = -1
    """The sample count at which an optional field has gone its recent window without a miss (becomes
    required): until then, and while no batch changes a field, the structure cannot change. 0: no optional
    field; -1: not known yet."""


class Paths(msgspec.Struct, kw_only=True):
    """What ``fields`` reads of a State: decoded without the sketches and the cut, which readers of fields
    (every schema answer, generated code) do not need and which weigh as much as the rest."""

    total: int = 0
    opened: int = -1
    paths: dict[str, PathStat] = {}


class _Digest(msgspec.Struct):
    digest: bytes = b""


_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(State)
_paths_decoder = msgspec.msgpack.Decoder(Paths)
_digest_decoder = msgspec.msgpack.Decoder(_Digest)


def encode_state(state: State) -> bytes:
    return _encoder.encode(state)


def decode_state(data: bytes | None) -> State:
    return State() if not data else _decoder.decode(data)


def decode_paths(data: bytes | None) -> Paths:
    return Paths() if not data else _paths_decoder.decode(data)


def stored_digest(data: bytes | None) -> bytes:
    """``State.digest`` of an encoded state, read without decoding the rest."""
    return b"" if not data else _digest_decoder.decode(data).digest


def structure_digest(structure: list[Any]) -> bytes:
    """A 128-bit BLAKE2b of a structure (``structure``): equal exactly when the structures are."""
    return hashlib.blake2b(_encoder.encode(structure), digest_size=16).digest()


def _types(raw: Iterable[str]) -> list[str]:
    types = set(raw)
    if "integer" in types and "number" in types:
        types.discard("integer")
    return sorted(types)


_parents: dict[str, str] = {}
_parents_bytes = 0
_PARENTS_MAX_BYTES = 16 * 1024 * 1024
"""What the remembered parents may hold (a path is a sender's key names: bounded in bytes, not count)."""


def _parent(path: str) -> str:
    """``parent_path``, remembered: every batch asks it of every path of its schemas. A plain dict started
    over past its byte bound, not ``BytesLRU``: this lookup runs per path per batch."""
    global _parents_bytes
    found = _parents.get(path)
    if found is None:
        if _parents_bytes >= _PARENTS_MAX_BYTES:
            _parents.clear()
            _parents_bytes = 0
        found = _parents[path] = parent_path(path)
        _parents_bytes += 2 * len(path) + 200  # the key, the parent (a prefix of it) and two objects
    return found


def _container(path: str) -> str:
    return path[:-2] if path.endswith("[]") else _parent(path)


def _mean_gap(span: int, count: int) -> float:
    return span / count if count else float("inf")


def is_required(p: PathStat, total: int) -> bool:
    if p.absent_last == 0:
        return True
    return total - p.absent_last >= max(WINDOW, GAPS * _mean_gap(p.absent_last, p.absences))


def is_live(p: PathStat, total: int) -> bool:
    return not p.gone and total - p.last < max(WINDOW, GAPS * _mean_gap(p.last, p.n))


def _carry_over(state: State) -> None:
    """A state from before ``opened`` was counted: what it had counted stands in for it (its late fields'
    misses were over-counted: they wash out as the recent window passes)."""
    state.opened = state.total
    for p in state.paths.values():
        if "object" in p.types:
            p.opened = p.n


def _opened(state: State | Paths, path: str) -> int:
    """Samples so far in which ``path`` was an object looked at whole ('' is the body)."""
    if not path:
        return state.opened if state.opened >= 0 else state.total
    p = state.paths.get(path)
    return p.opened if p is not None and not p.gone else 0


def _counts(
    batch: Batch,
) -> tuple[dict[str, int], dict[str, frozenset[str]], dict[str, int], dict[str, int], dict[str, int]]:
    """The batch's (present, types, opened objects, partial, cut) per path, summed over its shapes."""
    if len(batch.shapes) == 1:  # the usual case: one shape per schema in a batch
        ((shape, n),) = batch.shapes.items()
        single = dict(shape.present)
        return (
            dict.fromkeys(single, n),
            single,
            dict.fromkeys(shape.objects, n),
            dict.fromkeys(shape.partial, n),
            (dict.fromkeys(shape.cut, n) if shape.cut else {}),
        )
    # Several shapes (of one event type: mostly the same fields): what all of them have is counted at once (set
    # operations, in C), the rest field by field.
    shapes = batch.shapes
    total = sum(shapes.values())
    common = frozenset.intersection(*(shape.pairs for shape in shapes))
    types: dict[str, frozenset[str]] = dict(common)
    present = dict.fromkeys(types, total)
    both = frozenset.intersection(*(shape.objects for shape in shapes))
    objects = dict.fromkeys(both, total)
    partial: dict[str, int] = {}
    cut: dict[str, int] = {}
    for shape, n in shapes.items():
        for path, kinds in shape.pairs - common:
            present[path] = present.get(path, 0) + n
            types[path] = types[path] | kinds if path in types else kinds
        for path in shape.objects - both:
            objects[path] = objects.get(path, 0) + n
        for path in shape.partial:
            partial[path] = partial.get(path, 0) + n
        for path in shape.cut:
            cut[path] = cut.get(path, 0) + n
    return present, types, objects, partial, cut


CHANGED, RETYPED = 1, 2
"""What ``merge`` returns, or-ed: a field was added, newly missed or gone (``CHANGED``); a known field had a
new type, ``null`` included (``RETYPED``, with ``CHANGED``)."""


def merge(state: State, batch: Batch) -> int:
    """Adds a batch's samples to ``state`` (in place); ``CHANGED`` / ``RETYPED`` or 0: what can change the
    structure, besides time (``State.due``).

    Its cost follows the batch's shapes, not the schema: a present field is counted where it is, and the
    missing ones are found as a set difference of the paths (C), each a field not in the batch."""
    if state.opened < 0:
        _carry_over(state)
    start, end = state.total + 1, state.total + batch.count
    present, types, objects, partial, cut = _counts(batch)
    paths = state.paths
    changed = 0
    for path, count in present.items():
        p = paths.get(path)
        if p is None or p.gone:
            if p is None and len(paths) >= MAX_PATHS:
                continue
            # Missed only by the earlier samples that had its parent, looked at whole (an array's item path is
            # never missing: its array is). A field back from gone keeps the sightings it had.
            seen = p.n if p is not None else 0
            missed = 0 if path.endswith("[]") else max(0, _opened(state, _parent(path)) - seen)
            p = paths[path] = PathStat(n=seen, first=start, last=end, absent_last=start - 1 if missed else 0)
            p.absences = missed
            p.types = _types(types[path])
            changed |= CHANGED
        else:
            known = p.types
            for kind in types[path]:
                if kind not in known:  # a field known before this batch, retyped
                    p.types = _types([*known, *types[path]])
                    changed |= CHANGED | RETYPED
                    break
        p.n += count
        p.last = end
    for path, count in cut.items():
        if (p := paths.get(path)) is not None:
            p.cut_seen += count
    # Misses of fields the batch has: only where its shapes differ (or an array's items do).
    check = partial.keys() if len(batch.shapes) == 1 else present.keys()
    for path in check:
        p = paths.get(path)
        if p is not None and not path.endswith("[]"):
            absent = objects.get(_parent(path), 0) - (present[path] - cut.get(path, 0)) + partial.get(path, 0)
            if absent > 0:
                changed |= CHANGED if p.absent_last == 0 or is_required(p, end) else 0
                p.absent_last = end
                p.absences += absent
    # Fields the batch lacks: missed where their parent was looked at; gone when away past their window.
    idle = []
    for path in paths.keys() - present.keys():
        p = paths[path]
        if p.gone:
            continue
        if not path.endswith("[]") and (absent := objects.get(_parent(path), 0)):
            changed |= CHANGED if p.absent_last == 0 or is_required(p, end) else 0
            p.absent_last = end
            p.absences += absent
        if end - p.last >= WINDOW:  # gone is only ever after a window away (its container's too)
            idle.append(path)
    for path, count in objects.items():
        if not path:
            state.opened += count
        elif (p := paths.get(path)) is not None:
            p.opened += count
    state.total = end
    for path in sorted(idle, key=len):  # containers before what they contain
        p = paths[path]
        container = _container(path)
        if not is_live(p, end) or (container and (container not in paths or paths[container].gone)):
            p.gone = True
            changed |= CHANGED
    for path, hashes in batch.hashes.items():
        sketch = state.keys.get(path)
        if sketch is None:
            sketch = state.keys[path] = Sketch()
        sketch.occurrences += present.get(path, 0)
        full = len(sketch.hashes) >= SKETCH
        new = set(filter(sketch.hashes[-1].__gt__, hashes)) if full else set(hashes)  # full: only those below
        new.difference_update(sketch.hashes)  # values seen before (a customer's next event) change nothing
        if new:
            new.update(sketch.hashes)
            sketch.hashes = sorted(new)[:SKETCH]
    return changed


def _looked(state: State | Paths, path: str, p: PathStat) -> int:
    """Samples that looked at the field: those whose parent was looked at whole, and those that saw it under a
    parent a bound cut; an array's items, those that had them."""
    if path.endswith("[]"):
        return p.n
    return _opened(state, _parent(path)) + p.cut_seen


def fields(state: State | Paths) -> list[dict[str, Any]]:
    """The schema's fields as of its state: ``{path, types, optional, nullable, presence}`` by path; presence is
    the share of the samples that looked at its parent in which it was there."""
    out = []
    for path, p in sorted(state.paths.items()):
        if p.gone:
            continue
        looked = _looked(state, path, p)
        out.append(
            {
                "path": path,
                "types": p.types,
                "optional": not is_required(p, state.total),
                "nullable": "null" in p.types,
                "presence": round(min(1.0, p.n / looked), 4) if looked else 1.0,
            }
        )
    return out


def structure(state: State | Paths) -> list[Any]:
    """What a version is made of: ``[path, types, optional]`` of each field (``fields`` without the presence
    ratios, which change with every batch; without a dict per field)."""
    total = state.total
    return [[path, p.types, not is_required(p, total)] for path, p in sorted(state.paths.items()) if not p.gone]


def _due(state: State) -> int:
    """The least sample count at which one of the optional fields turns required."""
    total, due = state.total, 0
    for p in state.paths.values():
        if not p.gone and p.absent_last and not is_required(p, total):
            at = p.absent_last + math.ceil(max(WINDOW, GAPS * _mean_gap(p.absent_last, p.absences)))
            due = at if not due else min(due, at)
    return due


def next_version(state: State, start: int, changed: int = CHANGED) -> tuple[int, bool] | None:
    """(version to write, whether it is new) when the fields changed, else None; updates ``state``.
    ``start``: the sample index the batch began at (a batch begun within the warm-up amends version 1, unless a
    field was retyped); ``changed``: what ``merge`` returned (when 0, the structure is compared only once
    ``State.due``)."""
    if state.version and not changed and (state.due == 0 or 0 < state.total < state.due):
        return None
    if state.cut and not state.digest:  # carried over from the rule that stored the structure
        state.digest, state.cut = structure_digest(state.cut), []
    digest = structure_digest(structure(state))
    state.due = _due(state)
    if state.version and digest == state.digest:
        return None
    state.digest = digest
    if state.version == 1 and start <= WARMUP and not changed & RETYPED:
        return 1, False
    state.version += 1
    return state.version, True
