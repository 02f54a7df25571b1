"""The replay and destination-test requests: invalid bodies are 400 naming the field, the documented
header rules are the ones the server applies, unknown and foreign events are 404, the destination test
sends a signed synthetic event, and the OpenAPI document lists both operations."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
import standardwebhooks
from litestar.testing import AsyncTestClient

from tests.conftest import Account
from tests.control.replay.support import OUTCOME_FIELDS, stored_event
from tests.destination import Destination, add_destination
from tests.helpers import assert_error, create_endpoint, db
from tests.stack import free_port


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "url"),
        ({"url": "ftp://example.com/x"}, "url"),
        ({"url": "/relative"}, "url"),
        ({"url": "http://example.com", "resign_with": "short"}, "resign_with"),
        ({"url": "http://example.com", "headers": {"bad name": "x"}}, "headers.bad name"),
        ({"url": "http://example.com", "headers": {"x-a": "line\r\nbreak"}}, "headers.x-a"),
        ({"url": "http://example.com", "headers": {"x-a": 1}}, "headers.x-a"),
        ({"url": "http://example.com", "signature_header": "has space"}, "signature_header"),
        ({"url": "http://example.com", "preserve_headers": "yes"}, "preserve_headers"),
        ({"url": "http://example.com", "unknown": 1}, "unknown"),
    ],
)
async def test_invalid_bodies_are_400_naming_the_field(
    client: AsyncTestClient, account: Account, database_url: str, body: dict[str, Any], field: str
) -> None:
    ids = await stored_event(client, account, database_url)
    response = await client.post(f"/v1/events/{ids['event']}/replay", json=body, headers=account.headers)
    assert_error(response, 400, "validation_error", field=field)


HEADER_NAMES = [
    "x-a",
    "X-Hookyard-Event-Id",  # a replay adds no x-hookyard-* header of its own, so a caller may set one
    "tea",
    "hosts",
    "x" * 256,
    "Host",
    "CONTENT-LENGTH",
    "Trailers",
    "tE",
    "expect",
    "Proxy-Connection",
    "x" * 257,
    "bad name",
    "a:b",
    "caf\u00e9",
    "x-a\n",
    "",
]
HEADER_VALUES = [
    "",
    "v",
    " v ",
    "tab\there",
    "caf\u00e9 \u2028 \x85",
    "v\n",
    "line\r\nbreak",
    "\x7f",
    "\x1f",
    "\x0b",
    "\x08",
]


def _documented(schema: dict[str, Any], text: str) -> bool:
    """Whether ``text`` is valid for a string schema of ``pattern`` and ``not: {pattern}``, read as JSON Schema
    reads them (ECMA 262: ``$`` is the end, where Python's would also match before a final newline)."""

    def matches(pattern: str) -> bool:
        assert pattern.startswith("^"), pattern
        assert pattern.endswith("$"), pattern
        return re.fullmatch(pattern[1:-1], text) is not None

    return matches(schema["pattern"]) and not ("not" in schema and matches(schema["not"]["pattern"]))


async def test_the_document_states_the_header_rules_the_server_applies(
    client: AsyncTestClient, account: Account, database_url: str
) -> None:
    """Each header name, header value and ``signature_header`` is accepted (the outcome, a 200) exactly when
    the document's patterns allow it, and refused with a 400 naming it otherwise."""
    properties = (await client.get("/schema/openapi.json")).json()["components"]["schemas"]["ReplayRequest"][
        "properties"
    ]
    names, values = properties["headers"]["propertyNames"], properties["headers"]["additionalProperties"]
    ids = await stored_event(client, account, database_url)
    nobody = f"http://127.0.0.1:{free_port()}/"
    cases = [(names, name, {"headers": {name: "v"}}, f"headers.{name}") for name in HEADER_NAMES]
    cases += [
        (properties["signature_header"], name, {"signature_header": name}, "signature_header") for name in HEADER_NAMES
    ]
    cases += [(values, value, {"headers": {"x-a": value}}, "headers.x-a") for value in HEADER_VALUES]
    for schema, text, body, field in cases:
        response = await client.post(
            f"/v1/events/{ids['event']}/replay", json={"url": nobody, **body}, headers=account.headers
        )
        if _documented(schema, text):
            assert response.status_code == 200, (body, response.text)
        else:
            assert_error(response, 400, "validation_error", field=field)


async def test_unknown_and_foreign_events_are_404(
    client: AsyncTestClient, account: Account, other_account: Account, database_url: str
) -> None:
    ids = await stored_event(client, account, database_url)
    for event_id, who in (
        (ids["event"], other_account),
        ("evt_01ARZ3NDEKTSV4RRFFQ69G5FAV", account),
        ("nope", account),
    ):
        response = await client.post(
            f"/v1/events/{event_id}/replay", json={"url": "http://example.com"}, headers=who.headers
        )
        assert_error(response, 404, "not_found")


async def test_destination_test_sends_a_signed_synthetic_event(
    client: AsyncTestClient, account: Account, database_url: str, destination: Destination
) -> None:
    endpoint = await create_endpoint(client, account.headers)
    async with db(database_url) as conn:
        destination_id = await add_destination(
            conn, endpoint["id"], destination.url, headers={"authorization": "Bearer t"}
        )
    response = await client.post(f"/v1/destinations/{destination_id}/test", headers=account.headers)
    assert response.status_code == 200, response.text
    outcome = response.json()
    assert set(outcome) == OUTCOME_FIELDS
    assert outcome["success"] is True
    assert len(destination.requests) == 1, [(r.headers, r.body[:200]) for r in destination.requests]
    (got,) = destination.requests
    payload = json.loads(got.body)
    assert payload["type"] == "hookyard.test"
    assert payload["data"]["destination_id"] == destination_id
    assert got.headers["authorization"] == "Bearer t"
    assert got.headers["x-hookyard-event-id"] == payload["id"]
    async with db(database_url) as conn:
        secret = await conn.fetchval("SELECT signing_secret FROM destinations WHERE id = $1", destination_id)
    standardwebhooks.Webhook(secret).verify(got.body, got.headers)
    listed = await client.get(
        f"/v1/endpoints/{endpoint['id']}/deliveries", params={"source": "manual_test"}, headers=account.headers
    )
    (delivery,) = listed.json()["deliveries"]
    assert (delivery["id"], delivery["destination_id"], delivery["event_id"]) == (
        outcome["id"],
        destination_id,
        payload["id"],
    )
    missing = await client.post("/v1/destinations/dst_01ARZ3NDEKTSV4RRFFQ69G5FAV/test", headers=account.headers)
    assert_error(missing, 404, "not_found")


async def test_openapi_documents_both_operations(client: AsyncTestClient) -> None:
    schema = (await client.get("/schema/openapi.json")).json()
    replay = schema["paths"]["/v1/events/{event_id}/replay"]["post"]
    test = schema["paths"]["/v1/destinations/{destination_id}/test"]["post"]
    assert {"200", "400", "401", "404"} <= set(replay["responses"])
    assert {"200", "401", "404"} <= set(test["responses"])
    assert "verbatim" in replay["description"]
    assert "manual_test" in test["description"]
