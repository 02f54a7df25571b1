"""Fields (dot paths) back into a tree, and the names generated code gives schemas.

A learned schema lists every path with its types, optionality and nullability; code generators want the
nesting back: ``data.object.items[].sku`` is key ``sku`` of the items of the array at ``items`` of the
object at ``object`` of ``data``. ``split_path`` reads the escapes ``control.schemas.shape`` wrote.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from control.schemas.shape import split_path

__all__ = ("Member", "Node", "build", "rows_of", "type_name", "unique_names")


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


def rows_of(fields: Iterable[dict[str, Any]]) -> list[tuple[str, list[str], bool]]:
    """``(path, types, optional)`` of each field (what ``build`` takes)."""
    return [(f["path"], f["types"], f["optional"]) for f in fields]


def build(structure: Iterable[Sequence[Any]]) -> Node:
    """The body's node, from ``(path, types, optional)`` by path (``rows_of``, ``State.cut``): an object whose
    children are the top-level fields. A field's parent (its object, or its array for an item) comes before it
    and is found by its path; a field whose parent is not listed is placed by walking its keys from the body."""
    root = Node(types=["object"])
    by_path: dict[str, Node] = {"": root}
    for path, types, optional in structure:
        node = Node(types=types, optional=bool(optional))
        if path.endswith("[]"):
            array = by_path.get(path[:-2])
            if array is not None and array.items is None:
                by_path[path] = array.items = node
                continue
        elif "\\" not in path:
            cut = path.rfind(".")
            parent = by_path.get(path[:cut] if cut > 0 else "")
            key = path[cut + 1 :]
            if parent is not None and key not in parent.children:
                by_path[path] = parent.children[key] = node
                continue
        by_path[path] = _place(root, path, node)
    return root


def _place(root: Node, path: str, node: Node) -> Node:
    """Puts ``node`` at ``path`` under ``root``, making the nodes between; the node now at ``path``."""
    keys = split_path(path)
    at = root
    for i, (key, levels) in enumerate(keys):
        last = i == len(keys) - 1
        child = at.children.get(key)
        if child is None:
            child = at.children[key] = node if last and not levels else Node()
        at = child
        for level in range(levels):
            if at.items is None:
                at.items = node if last and level == levels - 1 else Node()
            at = at.items
    if at is not node:  # the path was there already (made on the way to a field listed before it)
        at.types, at.optional = node.types, node.optional
    return at


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
