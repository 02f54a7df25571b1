"""Removing an erased value from what a schema learned: the only place a schema keeps values is the KMV
sketch of each id-like field (``control.schemas.state.Sketch``: hashes of the values, what correlation
candidates and their links are computed from). Field names, types and counts are structure, not values.

An erased value goes from every sketch of the schema, whatever the field (a customer id in
``data.object.customer`` is also in ``data.object.metadata.customer_id``). Removing a hash leaves a sketch
that estimates one distinct value fewer, which it now also has; a full sketch cannot know the next-smallest
hash it would have kept instead, so its estimate is a little lower until new values refill it.
"""

from __future__ import annotations

from control.schemas.state import State

__all__ = ("scrub",)


def scrub(state: State, hashes: set[int]) -> int:
    """Removes ``hashes`` from every sketch of ``state`` (in place); answers how many sketches held one."""
    touched = 0
    for sketch in state.keys.values():
        kept = [h for h in sketch.hashes if h not in hashes]
        if len(kept) != len(sketch.hashes):
            sketch.hashes = kept
            touched += 1
    return touched
