"""The changes between two versions' fields, each flagged breaking from the consumer's side.

A consumer is code written against the older version. ``removed`` (a field it reads is gone),
``type_changed`` (a value of a type it does not handle) and ``became_nullable`` (a null it does not expect)
break it; ``added`` (a field it does not read) and ``became_required`` (a field it already handles as
optional is now always there) do not. A required field that became optional widens its type for the
consumer (it may now be missing): reported as ``type_changed``, breaking; a nullable field that stopped
being null, likewise a ``type_changed``.
"""

from __future__ import annotations

from typing import Any

__all__ = ("BREAKING", "diff")

BREAKING = {"added": False, "removed": True, "type_changed": True, "became_nullable": True, "became_required": False}


def _non_null(types: list[str]) -> list[str]:
    return [t for t in types if t != "null"]


def diff(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``[{path, change, breaking, before, after}]`` by path; one path may have several changes."""
    old = {f["path"]: f for f in before}
    new = {f["path"]: f for f in after}
    changes: list[dict[str, Any]] = []

    def add(path: str, change: str) -> None:
        changes.append(
            {
                "path": path,
                "change": change,
                "breaking": BREAKING[change],
                "before": old.get(path),
                "after": new.get(path),
            }
        )

    for path in sorted(old.keys() | new.keys()):
        b, a = old.get(path), new.get(path)
        if b is None:
            add(path, "added")
            continue
        if a is None:
            add(path, "removed")
            continue
        widened = (not b["optional"] and a["optional"]) or (b["nullable"] and not a["nullable"])
        if _non_null(b["types"]) != _non_null(a["types"]) or widened:
            add(path, "type_changed")
        if not b["nullable"] and a["nullable"]:
            add(path, "became_nullable")
        if b["optional"] and not a["optional"]:
            add(path, "became_required")
    return changes
