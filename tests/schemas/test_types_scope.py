"""``/types`` gives the one event type asked for; the union over the endpoint's event types is asked for with
``union=true`` (issue 26: every answer carried all 58 event types of an endpoint, some 13,000 lines). Over
HTTP on the real app, with real payloads learned through the real flush; the MCP tool takes the same
argument, from the same OpenAPI operation."""

from __future__ import annotations

from control.app import create_app
from control.db.context import Context
from control.mcp.catalog import Catalog
from control.mcp.registry import TOOLS
from shared.settings import load_settings
from tests.helpers import assert_error, create_endpoint
from tests.schemas.real import by_event_type
from tests.schemas.support import code_host_record, flush


async def test_types_are_of_one_event_type_unless_the_union_is_asked_for(client, account, ctx: Context) -> None:
    ep = (await create_endpoint(client, account.headers))["id"]
    events = by_event_type()
    await flush(ctx, [code_host_record(ep, t, p) for t in ("issues", "push", "star") for p in events[t]])
    listed = (await client.get("/v1/schemas", headers=account.headers)).json()["schemas"]
    sid = next(s["id"] for s in listed if s["event_type"] == "issues")
    url, headers = f"/v1/schemas/{sid}/types", account.headers

    one = await client.get(url, headers=headers)
    assert one.status_code == 200, one.text
    assert one.text.count("export interface ") == 1
    assert "export interface CodeHostIssues {" in one.text
    assert 'export type CodeHostEvent =\n  | { event_type: "issues"; payload: CodeHostIssues };' in one.text
    explicit_no = await client.get(url, params={"union": "false"}, headers=headers)
    assert explicit_no.text == one.text

    union = await client.get(url, params={"union": "true"}, headers=headers)
    assert union.text.count("export interface ") == 3
    for name in ("CodeHostIssues", "CodeHostPush", "CodeHostStar"):
        assert f"payload: {name} }}" in union.text
    assert len(union.text) > len(one.text) + 5000

    doc = (await client.get(url, params={"lang": "json-schema"}, headers=headers)).json()
    assert "$defs" not in doc
    assert "issue" in doc["properties"]
    doc = (await client.get(url, params={"lang": "json-schema", "union": "true"}, headers=headers)).json()
    assert set(doc["$defs"]) == {"CodeHostIssues", "CodeHostPush", "CodeHostStar", "CodeHostEvent"}

    handler = await client.get(url, params={"framework": "next"}, headers=headers)
    assert 'const KNOWN = new Set<string>(["issues"]);' in handler.text
    handler = await client.get(url, params={"framework": "express", "union": "true"}, headers=headers)
    assert 'const KNOWN = new Set<string>(["issues", "push", "star"]);' in handler.text

    for bad in ("yes", "1", "", "True"):
        answer = await client.get(url, params={"union": bad}, headers=headers)
        assert_error(answer, 400, "validation_error", field="union")


def test_the_mcp_tool_takes_union_as_a_boolean() -> None:
    app = create_app(load_settings({}, database_url="postgresql://unused", redis_url="redis://unused"))
    catalog = Catalog(TOOLS)
    catalog.bind(app.openapi_schema.to_schema())
    tool = next(t for t in catalog.tools if t.name == "get_schema_types")
    assert tool.input_schema["properties"]["union"]["anyOf"] == [{"type": "boolean"}, {"type": "null"}]  # optional
    assert "union" not in tool.input_schema.get("required", [])
