"""JSON Schemas of the tools: inputs from the /v1 OpenAPI document, outputs from the response records.

Input. A tool that mirrors a /v1 operation takes exactly that operation's inputs (path and query
parameters, and the fields of its JSON body) with exactly their documented constraints, copied from the
app's own OpenAPI document: the document is tested to be as strict as the server (schemathesis, the
bad-input tests), so the tool schemas are too, and cannot drift from it; only an optional parameter also
takes null, which a URL cannot say and a tool reads as "not given", and so does an optional body field
that /v1 would refuse as null (``Arguments.null_as_absent``). A tool's argument typed to take an integer
where /v1 reads text (a schema version: ``1`` as well as ``"1"``) takes both (``integer_text``). A tool of
its own (no /v1 operation) is described by its argument records, through msgspec, like any record.

Output. None listed (ADR 0092): a result is the record's JSON, text and structured content alike, the
/v1 response of the same operation; its schema, repeated per tool (no ``$defs`` are shared between
tools), was half of tools/list, which an agent reads on every session, and no client needs it to call.

An input schema is self-contained: one object schema with its ``$defs``, every ``$ref`` local to it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import msgspec

from control.mcp.arguments import Arguments

__all__ = (
    "find_operation",
    "integer_text",
    "operation_input_schema",
    "operation_parameters",
    "own_schemas",
    "plain_parameters",
    "record_input_schema",
)

_COMPONENTS = "#/components/schemas/"
_DEFS = "#/$defs/"


def _refs(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                yield value
            else:
                yield from _refs(value)
    elif isinstance(node, list):
        for item in node:
            yield from _refs(item)


def _rewrite(node: Any, old: str, new: str) -> Any:
    if isinstance(node, dict):
        return {
            k: (new + v[len(old) :] if k == "$ref" and v.startswith(old) else _rewrite(v, old, new))
            for k, v in node.items()
        }
    if isinstance(node, list):
        return [_rewrite(item, old, new) for item in node]
    return node


def _closure(root: Any, definitions: dict[str, Any], prefix: str) -> dict[str, Any]:
    """The definitions ``root`` needs, directly or through each other."""
    needed: dict[str, Any] = {}
    pending = [ref[len(prefix) :] for ref in _refs(root) if ref.startswith(prefix)]
    while pending:
        name = pending.pop()
        if name in needed:
            continue
        needed[name] = definitions[name]
        pending.extend(ref[len(prefix) :] for ref in _refs(needed[name]) if ref.startswith(prefix))
    return needed


def _with_defs(schema: dict[str, Any], definitions: dict[str, Any], prefix: str) -> dict[str, Any]:
    needed = _closure(schema, definitions, prefix)
    out: dict[str, Any] = _rewrite(schema, prefix, _DEFS)
    if needed:
        out["$defs"] = _rewrite(needed, prefix, _DEFS)
    return out


def _struct_schema(struct: type[msgspec.Struct]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the Struct's own object schema, the definitions it refers to) as msgspec writes them."""
    generated = msgspec.json.schema(struct)
    definitions = generated.get("$defs", {})
    top = dict(definitions[generated["$ref"].rsplit("/", 1)[1]])
    top.pop("title", None)
    return top, definitions


def _described_at_top(properties: dict[str, Any]) -> dict[str, Any]:
    """msgspec writes ``X | None``'s description inside X's ``anyOf`` branch; an agent reads the property's."""
    out = {}
    for name, prop in properties.items():
        branches = [b for b in prop.get("anyOf", ()) if b.get("description")]
        if "description" not in prop and len(branches) == 1:
            prop = {**prop, "description": branches[0]["description"]}
        out[name] = prop
    return out


def record_input_schema(arguments: Arguments) -> dict[str, Any]:
    """A tool of its own: its plain arguments and argument records, merged into one object; a record's
    ``openapi_extra`` (rules between fields, as the OpenAPI plugin reads it) applies to the whole."""
    properties: dict[str, Any] = {}
    required: list[str] = []
    extra: dict[str, Any] = {}
    definitions: dict[str, Any] = {}
    for struct in (arguments.plain, *arguments.records.values()):
        top, defs = _struct_schema(struct)
        properties.update(_described_at_top(top.get("properties", {})))
        required += top.get("required", [])
        extra.update(getattr(struct, "openapi_extra", {}))
        definitions.update(defs)
    for name in arguments.null_as_absent & properties.keys():
        properties[name] = _or_null(properties[name])
    schema = {"type": "object", "properties": properties, "required": required, "additionalProperties": False}
    return _with_defs({**schema, **extra}, definitions, _DEFS)


def plain_parameters(arguments: Arguments) -> dict[str, dict[str, Any]]:
    """A tool of its own: its plain arguments (the path and query parameters it would have) → their schemas."""
    properties: dict[str, dict[str, Any]] = _struct_schema(arguments.plain)[0].get("properties", {})
    return properties


def own_schemas(arguments: Arguments) -> dict[str, dict[str, Any]]:
    """Every argument's schema as the tool's own types say (plain arguments and record fields), by msgspec."""
    out: dict[str, dict[str, Any]] = {}
    for struct in (arguments.plain, *arguments.records.values()):
        top, definitions = _struct_schema(struct)
        out.update({name: _with_defs(prop, definitions, _DEFS) for name, prop in top.get("properties", {}).items()})
    return out


