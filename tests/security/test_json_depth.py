"""JSON nested deeper than 128 levels is a 400 naming the field on /v1 and through MCP (issue 42): a body
20,000 levels deep made the decoders recurse to Python's limit, a 500. 128 levels still pass."""

from __future__ import annotations

import json
from typing import Any

import pytest

from shared.errors import ValidationError
from shared.json_depth import MAX_DEPTH, check_bytes, check_value
from shared.settings import Settings
from tests.events_support import live_app
from tests.helpers import assert_error, create_endpoint
from tests.mcp_client import connected

DEEP = 20_000


def _arrays(n: int) -> bytes:
    return b"[" * n + b"]" * n


def _objects(n: int) -> bytes:
    return b'{"a":' * n + b"1" + b"}" * n


ROUTES = [
    # (method, path template, body with {deep} where the nesting goes, the field the 400 names)
    ("POST", "/v1/endpoints", b'{"name": {deep}}', "name"),
    ("POST", "/v1/endpoints/{ep}/destinations", b'{"url": "https://example.com/h", "headers": {deep}}', "headers"),
    ("POST", "/v1/endpoints/{ep}/rules", b'{"condition_tree": {deep}, "destination_ids": []}', "condition_tree"),
    ("POST", "/v1/endpoints/{ep}/events/erase", b'{"field": "body.x", "value": {deep}}', "value"),
    ("PATCH", "/v1/endpoints/{ep}", b'{"name": "x", "labels": {"k": {deep}}}', "labels.k"),
    ("POST", "/v1/alert-destinations", b'{"url": "https://example.com/a", "events": {deep}}', "events"),
    ("POST", "/v1/endpoints", b"{deep}", "body"),
]


@pytest.mark.parametrize("shape", [_arrays, _objects], ids=["arrays", "objects"])
@pytest.mark.parametrize(("method", "path", "template", "field"), ROUTES, ids=[f"{r[0]} {r[1]} {r[3]}" for r in ROUTES])
async def test_a_20000_deep_body_is_a_400_naming_the_field(
    client, account, shape, method: str, path: str, template: bytes, field: str
) -> None:
    endpoint = await create_endpoint(client, account.headers)
    body = template.replace(b"{deep}", shape(DEEP))
    resp = await client.request(
        method,
        path.replace("{ep}", endpoint["id"]),
        content=body,
        headers={**account.headers, "content-type": "application/json"},
    )
    error = assert_error(resp, 400, "validation_error")
    named = "a.a" if field == "body" and shape is _objects else field  # the first two keys of the path
    assert error["message"].split(":")[0] in (named, f"{named}.a"), error
    assert f"nested deeper than {MAX_DEPTH} levels" in error["message"], error


async def test_128_levels_are_decoded_as_usual(client, account) -> None:
    """At the cap the body is read (and judged by the record: an array is no name), not refused for depth."""
    resp = await client.post(
        "/v1/endpoints",
        content=b'{"name": ' + _arrays(MAX_DEPTH - 1) + b"}",
        headers={**account.headers, "content-type": "application/json"},
    )
    error = assert_error(resp, 400, "validation_error", field="name")
    assert "nested" not in error["message"]


def test_strings_with_brackets_and_escapes_do_not_count() -> None:
    check_bytes(b'{"a": "' + b"[{" * 10_000 + b'", "b\\"[": "\\\\["}')
    with pytest.raises(ValidationError, match=r"^b: nested deeper than 128"):
        check_bytes(b'{"a": "x\\"", "b": ' + _arrays(129) + b"}")
    check_value({"a": [[[1]]] * 1000})
    deep: Any = 1
    for _ in range(DEEP):
        deep = {"k": deep}
    with pytest.raises(ValidationError, match=r"^tree\.k: nested"):
        check_value({"tree": deep})


async def test_mcp_arguments_nested_too_deep_are_refused_naming_the_argument(
    settings: Settings, client: Any, account: Any
) -> None:
    endpoint = await create_endpoint(client, account.headers)
    deep: Any = ["x"]
    for _ in range(MAX_DEPTH + 10):
        deep = [deep]
    async with live_app(settings) as (_, app), connected(app, account.key) as mcp:
        for tool, arguments, field in [
            ("create_endpoint", {"name": deep}, "name"),
            ("erase_events", {"endpoint_id": endpoint["id"], "field": "body.x", "value": deep}, "value"),
            (
                "create_destination",
                {"endpoint_id": endpoint["id"], "url": "https://e.com/h", "headers": deep},
                "headers",
            ),
        ]:
            refused = await mcp.call_tool(tool, arguments)
            assert refused.is_error, (tool, refused)
            error = json.loads(refused.content[0].text)["error"]
            assert error["code"] == "validation_error", error
            assert error["message"].startswith(f"{field}: nested deeper than {MAX_DEPTH}"), error
        fine = await mcp.call_tool("list_endpoints", {})
        assert not fine.is_error
