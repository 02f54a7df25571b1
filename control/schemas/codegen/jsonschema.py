"""JSON Schema (draft 2020-12) of one learned schema version.

``required`` lists the fields that are not optional; ``type`` lists every observed type (``null`` for a
nullable field); unknown keys stay allowed. Integers are ``integer``; a field seen both as an integer and a
fraction is ``number``.
"""

from __future__ import annotations

from typing import Any

from control.schemas.codegen.tree import Node

__all__ = ("json_schema",)

DIALECT = "https://json-schema.org/draft/2020-12/schema"


def _schema(node: Node) -> dict[str, Any]:
    types = [*node.kinds, *(["null"] if node.nullable else [])]
    out: dict[str, Any] = {}
    if types:
        out["type"] = types[0] if len(types) == 1 else types
    if "object" in types and node.children:
        out["properties"] = {k: _schema(c) for k, c in node.children.items()}
        required = [k for k, c in node.children.items() if not c.optional]
        if required:
            out["required"] = required
    if "array" in types and node.items is not None:
        out["items"] = _schema(node.items)
    return out


def json_schema(node: Node, title: str, description: str) -> dict[str, Any]:
    return {"$schema": DIALECT, "title": title, "description": description, **_schema(node)}
