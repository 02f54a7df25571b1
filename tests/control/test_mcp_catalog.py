"""The MCP tool catalog, in process: one tool per /v1 operation (a route added without its tool fails here),
names, hints, and schemas taken from the OpenAPI document and the records; plus what needs no real process:
an unknown tool, and Postgres away (``unavailable``) through the official client over the ASGI app."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import asyncpg
import jsonschema
import msgspec
import pytest
from mcp.shared.exceptions import MCPError
from redis.exceptions import ConnectionError as RedisConnectionError

from control.app import create_app
from control.mcp.catalog import Catalog
from control.mcp.errors import failure_result
from control.mcp.registry import TOOLS, snake_case
from control.mcp.schemas import find_operation
from control.records.events import EventWithDeliveries
from shared.errors import NotFoundError, ValidationError
from shared.settings import load_settings
from tests.events_support import live_app
from tests.helpers import assert_error, refusing_connections
from tests.mcp_client import connected

VERBS = {"list", "get", "create", "update", "delete", "add", "rotate", "replay", "retry", "test", "wait", "send"}
VERBS |= {"erase", "disable", "enable", "record"}


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    app = create_app(load_settings({}, database_url="postgresql://unused", redis_url="redis://unused"))
    return app.openapi_schema.to_schema()


@pytest.fixture(scope="module")
def catalog(document: dict[str, Any]) -> Catalog:
    built = Catalog(TOOLS)
    built.bind(document)
    return built


def _operations(document: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, item in document["paths"].items():
        for method, operation in item.items():
            yield method.upper(), path, operation


def test_every_v1_operation_has_its_tool(document: dict[str, Any], catalog: Catalog) -> None:
    v1 = [(m, p, op) for m, p, op in _operations(document) if p.startswith("/v1/")]
    assert len(v1) >= 28
    for method, path, operation in v1:
        name = snake_case(operation["operationId"])
        assert name in TOOLS, f"{method} {path} ({operation['operationId']}) has no MCP tool {name!r}"
        assert TOOLS[name].operation == operation["operationId"]
        assert catalog.routes[name] == (method, path)
    names = [tool.name for tool in catalog.tools]
    assert names == list(dict.fromkeys(names)), "a tool is listed twice"
    assert set(names) == set(TOOLS)
    assert names[:2] == ["list_endpoints", "create_endpoint"], "listed in the document's order"


def test_names_are_snake_case_verbs(catalog: Catalog) -> None:
    for tool in catalog.tools:
        assert re.fullmatch(r"[a-z]+(?:_[a-z]+)*", tool.name), tool.name
        assert tool.name.split("_")[0] in VERBS, tool.name


def test_hints_follow_the_http_method(document: dict[str, Any], catalog: Catalog) -> None:
    for tool in catalog.tools:
        hints, spec = tool.annotations, TOOLS[tool.name]
        assert hints is not None
        assert hints.title == tool.title
        assert None not in (hints.read_only_hint, hints.destructive_hint, hints.idempotent_hint, hints.open_world_hint)
        method = catalog.routes.get(tool.name, ("POST", ""))[0]
        assert hints.read_only_hint is (method == "GET"), tool.name
        if method == "DELETE":
            assert hints.destructive_hint, tool.name
            assert hints.idempotent_hint, tool.name
        if hints.read_only_hint:
            assert not hints.destructive_hint, tool.name
            assert hints.idempotent_hint, tool.name
        assert hints.open_world_hint is (tool.name in {"replay_event", "test_destination"}), tool.name
        assert spec.summary, tool.name
        # A mirrored operation's description leads (the summary says it shorter); else the summary does.
        operation = find_operation(document, spec.operation)[2] if spec.operation else {}
        assert tool.description.startswith((operation.get("description") or spec.summary)[:40]), tool.name
    by_name = {tool.name: tool for tool in catalog.tools}
    assert by_name["rotate_signing_secret"].annotations.destructive_hint
    assert not by_name["send_test_webhook"].annotations.idempotent_hint
    # The operation's own description is the tool's: replay's rules are all there.
    assert "`resign_with` recomputes the signature" in by_name["replay_event"].description


def test_input_schemas_take_exactly_the_decoded_arguments(catalog: Catalog) -> None:
    for tool in catalog.tools:
        schema, names = tool.input_schema, TOOLS[tool.name].arguments.names
        assert schema["type"] == "object"
        assert schema["additionalProperties"] is False
        assert set(schema["properties"]) == set(names), tool.name
        assert set(schema["required"]) == {name for name, required in names.items() if required}, tool.name
        jsonschema.Draft202012Validator.check_schema(schema)
        assert tool.output_schema is None, "a result is the record's JSON, as /v1's (ADR 0092)"
        for name, prop in schema["properties"].items():
            assert prop, f"{tool.name}.{name} has an empty schema"


def test_input_schemas_are_the_documents(document: dict[str, Any], catalog: Catalog) -> None:
    """As strict as the OpenAPI document, because they are the document's: parameters and body fields."""
    by_name = {tool.name: tool for tool in catalog.tools}
    components = document["components"]["schemas"]
    create = by_name["create_endpoint"].input_schema["properties"]
    assert create["name"] == components["EndpointCreate"]["properties"]["name"]
    assert create["name"]["pattern"] == r"^[^\x00]*[^\x00-\x20\x7f][^\x00]*$"  # the documented rule, not msgspec's
    listing = by_name["list_events"].input_schema["properties"]
    # An optional parameter: the document's constraints in a branch beside null (the server reads a null one as
    # "not given"), its description and default where a client reads them, on the property.
    assert listing["limit"] == {
        "anyOf": [{"type": "integer", "maximum": 100.0, "minimum": 1.0}, {"type": "null"}],
        "description": "Page size",
        "default": 20,
    }
    assert listing["endpoint_id"]["pattern"] == "^ep_[0-7][0-9A-HJKMNP-TV-Z]{25}$"  # a path parameter: required
    assert listing["signature_valid"]["anyOf"] == [{"type": "boolean"}, {"type": "null"}]
    assert "anyOf" not in listing["endpoint_id"], "a required parameter is the document's alone"
    assert set(listing) == {
        "endpoint_id",
        "since",
        "until",
        "provider",
        "type",
        "method",
        "signature_valid",
        "q",
        "limit",
        "cursor",
    }
    wait = by_name["wait_for_event"].input_schema["properties"]["timeout"]
    assert (wait["anyOf"][0]["minimum"], wait["anyOf"][0]["maximum"], wait["default"]) == (1, 55, 30)
    destination = by_name["create_destination"].input_schema
    assert destination["not"] == components["DestinationCreate"]["not"]  # rules between fields come along
    validator = jsonschema.Draft202012Validator(destination)
    assert validator.is_valid({"endpoint_id": "ep_01KAAAAAAAAAAAAAAAAAAAAAAA", "url": "https://example.com/h"})
    assert not validator.is_valid(
        {
            "endpoint_id": "ep_01KAAAAAAAAAAAAAAAAAAAAAAA",
            "url": "https://e.com",
            "forward_all": True,
            "condition_tree": {},
        }
    )
    rule = jsonschema.Draft202012Validator(by_name["create_rule"].input_schema)
    tree = {"op": "AND", "children": [{"field": "meta.provider", "operator": "equals", "value": "payments"}]}
    good = {"endpoint_id": "ep_01KAAAAAAAAAAAAAAAAAAAAAAA", "name": "r", "condition_tree": tree, "destination_ids": []}
    assert not rule.is_valid(good), "destination_ids has at least one item"
    good["destination_ids"] = ["dst_01KAAAAAAAAAAAAAAAAAAAAAAA"]
    assert rule.is_valid(good)
    tree["children"][0]["operator"] = "gt"
    assert not rule.is_valid(good), "condition trees are documented node by node ($defs)"


