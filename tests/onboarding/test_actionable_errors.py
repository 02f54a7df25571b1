"""Errors a person can act on: what the trial of issue 25 hit on registering.

A bad e-mail (or temporary token) on ``/api/register`` names the field and says what it must be, not the
regex that refused it; a temporary token used after its account registered says to use that account's
``hy_live_`` key (registering again would be 409), on /v1 and on /mcp alike.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.events_support import live_app
from tests.helpers import assert_error
from tests.mcp_client import connected


async def _start(client: Any) -> dict[str, Any]:
    resp = await client.post("/api/start", json={})
    assert resp.status_code == 200, resp.text
    return resp.json()


@pytest.mark.parametrize(
    ("body", "field", "says"),
    [
        ({"email": "not-an-address"}, "email", "e-mail address"),
        ({"email": "a@localhost"}, "email", "e-mail address"),
        ({"email": "a b@example.com"}, "email", "e-mail address"),
        ({"email": "ada@example.com", "api_token": "hy_live_" + "A" * 32}, "api_token", "/api/start"),
    ],
)
async def test_a_bad_registration_names_the_field_and_the_rule_not_a_regex(client, body, field, says) -> None:
    error = assert_error(await client.post("/api/register", json=body), 400, "validation_error", field=field)
    assert says in error["message"]
    assert "regex" not in error["message"]
    assert "[A-Za-z0-9]" not in error["message"]


async def test_a_temporary_token_on_v1_says_what_to_do_before_and_after_registering(client) -> None:
    started = await _start(client)
    token = {"Authorization": f"Bearer {started['api_token']}"}
    before = assert_error(await client.get("/v1/endpoints", headers=token), 403, "temporary_token")
    assert "POST /api/register" in before["message"]

    body = {"email": "ada@example.com", "api_token": started["api_token"]}
    registered = await client.post("/api/register", json=body)
    assert registered.status_code == 201, registered.text
    after = assert_error(await client.get("/v1/endpoints", headers=token), 403, "temporary_token")
    assert "registered" in after["message"]
    assert "hy_live_" in after["message"]
    assert "register an account" not in after["message"]  # that would answer 409 already_registered
    key = {"Authorization": f"Bearer {registered.json()['api_key']}"}
    assert (await client.get("/v1/endpoints", headers=key)).status_code == 200  # the advice works


async def test_a_temporary_token_on_mcp_after_registering_is_told_to_use_the_live_key(settings) -> None:
    async with live_app(settings) as (client, app):
        started = await _start(client)
        registered = await client.post(
            "/api/register", json={"email": "ada@example.com", "api_token": started["api_token"]}
        )
        assert registered.status_code == 201, registered.text
        async with connected(app, started["api_token"]) as mcp:
            # Still a valid token for its 3 days: it reads its endpoint, and is refused what it cannot do.
            listed = await mcp.call_tool("list_endpoints", {})
            assert not listed.is_error
            refused = await mcp.call_tool("create_endpoint", {"name": "more"})
            assert refused.is_error
            error = json.loads(refused.content[0].text)["error"]
    assert error["code"] == "temporary_token"
    assert "registered" in error["message"]
    assert "hy_live_" in error["message"]
    assert "register an account" not in error["message"]
