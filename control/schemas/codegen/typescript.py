"""TypeScript interfaces and zod schemas from learned fields, with a union over the event types.

Optional fields are optional (``key?:`` / ``.optional()``), nullable ones admit ``null``, as observed.
Objects keep keys the schema never saw (TypeScript interfaces allow them, zod uses ``z.looseObject``): a
provider adding a field must not make a handler reject its events. Integers are ``number`` in TypeScript
and ``z.int()`` in zod. The union is over envelopes ``{event_type, payload}``, so it works alike for
providers that name the event type in the body and for those that send it in a header.
"""

from __future__ import annotations

import json
import re

from control.schemas.codegen.tree import Member, Node

__all__ = ("typescript", "zod")

_IDENT = re.compile(r"^[A-Za-z_$][A-Za-z0-9_$]*$")


def _key(key: str) -> str:
    return key if _IDENT.match(key) else json.dumps(key)


def _ts(node: Node, indent: str) -> str:
    parts: list[str] = []
    for kind in node.kinds:
        if kind == "object":
            parts.append(_ts_object(node, indent) if node.children else "Record<string, unknown>")
        elif kind == "array":
            parts.append(f"Array<{_ts(node.items, indent) if node.items else 'unknown'}>")
        elif kind in ("integer", "number"):
            if "number" not in parts:
                parts.append("number")
        else:
            parts.append(kind)
    if node.nullable:
        parts.append("null")
    return " | ".join(parts) or "unknown"


def _ts_object(node: Node, indent: str) -> str:
    inner = indent + "  "
    lines = [f"{inner}{_key(k)}{'?' if c.optional else ''}: {_ts(c, inner)};" for k, c in node.children.items()]
    return "{\n" + "\n".join(lines) + f"\n{indent}}}"


def typescript(members: list[Member], union: str, header: str) -> str:
    out = [header]
    for m in members:
        out.append(f"export interface {m.name} {_ts_object(m.node, '')}\n")
    out.append(f"export type {union} =")
    out.extend(f"  | {{ event_type: {json.dumps(m.event_type)}; payload: {m.name} }}" for m in members)
    out[-1] += ";"
    return "\n".join(out) + "\n"


def _zod(node: Node, indent: str) -> str:
    parts: list[str] = []
    for kind in node.kinds:
        if kind == "object":
            parts.append(_zod_object(node, indent) if node.children else "z.record(z.string(), z.unknown())")
        elif kind == "array":
            parts.append(f"z.array({_zod(node.items, indent) if node.items else 'z.unknown()'})")
        elif kind == "integer":
            parts.append("z.int()")
        else:
            parts.append(f"z.{kind}()")
    if not parts:
        return "z.null()" if node.nullable else "z.unknown()"
    expr = parts[0] if len(parts) == 1 else f"z.union([{', '.join(parts)}])"
    return f"{expr}.nullable()" if node.nullable else expr


def _zod_object(node: Node, indent: str) -> str:
    inner = indent + "  "
    lines = [
        f"{inner}{_key(k)}: {_zod(c, inner)}{'.optional()' if c.optional else ''}," for k, c in node.children.items()
    ]
    return "z.looseObject({\n" + "\n".join(lines) + f"\n{indent}}})"


def zod(members: list[Member], union: str, header: str, *, with_import: bool = True) -> str:
    out = [header]
    if with_import:
        out.append('import { z } from "zod";\n')
    for m in members:
        out.append(f"export const {m.name}Schema = {_zod_object(m.node, '')};")
        out.append(f"export type {m.name} = z.infer<typeof {m.name}Schema>;\n")
    out.append(f'export const {union}Schema = z.discriminatedUnion("event_type", [')
    out.extend(
        f"  z.object({{ event_type: z.literal({json.dumps(m.event_type)}), payload: {m.name}Schema }}),"
        for m in members
    )
    out.append("]);")
    out.append(f"export type {union} = z.infer<typeof {union}Schema>;")
    return "\n".join(out) + "\n"