def test_send_test_webhook_schema_lists_each_providers_events(catalog: Catalog) -> None:
    schema = next(tool for tool in catalog.tools if tool.name == "send_test_webhook").input_schema
    assert sorted(schema["required"]) == ["endpoint_id", "provider"]  # event_type: the provider's first
    validator = jsonschema.Draft202012Validator(schema)
    base = {"endpoint_id": "ep_01KAAAAAAAAAAAAAAAAAAAAAAA"}
    assert validator.is_valid({**base, "provider": "commerce", "event_type": "orders/paid"})
    assert validator.is_valid({**base, "provider": "shopify", "event_type": "orders/paid"})  # an alias
    assert validator.is_valid({**base, "provider": "stripe"})
    assert validator.is_valid({**base, "provider": "slack", "event_type": "app_mention"})
    assert not validator.is_valid({**base, "provider": "payments", "event_type": "orders/paid"})
    assert not validator.is_valid({**base, "provider": "stripe", "event_type": "orders/paid"})
    assert not validator.is_valid({**base, "provider": "mail", "event_type": "orders/paid"})


def test_the_trace_ids_and_propagate_trace_are_in_the_tools(document: dict[str, Any], catalog: Catalog) -> None:
    """MCP shows the same trace ids as /v1 (events, deliveries: its results are /v1's records) and sets
    ``propagate_trace`` like it."""
    components = document["components"]["schemas"]
    assert TOOLS["get_event"].output is EventWithDeliveries
    assert "trace_id" in components["EventWithDeliveries"]["properties"]
    assert {"trace_id", "span_id"} <= set(components["Delivery"]["properties"])
    for name in ("create_destination", "update_destination"):
        assert "propagate_trace" in str(catalog.input_schema(name)), name


