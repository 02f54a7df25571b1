"""The tools as an agent lists them (the official client, in process), checked with ``jsonschema`` against
what the server decodes: a field whose record takes ``null`` validates ``null`` (a nullable enum once listed
only its strings, so a validating client refused ``{"provider": null}``, which the server takes and
documents), every optional /v1 parameter validates ``null`` (the server reads it as "not given") and every
required one refuses it, every parameter has a description, and the descriptions say what each surface
answers. The cases come from the tools' own argument records and the OpenAPI document, not a list."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import jsonschema
import msgspec
import pytest

from control.app import create_app
from control.mcp.registry import TOOLS
from control.mcp.schemas import find_operation, operation_parameters, plain_parameters
from shared.settings import load_settings
from tests.events_support import live_app
from tests.mcp_client import connected


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    app = create_app(load_settings({}, database_url="postgresql://unused", redis_url="redis://unused"))
    return app.openapi_schema.to_schema()


async def _listed(settings, account) -> dict[str, Any]:
    async with live_app(settings) as (_, app), connected(app, account.key) as client:
        return {tool.name: tool for tool in (await client.list_tools()).tools}


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
    parameters (nor plain arguments, their like): a URL has no null, and a null given for an optional one is
    "not given", dropped before any check (``control.mcp.parameters``); ``_parameters`` has those."""
    spec = TOOLS[tool]
    query = operation_parameters(document, spec.operation) if spec.operation else {}
    for record in spec.arguments.records.values():
        for field in msgspec.structs.fields(record):
            if field.encode_name not in query and _accepts_null(field.type):
                yield field.encode_name


async def test_every_nullable_argument_validates_null(settings, account, document: dict[str, Any]) -> None:
    tools, checked = await _listed(settings, account), set()
    assert set(tools) == set(TOOLS)
    for name, tool in tools.items():
        schema = tool.input_schema
        jsonschema.Draft202012Validator.check_schema(schema)
        for field in _nullable(name, document):
            prop = {**schema["properties"][field], "$defs": schema.get("$defs", {})}
            errors = [e.message for e in jsonschema.Draft202012Validator(prop).iter_errors(None)]
            assert not errors, f"{name}.{field}: null refused: {errors}"
            checked.add(f"{name}.{field}")
    assert {"update_auth_config.provider", "send_test_webhook.event_type"} <= checked
    endpoint = "ep_01KAAAAAAAAAAAAAAAAAAAAAAA"
    update = jsonschema.Draft202012Validator(tools["update_auth_config"].input_schema)
    assert update.is_valid({"endpoint_id": endpoint, "provider": None})
    assert not update.is_valid({"endpoint_id": endpoint, "provider": "no-such-provider"})
    send = jsonschema.Draft202012Validator(tools["send_test_webhook"].input_schema)
    assert send.is_valid({"endpoint_id": endpoint, "provider": "stripe", "event_type": None})


def _parameters(tool: str, document: dict[str, Any], required: list[str]) -> Iterator[tuple[str, bool]]:
    """(name, required) of each of the tool's /v1 path and query parameters, as the document declares them;
    for a tool of its own, its plain arguments (required as its schema says)."""
    spec = TOOLS[tool]
    if spec.operation is None:
        yield from ((name, name in required) for name in plain_parameters(spec.arguments))
        return
    for parameter in find_operation(document, spec.operation)[2].get("parameters", []):
        yield parameter["name"], bool(parameter.get("required"))


async def test_optional_parameters_validate_null_required_refuse_it(settings, account, document) -> None:
    """The server reads a null optional parameter as "not given" (``control.mcp.parameters.given``) and refuses
    a null required one; a client validating against the listed schema must agree with both. Its constraints
    still hold for any other value."""
    tools, optional, required = await _listed(settings, account), set(), set()
    for name, tool in tools.items():
        schema = tool.input_schema
        for parameter, needed in _parameters(name, document, schema["required"]):
            prop = {**schema["properties"][parameter], "$defs": schema.get("$defs", {})}
            takes_null = jsonschema.Draft202012Validator(prop).is_valid(None)
            assert takes_null is not needed, f"{name}.{parameter} (required: {needed}): null valid is {takes_null}"
            (required if needed else optional).add(f"{name}.{parameter}")
            assert (parameter in schema["required"]) is needed, f"{name}.{parameter}"
    assert {"list_events.since", "list_events.limit", "list_deliveries.success", "wait_for_event.timeout"} <= optional
    assert {"get_event.event_id", "wait_for_event.endpoint_id"} <= required
    listing = jsonschema.Draft202012Validator(tools["list_events"].input_schema)
    endpoint = {"endpoint_id": "ep_01KAAAAAAAAAAAAAAAAAAAAAAA"}
    assert listing.is_valid({**endpoint, "since": None, "provider": None, "limit": None, "signature_valid": None})
    assert not listing.is_valid({**endpoint, "limit": 0}), "the document's range still applies to a number"
    assert not listing.is_valid({**endpoint, "provider": "no-such-provider"})
    assert not listing.is_valid({"endpoint_id": None})
    assert not jsonschema.Draft202012Validator(tools["get_event"].input_schema).is_valid({"event_id": None})


def test_v1_document_takes_null_where_its_records_do(document: dict[str, Any]) -> None:
    components = document["components"]["schemas"]
    for record, field in (("AuthConfigUpdate", "provider"), ("TriggerSample", "event_type")):
        prop = components[record]["properties"][field]
        assert jsonschema.Draft202012Validator(prop).is_valid(None), f"{record}.{field}"


async def test_every_parameter_has_a_description(settings, account) -> None:
    tools = await _listed(settings, account)
    missing = [
        f"{name}.{field}"
        for name, tool in tools.items()
        for field, prop in tool.input_schema["properties"].items()
        if not str(prop.get("description", "")).strip()
    ]
    assert not missing, f"parameters without a description: {missing}"


async def test_descriptions_say_what_each_surface_does(settings, account) -> None:
    tools = await _listed(settings, account)
    wait = tools["wait_for_event"].description
    assert "/v1 answers 200" in wait
    assert "204 with no body" in wait
    assert "`timed_out`" in wait
    assert "(204, no body)" not in wait
    auth = tools["update_auth_config"].description
    assert "No algorithm is configured" not in auth
    assert "with `provider` the" in auth
    update = tools["update_endpoint"].description
    for field in ("expect_event_within_s", "signature_failure_alert_threshold", "body_retention_days", "response"):
        assert f"`{field}`" in update, field
    rotate = tools["rotate_signing_secret"].description
    assert "makes every delivery fail" not in rotate
    assert "inbound request signed with the previous" in rotate
    assert "no overlap" in rotate
