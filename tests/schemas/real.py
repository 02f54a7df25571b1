"""The real payloads the learned-schema tests use (``tests/data/real``, with their licence and origin), and
a reference count of what a schema of them must say, made without the learner's code.

``expected`` walks every payload of an event type plainly (no signatures, no compiled shapes, no bounds but
the documented ``MAX_ITEMS`` items of an array) and counts per path the samples that had it, the samples
whose parent object (or array item) was there, and the samples where its parent was there without it.
"""

from __future__ import annotations

import gzip
import json
from collections import defaultdict
from functools import cache
from pathlib import Path
from typing import Any

from control.schemas.shape import MAX_ITEMS, join_key

__all__ = ("CODE_HOST", "Expected", "by_event_type", "examples", "expected", "provider_schema")

CODE_HOST = Path(__file__).resolve().parents[1] / "data" / "real" / "code_host"


@cache
def examples() -> tuple[tuple[str, dict[str, Any]], ...]:
    """(event type, payload) of every published example, in the package's order."""
    with gzip.open(CODE_HOST / "examples.json.gz") as f:
        return tuple((e["event_type"], e["payload"]) for e in json.load(f))


def by_event_type() -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for event_type, payload in examples():
        out[event_type].append(payload)
    return dict(out)


@cache
def provider_schema() -> dict[str, Any]:
    """The provider's own JSON Schema (``@octokit/webhooks-schemas``): one definition per event and action."""
    with gzip.open(CODE_HOST / "schema.json.gz") as f:
        return json.load(f)


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    return {float: "number", str: "string", dict: "object", list: "array"}[type(value)]


class Expected:
    """Per path: samples with it (``present``), samples whose parent was there or that had it (``looked``),
    samples whose parent was there without it (``absent``), its JSON types."""

    def __init__(self) -> None:
        self.present: dict[str, int] = defaultdict(int)
        self.looked: dict[str, int] = defaultdict(int)
        self.absent: dict[str, int] = defaultdict(int)
        self.types: dict[str, set[str]] = defaultdict(set)
        self.parent: dict[str, str] = {}
        self.samples = 0

    def add(self, payload: dict[str, Any]) -> None:
        self.samples += 1
        present: set[str] = set()
        parents: dict[str, list[set[str]]] = defaultdict(list)  # object path → each object's keys there

        def walk(value: Any, path: str) -> None:
            kind = _kind(value)
            if path:
                present.add(path)
                self.types[path].add(kind)
            if kind == "object":
                parents[path].append({join_key(path, k) for k in value})
                for k, v in value.items():
                    self.parent[join_key(path, k)] = path
                    walk(v, join_key(path, k))
            elif kind == "array":
                for item in value[:MAX_ITEMS]:
                    walk(item, path + "[]")

        walk(payload, "")
        for path in present:
            self.present[path] += 1
        known = set(self.present)
        for path in known:
            if path.endswith("[]"):
                self.looked[path] += path in present
                continue
            seen = parents.get(self.parent[path])
            if seen is None:  # its parent was not there: this sample says nothing of it
                continue
            self.looked[path] += 1
            if not all(path in keys for keys in seen):  # an object (or an item) without it
                self.absent[path] += 1

    def field(self, path: str) -> dict[str, Any]:
        types = set(self.types[path])
        if {"integer", "number"} <= types:
            types.discard("integer")
        return {
            "types": sorted(types),
            "optional": self.absent[path] > 0,
            "presence": round(self.present[path] / self.looked[path], 4),
        }


def expected(payloads: list[dict[str, Any]]) -> Expected:
    """The reference counts over ``payloads``, each sample counted against every path of them all: a path
    first seen at sample k was missing from the earlier samples that had its parent."""
    first = Expected()
    for payload in payloads:
        first.add(payload)
    out = Expected()
    out.present = defaultdict(int, dict.fromkeys(first.present, 0))
    out.parent = first.parent
    for payload in payloads:
        out.add(payload)
    return out