def test_event_records_name_their_provider_by_catalog_name() -> None:
    """The record get_event answers with (the tools list no output schema: ADR 0092), as msgspec states it."""
    generated = msgspec.json.schema(EventWithDeliveries)
    schema = generated["$defs"][generated["$ref"].rsplit("/", 1)[1]]
    assert {"id", "headers", "body", "provider", "deliveries", "received_at"} <= set(schema["required"])
    provider = schema["properties"]["provider"]["anyOf"]
    assert provider[1] == {"type": "null"}
    assert provider[0]["enum"][:4] == ["identity", "commerce", "payments", "code_host"]  # then the catalog's others
    assert {"slack", "twilio", "discord"} <= set(provider[0]["enum"])
    assert {"stripe"}.isdisjoint(provider[0]["enum"])  # an event names its provider by its catalog name


# -- through the official client, in process --------------------------------------------------------------


async def test_unknown_tool_is_a_protocol_error(settings, account) -> None:
    async with live_app(settings) as (_, app), connected(app, account.key) as client:
        with pytest.raises(MCPError, match="unknown tool 'list_everything'"):
            await client.call_tool("list_everything", {})


async def test_postgres_away_is_unavailable_not_internal(client, account, servers, database_url, caplog) -> None:
    """Before the SDK sees the request, authentication needs Postgres: the /v1 503 envelope. Inside a tool, a
    store that goes away is the same ``unavailable`` as a tool error (``failure_result``, below)."""
    listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    headers = {**account.headers, "accept": "application/json, text/event-stream", "mcp-protocol-version": "2025-06-18"}
    async with refusing_connections(servers, database_url):
        refused = await client.post("/mcp", json=listing, headers=headers)
    assert_error(refused, 503, "unavailable")
    assert refused.headers["retry-after"] == "2"
    assert (await client.post("/mcp", json=listing, headers=headers)).status_code == 200
    assert not [r for r in caplog.records if r.levelname == "ERROR"]  # an outage is not our bug


@pytest.mark.parametrize(
    ("exc", "code", "message"),
    [
        (asyncpg.PostgresConnectionError("gone"), "unavailable", "the database is unavailable; retry shortly"),
        (ConnectionRefusedError(111, "refused"), "unavailable", "the database is unavailable; retry shortly"),
        (RedisConnectionError("gone"), "unavailable", "Redis is unavailable; retry shortly"),
        (NotFoundError("endpoint 'ep_x' not found"), "not_found", "endpoint 'ep_x' not found"),
        (ValidationError("limit: must be between 1 and 100"), "validation_error", "limit: must be between 1 and 100"),
        (RuntimeError("a bug"), "internal_error", "internal server error; the failure was logged"),
    ],
)
def test_failures_are_tool_errors_carrying_the_envelope(exc: Exception, code: str, message: str, caplog) -> None:
    result = failure_result("get_endpoint", exc)
    assert result.is_error
    assert result.structured_content == {"error": {"code": code, "message": message}}
    assert json.loads(result.content[0].text) == result.structured_content
    logged = [r for r in caplog.records if r.levelname == "ERROR"]
    assert bool(logged) is (code == "internal_error")
    assert "a bug" not in result.content[0].text
