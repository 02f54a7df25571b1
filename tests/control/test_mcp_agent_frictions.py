"""What an agent builder's fresh-clone trial of /mcp ran into (ADR 0092), through the official client over
Streamable HTTP, in process: the size of tools/list, a wrong argument name without a hint, a schema version
given as the integer it is, null refused for some optional arguments and taken for others, the `q`
description, a temporary token deleting its last endpoint, and one wording for a length or a choice."""

from __future__ import annotations

import json
import re
from typing import Any

import jsonschema

from control.mcp.registry import TOOLS
from tests.events_support import live_app
from tests.mcp_client import call, connected

TOOLS_LIST_BOUND = 140_000
"""Bytes of the tools/list answer: 220,805 with an output schema per tool, 116,133 without (ADR 0092)."""

ENDPOINT = "ep_01KAAAAAAAAAAAAAAAAAAAAAAA"
SCHEMA = "sch_01KAAAAAAAAAAAAAAAAAAAAAAA"
ULID = "01KAAAAAAAAAAAAAAAAAAAAAAA"


async def _listed(app: Any, key: str) -> dict[str, Any]:
    async with connected(app, key) as client:
        return {tool.name: tool for tool in (await client.list_tools()).tools}


async def test_tools_list_is_held_under_its_bound(settings, account) -> None:
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {
        "Authorization": f"Bearer {account.key}",
        "Accept": "application/json, text/event-stream",
        "mcp-protocol-version": "2025-06-18",
    }
    async with live_app(settings) as (client, app):
        resp = await client.post("/mcp", json=message, headers=headers)
        tools = await _listed(app, account.key)
    assert resp.status_code == 200, resp.text
    assert len(resp.content) < TOOLS_LIST_BOUND, len(resp.content)
    assert set(tools) == set(TOOLS)
    assert all(tool.output_schema is None for tool in tools.values())
    biggest = max(tools.values(), key=lambda tool: len(json.dumps(tool.input_schema)))
    assert len(json.dumps(biggest.input_schema)) < 16_000, biggest.name


async def test_an_unknown_argument_names_the_tools_arguments(settings, account) -> None:
    async with live_app(settings) as (_, app), connected(app, account.key) as client:
        failed, answer = await call(client, "get_endpoint", id=ENDPOINT)
        assert failed
        assert answer["error"]["message"] == "id: unknown field (this tool takes: endpoint_id)"
        failed, answer = await call(client, "create_endpoint", name="a", colour="red")
        message = answer["error"]["message"]
        assert message.startswith("colour: unknown field (this tool takes: "), message
        assert "name" in message.split("takes: ")[1]


async def test_a_schema_version_is_an_integer_or_its_digits(settings, account) -> None:
    tools = await _listed_in(settings, account)
    for tool, argument in (("get_schema", "version"), ("get_schema_diff", "from"), ("get_schema_diff", "to")):
        prop = {**tools[tool].input_schema["properties"][argument]}
        validator = jsonschema.Draft202012Validator(prop)
        assert [validator.is_valid(v) for v in (1, "1", None, 0, "one")] == [True] * 3 + [False] * 2, (tool, argument)
    async with live_app(settings) as (_, app), connected(app, account.key) as client:
        for tool, arguments in (
            ("get_schema", {"version": 1}),
            ("get_schema", {"version": "2"}),
            ("get_schema_diff", {"from": 1, "to": 2}),
            ("get_schema_types", {"version": 3}),
        ):
            failed, answer = await call(client, tool, schema_id=SCHEMA, **arguments)
            assert (failed, answer["error"]["code"]) == (True, "not_found"), (tool, answer)  # read, not refused
        failed, answer = await call(client, "get_schema", schema_id=SCHEMA, version="v1")
        assert answer["error"]["message"] == 'version: must be a version number from 1 (3 or "3") or current, got "v1"'


async def _listed_in(settings, account) -> dict[str, Any]:
    async with live_app(settings) as (_, app):
        return await _listed(app, account.key)


def _required_value(name: str, schema: dict[str, Any]) -> Any:
    """A well-formed id for a required id argument (its pattern's prefix and a ULID), else a string."""
    prefix = re.match(r"\^([a-z]+_)\[", schema.get("pattern", ""))
    return f"{prefix[1]}{ULID}" if prefix else "x"


