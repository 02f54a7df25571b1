"""Correlation-key candidates: id-like fields ranked by what makes a key useful for joining, and the schemas
of the account whose id-like fields share values with them.

Values are collected at learn time as hashes in a KMV sketch per field (the ``SKETCH`` smallest hashes,
``control.schemas.state``; ``""`` and ``0`` are never kept): exact below that many distinct values, an
estimate above. A field is a candidate only when it carried at least two distinct values: a constant (or a
field that only ever said ``""``) joins nothing. Its ``score`` is the product of four parts, each in the
answer:

- ``presence``: the share of the schema's samples that carried it (a key must be there to join on);
- ``cardinality``: how far its distinct values go towards one per occurrence, on a log scale (``log distinct /
  log min(occurrences, CARDINALITY_SCALE)``): an id is 1, a customer reference seen again and again stays
  high, a status of three values over thousands of events is near 0;
- ``type_stability``: 1 for one type; halved for several (a key both string and integer), 0.8 when it can be
  null;
- links: ``0.5 + 0.5 × min(1, linked_event_types / LINKS_FULL)``, where ``linked_event_types`` counts the
  account's other schemas with a field that carried some of the same values (a field that joins nothing yet
  keeps half its score).

Links compare sketches: hashes both hold, below both sketches' largest, are values both fields carried.
Fields that are not candidates are not linked to either.
"""

from __future__ import annotations

import math
from typing import Any

from control.schemas.state import SKETCH, PathStat, Sketch, State

__all__ = ("CARDINALITY_SCALE", "LINKS_FULL", "candidates")

_SPACE = float(1 << 32)  # control.schemas.state.hash_value
CARDINALITY_SCALE = 1000
"""Occurrences past which a field needs no more distinct values to count as fully varied."""
LINKS_FULL = 2
"""Linked event types at which the links part is full."""


def _distinct(sketch: Sketch) -> float:
    if len(sketch.hashes) < SKETCH:
        return float(len(sketch.hashes))
    return (SKETCH - 1) * _SPACE / max(1, sketch.hashes[-1])


def _shared(a: Sketch, b: Sketch) -> int:
    if not a.hashes or not b.hashes:
        return 0
    bound = min(a.hashes[-1], b.hashes[-1]) if len(a.hashes) >= SKETCH or len(b.hashes) >= SKETCH else None
    common = set(a.hashes).intersection(b.hashes)
    return sum(1 for h in common if bound is None or h <= bound)


def _stability(stat: PathStat) -> float:
    kinds = [t for t in stat.types if t != "null"]
    return (1.0 if len(kinds) <= 1 else 0.5) * (0.8 if "null" in stat.types else 1.0)


def candidates(
    schema_id: str, state: State, paths: set[str], others: list[tuple[dict[str, Any], State]]
) -> list[dict[str, Any]]:
    """Best first. ``paths``: the version's fields; ``others``: (schema record, state) of the account."""
    total = state.total or 1
    keyed = [
        (record, other_path, other_sketch)
        for record, other in others
        for other_path, other_sketch in other.keys.items()
        if len(other_sketch.hashes) >= 2
    ]
    out: list[dict[str, Any]] = []
    for path, sketch in state.keys.items():
        stat = state.paths.get(path)
        if path not in paths or stat is None or not sketch.occurrences or len(sketch.hashes) < 2:
            continue
        distinct = _distinct(sketch)
        presence = min(1.0, stat.n / total)
        cardinality = min(1.0, math.log(distinct) / math.log(max(2, min(sketch.occurrences, CARDINALITY_SCALE))))
        stability = _stability(stat)
        links = []
        for record, other_path, other_sketch in keyed:
            if record["id"] == schema_id and other_path == path:
                continue
            shared = _shared(sketch, other_sketch)
            if shared:
                links.append({**record, "path": other_path, "shared_values": shared})
        links.sort(key=lambda link: (-link["shared_values"], link["schema_id"], link["path"]))
        linked = len({link["schema_id"] for link in links} - {schema_id})
        score = presence * cardinality * stability * (0.5 + 0.5 * min(1.0, linked / LINKS_FULL))
        out.append(
            {
                "path": path,
                "score": round(score, 4),
                "presence": round(presence, 4),
                "distinct": round(distinct),
                "distinct_ratio": round(min(1.0, distinct / sketch.occurrences), 4),
                "cardinality": round(cardinality, 4),
                "type_stability": stability,
                "linked_event_types": linked,
                "links": links,
            }
        )
    out.sort(key=lambda c: (-c["score"], c["path"]))
    return out
