"""One batch's samples of one schema, gathered event by event in the flush (the cheap part of learning), and
the stable hash its id-like values are kept by (``control.schemas.state`` merges it into the schema)."""

from __future__ import annotations

import zlib
from collections.abc import Iterable
from typing import Any

from control.schemas.shape import Shape

__all__ = ("Batch", "hash_value", "hash_values")


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
