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

import zlib
from collections.abc import Iterable
from typing import Any

import msgspec

from control.schemas.shape import MAX_PATHS, Shape, parent_path

__all__ = (
    "WARMUP",
    "WINDOW",
    "Batch",
    "PathStat",
    "Paths",
    "State",
    "decode_paths",
    "decode_state",
    "decode_structure",
    "encode_state",
    "hash_value",
    "hash_values",
    "structure_bytes",
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
    looked: int = 0
    """Samples whose parent was looked at (or where it was seen): presence is ``n / looked``."""
    opened: int = 0
    """Samples in which it was an object looked at whole: what a late child's misses are counted from."""


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
    """The current version's fields as ``[path, types, optional]``: what the next batch compares to."""


class Paths(msgspec.Struct, kw_only=True):
    """What ``fields`` reads of a State: decoded without the sketches and the cut, which readers of fields
    (every schema answer, generated code) do not need and which weigh as much as the rest."""

    total: int = 0
    paths: dict[str, PathStat] = {}


class _Structure(msgspec.Struct):
    cut: msgspec.Raw = msgspec.Raw(b"\x90")  # an empty list


_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(State)
_paths_decoder = msgspec.msgpack.Decoder(Paths)
_structure_decoder = msgspec.msgpack.Decoder(_Structure)
_rows_decoder = msgspec.msgpack.Decoder(list[tuple[str, list[str], bool]])


def encode_state(state: State) -> bytes:
    return _encoder.encode(state)


def decode_state(data: bytes | None) -> State:
    return State() if not data else _decoder.decode(data)


def decode_paths(data: bytes | None) -> Paths:
    return Paths() if not data else _paths_decoder.decode(data)


def structure_bytes(data: bytes | None) -> bytes:
    """The current version's ``(path, types, optional)`` by path, as of the state's last merge (``State.cut``,
    which every merge leaves equal to ``structure``), still encoded: read without decoding the rest, it is what
    generated code is made of, and what it is cached by (``control.schemas.codegen.memo``)."""
    return b"\x90" if not data else bytes(_structure_decoder.decode(data).cut)


def decode_structure(raw: bytes) -> list[tuple[str, list[str], bool]]:
    """``structure_bytes``, decoded."""
    return _rows_decoder.decode(raw)


class Batch:
    """One batch's samples of one schema, gathered event by event (the cheap part)."""

    __slots__ = ("count", "endpoints", "first_at", "hashes", "last_at", "shapes")

    def __init__(self) -> None:
        self.count = 0
        self.shapes: dict[Shape, int] = {}
        self.hashes: dict[str, set[int]] = {}
        """Per id-like path (``Shape.ids``), the hashes of the values it had (``hash_value``: what sketches
        keep, taken while the bodies are fresh in the cache); occurrences are counted from the shapes."""
        self.endpoints: dict[str, int] = {}
        self.first_at: Any = None
        self.last_at: Any = None

    def absorb(self, other: Batch) -> None:
        """Adds another sender's samples of the same schema (same batch)."""
        self.count += other.count
        for shape, n in other.shapes.items():
            self.shapes[shape] = self.shapes.get(shape, 0) + n
        for path, hashes in other.hashes.items():
            found = self.hashes.get(path)
            if found is None:
                self.hashes[path] = hashes
            else:
                found.update(hashes)
        for endpoint_id, n in other.endpoints.items():
            self.endpoints[endpoint_id] = self.endpoints.get(endpoint_id, 0) + n
        self.first_at = min(self.first_at, other.first_at)
        self.last_at = max(self.last_at, other.last_at)

    def add(self, shape: Shape, count: int, columns: Iterable[Iterable[Any]] | None) -> None:
        """``count`` samples of ``shape``; ``columns``: the values of each of its ``ids`` in them. ``""`` and
        ``0`` are not kept: they say "none", and would link every field that ever carried them."""
        self.shapes[shape] = self.shapes.get(shape, 0) + count
        if columns is not None:
            hashes = self.hashes
            for path, column in zip(shape.ids, columns, strict=True):
                values = set(column)
                values.discard("")
                values.discard(0)
                found = hashes.get(path)
                if found is None:
                    hashes[path] = set(hash_values(values))
                else:
                    found.update(hash_values(values))


def hash_value(value: Any) -> int:
    """A stable 32-bit hash of an id-like value (the same in every process: sketches are merged and compared).
    CRC-32: spread evenly enough for a 256-value sketch, and a few times cheaper than a cryptographic hash."""
    if isinstance(value, str):
        return zlib.crc32(value.encode("utf-8", "surrogatepass"))
    return zlib.crc32(b"#%d" % value)


_crc32, _encode = zlib.crc32, str.encode


def hash_values(values: Iterable[Any]) -> list[int]:
    """``hash_value`` of each; all strings (the usual case) are hashed without a Python call per value."""
    values = values if isinstance(values, list | tuple | set) else list(values)
    try:
        return list(map(_crc32, map(_encode, values)))
    except (TypeError, UnicodeEncodeError):  # an integer, or a lone surrogate
        return list(map(hash_value, values))


def _types(raw: Iterable[str]) -> list[str]:
    types = set(raw)
    if "integer" in types and "number" in types:
        types.discard("integer")
    return sorted(types)


_parents: dict[str, str] = {}


def _parent(path: str) -> str:
    """``parent_path``, remembered: every batch asks it of every path of its schemas."""
    found = _parents.get(path)
    if found is None:
        if len(_parents) >= 100_000:
            _parents.clear()
        found = _parents[path] = parent_path(path)
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
    """A state from before ``looked`` and ``opened`` were counted: what it had counted stands in for them
    (its late fields' misses were over-counted: they wash out as the recent window passes)."""
    state.opened = state.total
    for p in state.paths.values():
        p.looked = p.n + p.absences
        if "object" in p.types:
            p.opened = p.n


def _opened(state: State, path: str) -> int:
    """Samples so far in which ``path`` was an object looked at whole ('' is the body)."""
    if not path:
        return state.opened
    p = state.paths.get(path)
    return p.opened if p is not None and not p.gone else 0


def merge(state: State, batch: Batch) -> None:
    """Adds a batch's samples to ``state`` (in place)."""
    if state.opened < 0:
        _carry_over(state)
    start, end = state.total + 1, state.total + batch.count
    present: dict[str, int] = {}
    types: dict[str, set[str]] = {}
    objects: dict[str, int] = {}
    partial: dict[str, int] = {}
    cut: dict[str, int] = {}
    for shape, n in batch.shapes.items():
        for path, kinds in shape.present:
            present[path] = present.get(path, 0) + n
            types.setdefault(path, set()).update(kinds)
        for path in shape.objects:
            objects[path] = objects.get(path, 0) + n
        for path in shape.partial:
            partial[path] = partial.get(path, 0) + n
        for path in shape.cut:
            cut[path] = cut.get(path, 0) + n
    paths = state.paths
    for path, count in present.items():
        p = paths.get(path)
        if p is None or p.gone:
            if p is None and len(paths) >= MAX_PATHS:
                continue
            # Missed only by the earlier samples that had its parent, looked at whole (an array's item path is
            # never missing: its array is). A field back from gone keeps the sightings it had.
            seen = p.n if p is not None else 0
            looked = seen if path.endswith("[]") else max(seen, _opened(state, _parent(path)))
            missed = looked - seen
            p = paths[path] = PathStat(
                n=seen, first=start, last=end, absent_last=start - 1 if missed else 0, absences=missed, looked=looked
            )
        p.n += count
        p.last = end
        kinds = types[path]
        if not kinds.issubset(p.types):
            p.types = _types([*p.types, *kinds])
    for path, p in paths.items():
        if p.gone:
            continue
        if path.endswith("[]"):  # an array's items are never "missing", only the array
            p.looked += present.get(path, 0)
        else:
            parent_looked = objects.get(_parent(path), 0)
            seen_cut = cut.get(path, 0)
            p.looked += parent_looked + seen_cut
            absent = parent_looked - (present.get(path, 0) - seen_cut) + partial.get(path, 0)
            if absent > 0:
                p.absent_last = end
                p.absences += absent
    for path, count in objects.items():
        if not path:
            state.opened += count
        elif (p := paths.get(path)) is not None:
            p.opened += count
    state.total = end
    # Only a path missing from this batch can have gone (one present is live, and so is its container).
    idle = [path for path, p in paths.items() if not p.gone and path not in present]
    for path in sorted(idle, key=len):  # containers before what they contain
        p = paths[path]
        container = _container(path)
        if not is_live(p, end) or (container and (container not in paths or paths[container].gone)):
            p.gone = True
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


def fields(state: State | Paths) -> list[dict[str, Any]]:
    """The schema's fields as of its state: ``{path, types, optional, nullable, presence}`` by path; presence is
    the share of the samples that looked at its parent in which it was there."""
    return [
        {
            "path": path,
            "types": p.types,
            "optional": not is_required(p, state.total),
            "nullable": "null" in p.types,
            "presence": round(min(1.0, p.n / p.looked), 4) if p.looked else 1.0,
        }
        for path, p in sorted(state.paths.items())
        if not p.gone
    ]


def structure(state: State) -> list[Any]:
    """What a version is made of: ``[path, types, optional]`` of each field (``fields`` without the presence
    ratios, which change with every batch; built for every batch, so without a dict per field)."""
    total = state.total
    return [[path, p.types, not is_required(p, total)] for path, p in sorted(state.paths.items()) if not p.gone]


def next_version(state: State, start: int) -> tuple[int, bool] | None:
    """(version to write, whether it is new) when the fields changed, else None; updates ``state``.
    ``start``: the sample index the batch began at (a batch begun within the warm-up amends version 1)."""
    cut = structure(state)
    if state.version and cut == state.cut:
        return None
    before, state.cut = state.cut, cut
    if state.version == 1 and start <= WARMUP and not retyped(before, cut):
        return 1, False
    state.version += 1
    return state.version, True


def retyped(before: list[Any], after: list[Any]) -> bool:
    """Whether a field of both structures has other types (``null`` included) in ``after``."""
    old = {path: types for path, types, _ in before}
    return any(path in old and old[path] != types for path, types, _ in after)
