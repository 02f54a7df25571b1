"""JSON Schema (draft 2020-12) of one learned schema version, with the union over its endpoints' event types.

The document itself validates a body of the schema's event type. Where its endpoints see several event types,
``$defs`` also holds each one's body schema and, under the union's name (``PaymentsEvent``), a ``oneOf``
over envelopes ``{event_type, payload}``: the discriminated union the TypeScript and zod output export
(``control.schemas.codegen.typescript``), for consumers that validate whatever arrives on one URL.

``required`` lists the fields that are not optional; ``type`` lists every observed type (``null`` for a
nullable field); unknown keys stay allowed. Integers are ``integer``; a field seen both as an integer and a
fraction is ``number``.
"""

from __future__ import annotations

from typing import Any

from control.schemas.codegen.tree import Member, Node

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


def json_schema(members: list[Member], union: str, title: str, description: str) -> dict[str, Any]:
    """``members[0]``: the schema asked for; the rest: the other event types of its endpoints."""
    doc = {"$schema": DIALECT, "title": title, "description": description, **_schema(members[0].node)}
    if len(members) > 1:
        names = {m.name for m in members}
        while union in names:
            union += "Union"
        defs: dict[str, Any] = {m.name: {"title": m.name, **_schema(m.node)} for m in members}
        defs[union] = {
            "title": union,
            "oneOf": [
                {
                    "type": "object",
                    "properties": {"event_type": {"const": m.event_type}, "payload": {"$ref": f"#/$defs/{m.name}"}},
                    "required": ["event_type", "payload"],
                }
                for m in members
            ],
        }
        doc["$defs"] = defs
    return doc
