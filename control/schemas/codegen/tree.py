"""Fields (dot paths) back into a tree, and the names generated code gives schemas.

A learned schema lists every path with its types, optionality and nullability; code generators want the
nesting back: ``data.object.items[].sku`` is key ``sku`` of the items of the array at ``items`` of the
object at ``object`` of ``data``. ``split_path`` reads the escapes ``control.schemas.shape`` wrote.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from control.schemas.shape import split_path

__all__ = ("Member", "Node", "build", "type_name", "unique_names")


@dataclass(slots=True)
class Node:
    types: list[str] = field(default_factory=list)
    optional: bool = False
    children: dict[str, Node] = field(default_factory=dict)
    items: Node | None = None

    @property
    def nullable(self) -> bool:
        return "null" in self.types

    @property
    def kinds(self) -> list[str]:
        """The non-null types, in a fixed order."""
        order = ("object", "array", "string", "integer", "number", "boolean")
        return [t for t in order if t in self.types]


def build(fields: Iterable[dict[str, Any]]) -> Node:
    """The body's node: an object whose children are the top-level fields."""
    root = Node(types=["object"])
    for f in fields:
        node = root
        for key, levels in split_path(f["path"]):
            node = node.children.setdefault(key, Node())
            for _ in range(levels):
                if node.items is None:
                    node.items = Node()
                node = node.items
        node.types = list(f["types"])
        node.optional = bool(f["optional"])
    return root


@dataclass(frozen=True, slots=True)
class Member:
    """One event type of a generated union."""

    name: str
    event_type: str
    """The discriminator's value: the schema's event type, ``""`` when it has none."""
    node: Node
    schema_id: str
    version: int


def type_name(provider: str | None, event_type: str | None) -> str:
    words = re.findall(r"[A-Za-z0-9]+", f"{provider or 'endpoint'} {event_type or 'event'}")
    name = "".join(w[:1].upper() + w[1:] for w in words)[:120] or "Event"
    return name if not name[0].isdigit() else f"T{name}"


def unique_names(names: list[str]) -> list[str]:
    seen: dict[str, int] = {}
    out = []
    for name in names:
        n = seen.get(name, 0)
        seen[name] = n + 1
        out.append(name if n == 0 else f"{name}{n + 1}")
    return out
