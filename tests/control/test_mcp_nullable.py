"""Every tool's input schema, checked with ``jsonschema`` against what the server decodes: a field whose
record takes ``null`` validates ``null`` (a nullable enum once listed only its strings, so a validating
client refused ``{"provider": null}``, which the server takes and documents), and every parameter has a
description an agent can read. The cases come from the tools' own argument records, not a list."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import jsonschema
import msgspec
import pytest

from control.app import create_app
from control.mcp.catalog import Catalog
from control.mcp.registry import TOOLS
from control.mcp.schemas import operation_parameters
from shared.settings import load_settings


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    app = create_app(load_settings({}, database_url="postgresql://unused", redis_url="redis://unused"))
    return app.openapi_schema.to_schema()


@pytest.fixture(scope="module")
def catalog(document: dict[str, Any]) -> Catalog:
    built = Catalog(TOOLS)
    built.bind(document)
    return built


def _accepts_null(kind: Any) -> bool:
    """The field is declared ``X | None`` (not any JSON that a service checks, as a condition tree is)."""
    info = msgspec.inspect.type_info(kind)
    if isinstance(info, msgspec.inspect.Metadata):
        info = info.type
    return isinstance(info, msgspec.inspect.UnionType) and any(
        isinstance(member, msgspec.inspect.NoneType) for member in info.types
    )


def _nullable(tool: str, document: dict[str, Any]) -> Iterator[str]:
    """The tool's record fields that take null (the /v1 bodies and argument records). Not the /v1 query
    parameters (nor plain arguments, their like): a URL has no null, and a null given for one is "not given",
    dropped before any check (``control.mcp.parameters``)."""
    spec = TOOLS[tool]
    query = operation_parameters(document, spec.operation) if spec.operation else {}
    for record in spec.arguments.records.values():
        for field in msgspec.structs.fields(record):
            if field.encode_name not in query and _accepts_null(field.type):
                yield field.encode_name


def test_every_nullable_argument_validates_null(catalog: Catalog, document: dict[str, Any]) -> None:
    checked = set()
    for tool in catalog.tools:
        schema = tool.input_schema
        jsonschema.Draft202012Validator.check_schema(schema)
        for name in _nullable(tool.name, document):
            prop = {**schema["properties"][name], "$defs": schema.get("$defs", {})}
            errors = [e.message for e in jsonschema.Draft202012Validator(prop).iter_errors(None)]
            assert not errors, f"{tool.name}.{name}: null refused: {errors}"
            checked.add(f"{tool.name}.{name}")
    assert {"update_auth_config.provider", "send_test_webhook.event_type"} <= checked


def test_null_provider_validates_as_a_whole_call(catalog: Catalog, document: dict[str, Any]) -> None:
    by_name = {tool.name: tool for tool in catalog.tools}
    endpoint = "ep_01KAAAAAAAAAAAAAAAAAAAAAAA"
    update = jsonschema.Draft202012Validator(by_name["update_auth_config"].input_schema)
    assert update.is_valid({"endpoint_id": endpoint, "provider": None})
    assert not update.is_valid({"endpoint_id": endpoint, "provider": "no-such-provider"})
    send = jsonschema.Draft202012Validator(by_name["send_test_webhook"].input_schema)
    assert send.is_valid({"endpoint_id": endpoint, "provider": "stripe", "event_type": None})
    # /v1's document says the same (the tools' schemas are copied from it).
    components = document["components"]["schemas"]
    for record, field in (("AuthConfigUpdate", "provider"), ("TriggerSample", "event_type")):
        prop = components[record]["properties"][field]
        assert jsonschema.Draft202012Validator(prop).is_valid(None), f"{record}.{field}"
