"""Correlation-key candidates: id-like fields ranked by how consistently they appear, and the schemas of
the account whose id-like fields share values with them.

Values are collected at learn time as hashes in a KMV sketch per field (the ``SKETCH`` smallest hashes,
``control.schemas.state``): exact below that many distinct values, an estimate above. ``presence`` is the
share of samples with the field; ``distinct_ratio`` distinct values per occurrence; ``score`` is the
presence, scaled down for fields whose values barely vary (below one distinct value in a hundred
occurrences, a status more than an id). Links compare sketches: hashes both hold, below both sketches'
largest, are values both fields carried.
"""

from __future__ import annotations

from typing import Any

from control.schemas.state import SKETCH, Sketch, State

__all__ = ("candidates",)

_SPACE = float(1 << 32)  # control.schemas.state.hash_value


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


def candidates(
    schema_id: str, state: State, paths: set[str], others: list[tuple[dict[str, Any], State]]
) -> list[dict[str, Any]]:
    """Best first. ``paths``: the version's fields; ``others``: (schema record, state) of the account."""
    total = state.total or 1
    out = []
    for path, sketch in state.keys.items():
        stat = state.paths.get(path)
        if path not in paths or stat is None or not sketch.occurrences:
            continue
        presence = min(1.0, stat.n / total)
        ratio = min(1.0, _distinct(sketch) / sketch.occurrences)
        links = []
        for record, other in others:
            for other_path, other_sketch in other.keys.items():
                if record["id"] == schema_id and other_path == path:
                    continue
                shared = _shared(sketch, other_sketch)
                if shared:
                    links.append({**record, "path": other_path, "shared_values": shared})
        links.sort(key=lambda link: (-link["shared_values"], link["schema_id"], link["path"]))
        out.append(
            {
                "path": path,
                "score": round(presence * min(1.0, ratio * 100), 4),
                "presence": round(presence, 4),
                "distinct_ratio": round(ratio, 4),
                "links": links,
            }
        )
    out.sort(key=lambda c: (-c["score"], c["path"]))
    return out