def _integer_branch(schema: dict[str, Any]) -> dict[str, Any] | None:
    return next((b for b in schema.get("anyOf", [schema]) if b.get("type") == "integer"), None)


def integer_text(
    parameters: dict[str, dict[str, Any]], own: dict[str, dict[str, Any]]
) -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
    """The /v1 parameters that /v1 reads as text (``"type": "string"``) but the tool's own type takes as an
    integer too: name → (the integer's schema, the tool's whole schema). A URL has only text, so /v1 says
    ``version`` is ``"^(?:current|[1-9]...)$"``; in JSON a version is the number it is, and an agent sends
    ``1``. The parameter checker then leaves them to the tool's decoder (``control.mcp.parameters``)."""
    found = {}
    for name, schema in parameters.items():
        branch = _integer_branch(own.get(name, {}))
        if schema.get("type") == "string" and branch is not None:
            found[name] = (branch, own[name])
    return found


def find_operation(document: dict[str, Any], operation_id: str) -> tuple[str, str, dict[str, Any]]:
    """(method, path, operation) of ``operation_id`` in the OpenAPI document."""
    for path, item in document["paths"].items():
        for method, operation in item.items():
            if isinstance(operation, dict) and operation.get("operationId") == operation_id:
                return method, path, operation
    raise LookupError(f"no operation {operation_id!r} in the OpenAPI document")


def operation_parameters(document: dict[str, Any], operation_id: str) -> dict[str, dict[str, Any]]:
    """The operation's path and query parameters: name → schema (with the parameter's description). What
    /v1 reads from a URL's text, and a tool from its JSON arguments (``control.mcp.parameters``)."""
    _, _, operation = find_operation(document, operation_id)
    parameters: dict[str, dict[str, Any]] = {}
    for parameter in operation.get("parameters", []):
        if parameter["in"] not in ("path", "query"):
            raise ValueError(f"{operation_id}: a {parameter['in']} parameter has no tool argument")
        schema = dict(parameter["schema"])
        if parameter.get("description"):
            schema.setdefault("description", parameter["description"])
        parameters[parameter["name"]] = schema
    return parameters


# What a client reads off the property itself (an agent its description, a form its default), not off a branch.
_ANNOTATIONS = ("title", "description", "default", "examples", "deprecated")


def _or_null(schema: dict[str, Any]) -> dict[str, Any]:
    """An optional parameter's schema that also takes null: the server reads a null one as "not given"
    (``control.mcp.parameters.given``), so a client that validates arguments must not refuse it. Its constraints
    go into the first branch, where they apply to the value and not to null; its annotations stay at the top.
    The parameter checker keeps the plain schema (``operation_parameters``): it sees no null."""
    branch = {k: v for k, v in schema.items() if k not in _ANNOTATIONS}
    return {"anyOf": [branch, {"type": "null"}], **{k: v for k, v in schema.items() if k in _ANNOTATIONS}}


def _with_integer(schema: dict[str, Any], integer: dict[str, Any]) -> dict[str, Any]:
    """A text parameter's schema that also takes the integer its text spells (``integer_text``)."""
    plain = [{k: v for k, v in schema.items() if k not in _ANNOTATIONS}]
    branches, null = (schema["anyOf"][:-1], schema["anyOf"][-1:]) if "anyOf" in schema else (plain, [])
    notes = {k: v for k, v in schema.items() if k in _ANNOTATIONS}
    return {"anyOf": [integer, *branches, *null], **notes}


def operation_input_schema(
    document: dict[str, Any],
    operation_id: str,
    arguments: Arguments,
) -> dict[str, Any]:
    """The operation's path and query parameters and its JSON body's fields as one object schema; an
    optional body field that /v1 refuses as null takes it (``Arguments.null_as_absent``), and a text
    parameter the tool takes as an integer too says so (``integer_text``)."""
    _, _, operation = find_operation(document, operation_id)
    components = document.get("components", {}).get("schemas", {})
    required = [p["name"] for p in operation.get("parameters", []) if p.get("required")]
    parameters = operation_parameters(document, operation_id)
    integers = integer_text(parameters, own_schemas(arguments))
    properties: dict[str, Any] = {
        name: schema if name in required else _or_null(schema) for name, schema in parameters.items()
    }
    for name, (integer, _) in integers.items():
        properties[name] = _with_integer(properties[name], integer)
    extra: dict[str, Any] = {}
    body = operation.get("requestBody")
    if body is not None:
        ref = body["content"]["application/json"]["schema"]["$ref"]
        record = dict(components[ref.removeprefix(_COMPONENTS)])
        clash = properties.keys() & record.get("properties", {}).keys()
        if clash:
            raise ValueError(f"{operation_id}: body fields {sorted(clash)} repeat a parameter's name")
        fields = record.pop("properties", {})
        properties.update({k: _or_null(v) if k in arguments.null_as_absent else v for k, v in fields.items()})
        required += record.pop("required", [])
        for key in ("type", "title", "description", "additionalProperties", "default"):
            record.pop(key, None)  # ``default``: an optional body's (the record itself, not JSON)
        extra = record  # rules between fields: not, if/then
    schema = {"type": "object", "properties": properties, "required": required, "additionalProperties": False}
    return _with_defs({**schema, **extra}, components, _COMPONENTS)
