"""OpenAPI helpers: every route documents its error statuses with the envelope they carry, and request
records are documented as strictly as the server reads them (``StrictStructSchemaPlugin``)."""

from __future__ import annotations

import typing
from typing import TYPE_CHECKING, Any

import msgspec
from litestar._openapi.schema_generation.plugins.struct import StructSchemaPlugin
from litestar.openapi import ResponseSpec
from litestar.openapi.spec import OpenAPIType, Reference, Schema
from litestar.typing import FieldDefinition

from control.records.text import DocumentedAs
from shared.errors import ErrorEnvelope

if TYPE_CHECKING:
    from litestar._openapi.schema_generation import SchemaCreator

__all__ = ("StrictStructSchemaPlugin", "described", "errors", "json_schema")

_DESCRIPTIONS = {
    400: "Invalid request: `validation_error` (the message names the field), `invalid_condition_tree`",
    401: "Missing or invalid API key: `unauthorized`",
    403: "`temporary_token` on /v1, a read-only key writing: `forbidden`; an account at a quota (endpoints, "
    "alert destinations): `quota_exceeded`",
    404: "Unknown id, or an id of another account: `not_found`",
    409: "Conflict, e.g. `external_ref_taken`",
    410: "`endpoint_expired`: the endpoint (of this object) is a temporary one past its `expires_at`",
    413: "Body too large: `payload_too_large`",
    415: "A `Content-Encoding` other than `identity` (bodies are taken uncompressed): `unsupported_content_encoding`, "
    "with `Accept-Encoding: identity`",
    429: "Rate limited: `rate_limited`, with `Retry-After`",
}


def errors(*statuses: int) -> dict[int, ResponseSpec]:
    """The envelope's statuses of a /v1 route, each with its description above."""
    # 400 is always documented: Litestar adds its own 400 (with its non-envelope body schema) to every route
    # with parameters or a body, and only a 400 given here replaces it with the envelope that is really sent.
    return described({s: _DESCRIPTIONS[s] for s in {400, *statuses}})


def described(responses: dict[int, str]) -> dict[int, ResponseSpec]:
    """Error responses with the envelope, each described with the codes it carries on this route, and 415:
    every route answers it (``control.api.content_encoding``, a middleware no handler declares), and a
    client generated from the document had no case for it."""
    texts = {415: _DESCRIPTIONS[415], **responses}
    return {
        status: ResponseSpec(data_container=ErrorEnvelope, description=text, generate_examples=False)
        for status, text in sorted(texts.items())
    }


_SUBSCHEMA_KEYS = frozenset(
    {"items", "schema_not", "property_names", "additional_properties", "contains", "schema_if", "then", "schema_else"}
)
_SUBSCHEMA_LISTS = frozenset({"all_of", "any_of", "one_of", "prefix_items"})


def json_schema(document: dict[str, Any]) -> Schema | Reference:
    """A JSON Schema written as a dict (``{"format": "uri"}``, ``{"$ref": ...}``) as Litestar's ``Schema``."""
    if "$ref" in document:
        return Reference(ref=document["$ref"])
    aliases = Schema.field_aliases()
    schema = Schema()
    for key, value in document.items():
        name = aliases.get(key, key)
        if name in _SUBSCHEMA_KEYS and isinstance(value, dict):
            value = json_schema(value)
        elif name in _SUBSCHEMA_LISTS:
            value = [json_schema(item) for item in value]
        elif name == "properties":
            value = {key: json_schema(item) for key, item in value.items()}
        if not hasattr(schema, name):
            raise ValueError(f"not a JSON Schema keyword Litestar knows: {key!r}")
        setattr(schema, name, value)
    return schema


def _extra_json_schema(kind: msgspec.inspect.Type) -> dict[str, Any] | None:
    """The ``extra_json_schema`` of a field's ``msgspec.Meta``, also inside ``X | None`` and ``X | UNSET``."""
    if isinstance(kind, msgspec.inspect.Metadata):
        return kind.extra_json_schema
    if isinstance(kind, msgspec.inspect.UnionType):
        for member in kind.types:
            if (found := _extra_json_schema(member)) is not None:
                return found
    return None


def _documented_as(annotation: Any) -> DocumentedAs | None:
    for part in typing.get_args(annotation):
        if isinstance(part, DocumentedAs):
            return part
        if (found := _documented_as(part)) is not None:
            return found
    return None


class StrictStructSchemaPlugin(StructSchemaPlugin):
    """Documents msgspec Structs as the server reads them, where Litestar's own plugin does not:

    - ``forbid_unknown_fields`` Structs (every request body) get ``additionalProperties: false``;
    - a Struct's ``openapi_extra`` class variable adds JSON Schema keywords to the object (rules between
      fields: ``if``/``then``, ``not``);
    - JSON Schema keywords of ``msgspec.Meta(extra_json_schema=...)`` beyond title, description and examples
      (``format``, a documented ``pattern``, ``propertyNames``...) reach the property's schema;
    - a field annotated with :class:`DocumentedAs` is documented as that type (condition trees are decoded as
      any JSON and checked by the service, whose messages name the offending node).

    Registered on the app, it comes before Litestar's built-in Struct plugin, which it extends. That plugin
    lives in a private module (``litestar._openapi``); litestar is pinned below 3, and the document's own
    tests (tests/control/bad_input/, tests/test_schemathesis.py) fail loudly if it moves or changes."""

    def to_openapi_schema(self, field_definition: FieldDefinition, schema_creator: SchemaCreator) -> Schema:
        schema = super().to_openapi_schema(field_definition, schema_creator)
        info = msgspec.inspect.type_info(field_definition.type_)
        assert isinstance(info, msgspec.inspect.StructType)
        if info.forbid_unknown_fields:
            schema.additional_properties = False
        for key, value in getattr(field_definition.type_, "openapi_extra", {}).items():
            converted = json_schema({key: value})
            name = Schema.field_aliases().get(key, key)
            setattr(schema, name, getattr(converted, name))
        hints = field_definition.get_type_hints(include_extras=True, resolve_generics=True)
        for field in info.fields:
            current = (schema.properties or {}).get(field.encode_name)
            if not isinstance(current, Schema):
                continue
            if (documented := _documented_as(hints[field.name])) is not None:
                described = schema_creator.for_field_definition(FieldDefinition.from_annotation(documented.annotation))
                replacement = described if isinstance(described, Schema) else Schema(one_of=[described])
                replacement.description = replacement.description or current.description
                schema.properties[field.encode_name] = replacement  # type: ignore[index]  # a Schema of an object has properties
                continue
            for key, value in (_extra_json_schema(field.type) or {}).items():
                if key in ("title", "description", "examples"):
                    continue  # Litestar applies these itself
                converted = json_schema({key: value})
                assert isinstance(converted, Schema)
                name = Schema.field_aliases().get(key, key)
                setattr(current, name, getattr(converted, name))
            if current.enum is not None and _accepts_null(current) and None not in current.enum:
                # Litestar puts a nullable field's keywords beside its ``oneOf: [X, null]``, where an enum
                # of X's values alone would refuse the null the server takes.
                current.enum = [*current.enum, None]
        return schema


def _accepts_null(schema: Schema) -> bool:
    """A ``oneOf``/``anyOf`` with a ``null`` branch: how Litestar writes ``X | None``."""
    branches = [*(schema.one_of or ()), *(schema.any_of or ())]
    return any(isinstance(b, Schema) and b.type == OpenAPIType.NULL for b in branches)