async def test_every_optional_argument_takes_null(settings, account) -> None:
    """Every tool, every optional argument given as null at once: none of them is refused (``headers: null``
    was, ``event_type: null`` was not); what is refused is something else (an id not found, a required
    argument missing)."""
    async with live_app(settings) as (_, app), connected(app, account.key) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        checked = 0
        for name, tool in tools.items():
            schema, required = tool.input_schema, set(tool.input_schema["required"])
            optional = {arg: None for arg in schema["properties"] if arg not in required}
            for arg in optional:
                prop = {**schema["properties"][arg], "$defs": schema.get("$defs", {})}
                assert jsonschema.Draft202012Validator(prop).is_valid(None), f"{name}.{arg}: null invalid"
            given = {arg: _required_value(arg, schema["properties"][arg]) for arg in required if arg.endswith("_id")}
            failed, answer = await call(client, name, **given, **optional)
            refused = answer["error"]["message"].split("; ") if failed else []
            named = [part for part in refused if part.split(":")[0] in optional and "null" in part]
            assert not named, f"{name}: {named}"
            checked += len(optional)
    assert checked > 100
    assert {"headers", "event_type"} <= set(tools["send_test_webhook"].input_schema["properties"])


async def test_q_says_everything_it_searches(settings, account) -> None:
    tools = await _listed_in(settings, account)
    described = [
        tools[name].input_schema["properties"]["q"]["description"]
        for name in ("list_events", "get_latest_event", "wait_for_event", "retry_deliveries")
    ]
    assert len(set(described)) == 1, "said once, the same for every tool"
    for word in ("body", "content type", "method", "event type", "path", "query", "header value", "label value"):
        assert word in described[0], word


async def test_a_temporary_token_deleting_its_last_endpoint_is_told(client, settings, account) -> None:
    started = (await client.post("/api/start")).json()
    token, endpoint = started["api_token"], started["endpoint_id"]
    async with live_app(settings) as (_, app), connected(app, token) as mcp:
        tools = {tool.name: tool for tool in (await mcp.list_tools()).tools}
        assert "temporary token" in tools["delete_endpoint"].description
        failed, answer = await call(mcp, "delete_endpoint", endpoint_id=endpoint)
        assert not failed, answer
        assert answer["id"] == endpoint
        assert answer["deleted"] is True
        assert "no endpoint left" in answer["note"], answer
        assert "POST /api/start" in answer["note"], answer
        failed, answer = await call(mcp, "create_endpoint", name="again")
        assert failed
        assert answer["error"]["code"] == "temporary_token"
    async with live_app(settings) as (_, app), connected(app, account.key) as mcp:
        made = (await call(mcp, "create_endpoint", name="live"))[1]["id"]
        failed, answer = await call(mcp, "delete_endpoint", endpoint_id=made)
        assert not failed, answer
        assert "note" not in answer, answer  # a live key can make another


async def test_a_length_or_a_choice_is_worded_one_way(settings, account) -> None:
    """As a body field's (docs/reference/errors.md): ``must be 1 to 200 characters long, got N``, ``must be
    one of a, b, got "c"``; these once read ``at most 200 characters``, ``'python' is not one of ...``,
    ``must be one of rule, replay, ...`` (no value) and ``must be 1 to 200 characters long`` (no length)."""
    async with live_app(settings) as (_, app), connected(app, account.key) as client:
        endpoint = (await call(client, "create_endpoint", name="words"))[1]["id"]
        cases = (
            (
                "list_events",
                {"endpoint_id": endpoint, "q": "x" * 201},
                "q: must be at most 200 characters long, got 201",
            ),
            (
                "get_schema_types",
                {"schema_id": SCHEMA, "lang": "python"},
                'lang: must be one of typescript, json-schema, zod, got "python"',
            ),
            (
                "list_deliveries",
                {"endpoint_id": endpoint, "source": "bogus"},
                'source: must be one of rule, replay, manual_test, listen, got "bogus"',
            ),
            ("list_endpoints", {"external_ref": ""}, "external_ref: must be 1 to 200 characters long, got 0"),
            ("list_schemas", {"event_type": "e" * 201}, "event_type: must be at most 200 characters long, got 201"),
        )
        for tool, arguments, message in cases:
            failed, answer = await call(client, tool, **arguments)
            assert failed, (tool, answer)
            assert answer["error"] == {"code": "validation_error", "message": message}, (tool, answer)
