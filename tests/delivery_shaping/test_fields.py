"""The shaping fields of a destination (``rate_limit_per_s``, ``ordering``, ``ordering_key``,
``deduplicate_window_s``) over /v1 (create, PATCH, GET, list), the OpenAPI document and the MCP tools taken
from it; every refusal names its field."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import msgspec

from control.mcp.catalog import Catalog
from control.mcp.registry import TOOLS
from shared.settings import Settings
from tests.events_support import live_app
from tests.helpers import assert_error, create_endpoint
from tests.mcp_client import connected

SHAPING = {
    "rate_limit_per_s": 12.5,
    "ordering": "fifo",
    "ordering_key": "header.X-Shop-Domain",
    "deduplicate_window_s": 86400,
}
FIELDS = ("rate_limit_per_s", "ordering", "ordering_key", "deduplicate_window_s")


async def _destination(client: Any, account: Any, **body: Any) -> Any:
    endpoint = await create_endpoint(client, account.headers)
    return await client.post(
        f"/v1/endpoints/{endpoint['id']}/destinations",
        json={"url": "https://example.com/hooks", **body},
        headers=account.headers,
    )


async def test_create_patch_get_and_list_carry_the_fields(client: Any, account: Any) -> None:
    plain = await _destination(client, account)
    assert plain.status_code == 201, plain.text
    assert {f: plain.json()[f] for f in FIELDS} == {
        "rate_limit_per_s": None,
        "ordering": "none",
        "ordering_key": None,
        "deduplicate_window_s": None,
    }
    created = await _destination(client, account, **SHAPING)
    assert created.status_code == 201, created.text
    stored = {**SHAPING, "ordering_key": "header.x-shop-domain"}  # header names are stored lowercased
    assert {f: created.json()[f] for f in FIELDS} == stored
    destination = created.json()
    got = await client.get(f"/v1/destinations/{destination['id']}", headers=account.headers)
    assert {f: got.json()[f] for f in FIELDS} == stored
    listed = await client.get(f"/v1/endpoints/{destination['endpoint_id']}/destinations", headers=account.headers)
    assert {f: listed.json()["destinations"][0][f] for f in FIELDS} == stored

    path = f"/v1/destinations/{destination['id']}"
    patched = await client.patch(
        path, json={"rate_limit_per_s": None, "ordering_key": "body.data.customer"}, headers=account.headers
    )
    assert patched.status_code == 200, patched.text
    assert {f: patched.json()[f] for f in FIELDS} == {
        **stored,
        "rate_limit_per_s": None,
        "ordering_key": "body.data.customer",
    }
    unordered = await client.patch(
        path, json={"ordering": "none", "deduplicate_window_s": None}, headers=account.headers
    )
    assert {f: unordered.json()[f] for f in FIELDS} == {
        "rate_limit_per_s": None,
        "ordering": "none",
        "ordering_key": None,  # a key means nothing without FIFO ordering
        "deduplicate_window_s": None,
    }
    again = await client.get(path, headers=account.headers)
    assert {f: again.json()[f] for f in FIELDS} == {f: unordered.json()[f] for f in FIELDS}


REFUSED = [
    ({"rate_limit_per_s": 0}, "rate_limit_per_s"),
    ({"rate_limit_per_s": 1e-300}, "rate_limit_per_s"),
    ({"rate_limit_per_s": 0.0009}, "rate_limit_per_s"),
    ({"rate_limit_per_s": -2.5}, "rate_limit_per_s"),
    ({"rate_limit_per_s": 10001}, "rate_limit_per_s"),
    ({"rate_limit_per_s": "50"}, "rate_limit_per_s"),
    ({"ordering": "lifo"}, "ordering"),
    ({"ordering": None}, "ordering"),
    ({"ordering": "fifo", "ordering_key": "customer"}, "ordering_key"),
    ({"ordering": "fifo", "ordering_key": "body..customer"}, "ordering_key"),
    ({"ordering": "fifo", "ordering_key": "meta.shop"}, "ordering_key"),
    ({"ordering": "fifo", "ordering_key": ""}, "ordering_key"),
    ({"ordering_key": "body.customer"}, "ordering_key"),
    ({"deduplicate_window_s": 0}, "deduplicate_window_s"),
    ({"deduplicate_window_s": 604801}, "deduplicate_window_s"),
    ({"deduplicate_window_s": 1.5}, "deduplicate_window_s"),
]


async def test_refusals_name_the_field(client: Any, account: Any) -> None:
    made = await _destination(client, account)
    for body, field in REFUSED:
        assert_error(await _destination(client, account, **body), 400, "validation_error", field=field)
        patched = await client.patch(f"/v1/destinations/{made.json()['id']}", json=body, headers=account.headers)
        assert_error(patched, 400, "validation_error", field=field)


async def test_a_rate_has_a_lower_bound_the_message_and_the_document_state(client: Any, account: Any) -> None:
    """Any positive rate was taken: at 1e-300 the throttle's next start lies past the end of time and the
    destination never delivers. 0.001 (one every 1,000 s) is the least, said in the message as in the schema."""
    made = await _destination(client, account, rate_limit_per_s=0.001)
    assert made.status_code == 201, made.text
    assert made.json()["rate_limit_per_s"] == 0.001
    patched = await client.patch(
        f"/v1/destinations/{made.json()['id']}", content=b'{"rate_limit_per_s": 1e-300}', headers=account.headers
    )
    for refused in (await _destination(client, account, rate_limit_per_s=1e-300), patched):
        err = assert_error(refused, 400, "validation_error")
        assert err["message"] == "rate_limit_per_s: must be a number from 0.001 to 10000, got 1e-300", err


async def test_a_key_needs_fifo_ordering_stored_or_given(client: Any, account: Any) -> None:
    made = (await _destination(client, account)).json()
    path = f"/v1/destinations/{made['id']}"
    refused = await client.patch(path, json={"ordering_key": "body.customer"}, headers=account.headers)
    assert_error(refused, 400, "validation_error", field="ordering_key")
    assert (await client.get(path, headers=account.headers)).json()["ordering_key"] is None
    fifo = await client.patch(path, json={"ordering": "fifo"}, headers=account.headers)
    keyed = await client.patch(path, json={"ordering_key": "meta.label.customer"}, headers=account.headers)
    assert (fifo.status_code, keyed.status_code) == (200, 200), keyed.text
    assert keyed.json()["ordering_key"] == "meta.label.customer"


def test_the_document_and_the_mcp_tools_carry_the_fields(settings: Settings) -> None:
    from control.app import create_app

    document = create_app(settings).openapi_schema.to_schema()
    schemas = document["components"]["schemas"]
    for record in ("DestinationCreate", "DestinationUpdate", "Destination", "DestinationDetail"):
        assert set(FIELDS) <= set(schemas[record]["properties"]), record
    for record in ("DestinationCreate", "DestinationUpdate"):
        rate = schemas[record]["properties"]["rate_limit_per_s"]
        assert (rate["minimum"], rate["maximum"]) == (0.001, 10000), rate
    assert set(schemas["DestinationHealth"]["properties"]) >= {"paused_until", "fifo_waiting"}
    assert "duplicate_of" in schemas["Delivery"]["properties"]
    catalog = Catalog(TOOLS)
    catalog.bind(document)
    tools = {tool.name: tool for tool in catalog.tools}
    for name in ("create_destination", "update_destination"):
        schema = tools[name].input_schema
        assert set(FIELDS) <= set(schema["properties"]), name
        validator = jsonschema.Draft202012Validator(schema)
        ids = {"endpoint_id": "ep_01KAAAAAAAAAAAAAAAAAAAAAAA", "destination_id": "dst_01KAAAAAAAAAAAAAAAAAAAAAAA"}
        arguments = {k: v for k, v in ids.items() if k in schema["properties"]}
        assert validator.is_valid({**arguments, "url": "https://example.com/h", **SHAPING})
        assert not validator.is_valid({**arguments, "url": "https://example.com/h", "ordering": "lifo"})
        assert not validator.is_valid({**arguments, "url": "https://example.com/h", "deduplicate_window_s": 0})
        assert not validator.is_valid({**arguments, "url": "https://example.com/h", "rate_limit_per_s": 1e-300})
    assert set(FIELDS) <= {f.encode_name for f in msgspec.structs.fields(TOOLS["get_destination"].output)}


async def test_the_mcp_tools_set_and_refuse_them(settings: Settings, client: Any, account: Any) -> None:
    endpoint = await create_endpoint(client, account.headers)
    async with live_app(settings) as (_, app), connected(app, account.key) as mcp:
        made = await mcp.call_tool(
            "create_destination",
            {"endpoint_id": endpoint["id"], "url": "https://example.com/h", **SHAPING},
        )
        assert not made.is_error, made
        record = made.structured_content
        assert record["ordering_key"] == "header.x-shop-domain"
        assert (record["rate_limit_per_s"], record["deduplicate_window_s"]) == (12.5, 86400)
        refused = await mcp.call_tool(
            "update_destination", {"destination_id": record["id"], "ordering_key": "customer"}
        )
        assert refused.is_error
        error = json.loads(refused.content[0].text)["error"]
        assert error["code"] == "validation_error"
        assert error["message"].startswith("ordering_key:")
