"""A tool's bad argument reads as /v1's answer to the same bad parameter: the same code and the same message,
through the official MCP client over Streamable HTTP (the rig of test_mcp.py: a stack of its own for this
module). A fresh-clone trial found `list_deliveries` with `success: "maybe"` answered in msgspec's words
(`success: Expected `bool | null`, got `str``) and `limit: -1` with a service's own wording, where /v1 said
`must be true or false, got "maybe"` and `must be an integer from 1 to 100 (page size), got -1`."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

import pytest

from tests.conftest import Account
from tests.e2e import mcp_rig
from tests.e2e.mcp_rig import database_url, module_settings, sink  # noqa: F401 - the rig's fixtures, under their names
from tests.e2e.mcp_support import connected, v1_request
from tests.stack import Stack

pytestmark = pytest.mark.slow


mcp_stack = mcp_rig.mcp_stack  # bound by name, as the tests take it (an import would read as redefined)

SCHEMA = "sch_01KAAAAAAAAAAAAAAAAAAAAAAA"
LIBRARY_WORDS = ("Expected `", "got `")


def _cases(ep: str) -> list[tuple[str, dict[str, Any], str, dict[str, str]]]:
    """(tool, arguments, /v1 path, the same parameters as a query string's text)."""
    deliveries, events = f"/v1/endpoints/{ep}/deliveries", f"/v1/endpoints/{ep}/events"
    return [
        # a boolean that is no boolean: a plain argument, a filter record's field, and two more tools
        ("list_deliveries", {"endpoint_id": ep, "success": "maybe"}, deliveries, {"success": "maybe"}),
        ("list_events", {"endpoint_id": ep, "signature_valid": "yes"}, events, {"signature_valid": "yes"}),
        ("list_alerts", {"open": "perhaps"}, "/v1/alerts", {"open": "perhaps"}),
        ("get_schema_types", {"schema_id": SCHEMA, "union": "1"}, f"/v1/schemas/{SCHEMA}/types", {"union": "1"}),
        # an integer out of its range, or no integer at all
        ("list_deliveries", {"endpoint_id": ep, "limit": -1}, deliveries, {"limit": "-1"}),
        ("list_deliveries", {"endpoint_id": ep, "limit": 0}, deliveries, {"limit": "0"}),
        ("list_events", {"endpoint_id": ep, "limit": 500}, events, {"limit": "500"}),
        ("list_events", {"endpoint_id": ep, "limit": 1.5}, events, {"limit": "1.5"}),
        ("list_alerts", {"limit": "abc"}, "/v1/alerts", {"limit": "abc"}),  # /v1 once showed it bare: got abc
        ("list_erasures", {"limit": 101}, "/v1/erasures", {"limit": "101"}),
        ("list_alerts", {"limit": 201}, "/v1/alerts", {"limit": "201"}),
        ("wait_for_event", {"endpoint_id": ep, "timeout": 56}, f"{events}/wait", {"timeout": "56"}),
        ("wait_for_event", {"endpoint_id": ep, "timeout": 0}, f"{events}/wait", {"timeout": "0"}),
        # a value of no enum member, and a NUL byte
        ("list_deliveries", {"endpoint_id": ep, "source": "email"}, deliveries, {"source": "email"}),
        ("list_events", {"endpoint_id": ep, "provider": "nope"}, events, {"provider": "nope"}),
        ("list_deliveries", {"endpoint_id": ep, "source": "ru\x00le"}, deliveries, {"source": "ru\x00le"}),
        ("list_endpoints", {"external_ref": "a\x00b"}, "/v1/endpoints", {"external_ref": "a\x00b"}),
        ("list_events", {"endpoint_id": ep, "since": "2026\x00"}, events, {"since": "2026\x00"}),
    ]


async def test_a_bad_argument_reads_as_v1s_bad_parameter(mcp_stack: Stack, account: Account) -> None:
    ep = v1_request(mcp_stack, account, "POST", "/v1/endpoints", json={"name": "messages"}).json()["id"]
    async with connected(mcp_stack, account.key) as t:
        for tool, arguments, path, query in _cases(ep):
            tool_error = await t.error(tool, **arguments)
            http = v1_request(mcp_stack, account, "GET", f"{path}?{urlencode(query)}")
            assert http.status_code == 400, (path, query, http.text)
            assert tool_error == http.json()["error"], (tool, arguments)
            assert not any(words in tool_error["message"] for words in LIBRARY_WORDS), tool_error


async def test_json_types_stay_honest(mcp_stack: Stack, account: Account) -> None:
    """A tool's boolean is JSON's: `"true"` is refused, as a string is where the schema says boolean (a query
    string has only text, so /v1 reads `true`; a tool's input schema says `boolean`). Every other type
    mismatch of a parameter says what the parameter is, never in a library's words."""
    ep = v1_request(mcp_stack, account, "POST", "/v1/endpoints", json={"name": "typed"}).json()["id"]
    async with connected(mcp_stack, account.key) as t:
        assert (await t.ok("list_deliveries", endpoint_id=ep, success=False, limit=20.0))["deliveries"] == []
        # An optional parameter given as null is not given (a URL has no null): its default, for limit as for
        # success; a required one given as null is refused in the same words as another type.
        assert (await t.ok("list_deliveries", endpoint_id=ep, limit=None, success=None))["deliveries"] == []
        for tool, arguments, message in [
            ("list_deliveries", {"endpoint_id": ep, "success": "true"}, 'success: must be true or false, got "true"'),
            ("list_alerts", {"open": 1}, "open: must be true or false, got 1"),
            ("list_deliveries", {"endpoint_id": ep, "source": 5}, "source: must be a string, got 5"),
            ("list_endpoints", {"external_ref": ["a"]}, 'external_ref: must be a string, got ["a"]'),
            ("get_endpoint", {"endpoint_id": 7}, "endpoint_id: must be a string, got 7"),
            ("get_endpoint", {"endpoint_id": None}, "endpoint_id: must be a string, got null"),
            ("get_event", {"event_id": None}, "event_id: must be a string, got null"),
            (  # a string is shown as JSON shows one (/v1's ?limit=abc has only text): "20" is not the number 20
                "list_deliveries",
                {"endpoint_id": ep, "limit": "20"},
                'limit: must be an integer from 1 to 100 (page size), got "20"',
            ),
            ("list_alerts", {"limit": "abc"}, 'limit: must be an integer from 1 to 200 (page size), got "abc"'),
            (  # a tool of its own (no /v1 operation): its plain arguments alike
                "update_destination_transform",
                {"destination_id": 7, "transform": None},
                "destination_id: must be a string, got 7",
            ),
            (
                "list_deliveries",
                {"endpoint_id": ep, "limit": True},
                "limit: must be an integer from 1 to 100 (page size), got true",
            ),
            (
                "list_deliveries",
                {"endpoint_id": ep, "success": "maybe", "limit": -1},
                'success: must be true or false, got "maybe"; '
                "limit: must be an integer from 1 to 100 (page size), got -1",
            ),
        ]:
            assert await t.error(tool, **arguments) == {"code": "validation_error", "message": message}
