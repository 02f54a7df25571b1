"""An endpoint's own answer to a stored request (``PATCH /v1/endpoints/{id}`` ``response``): its bounds, the
record, and the edge config that serves it; ``null`` restores ``{"ok": true, "id"}``."""

from __future__ import annotations

import pytest

from tests.control.test_auth_config_api import edge_config
from tests.helpers import (  # noqa: F401 - fixtures
    assert_error,
    create_endpoint,
    db,
    module_database_url,
    redis_connection,
)


async def test_a_response_is_set_shown_served_and_cleared(client, account, redis, settings):
    made = await create_endpoint(client, account.headers)
    response = {"status": 202, "content_type": "application/xml", "body": "<Response></Response>"}
    resp = await client.patch(f"/v1/endpoints/{made['id']}", json={"response": response}, headers=account.headers)
    assert resp.status_code == 200, resp.text
    assert resp.json()["response"] == response
    got = await client.get(f"/v1/endpoints/{made['id']}", headers=account.headers)
    assert got.json()["response"] == response
    served = (await edge_config(redis, settings, made)).response
    assert (served.status, served.content_type, served.body) == (202, "application/xml", "<Response></Response>")
    cleared = await client.patch(f"/v1/endpoints/{made['id']}", json={"response": None}, headers=account.headers)
    assert cleared.json()["response"] is None
    assert (await edge_config(redis, settings, made)).response is None


@pytest.mark.parametrize(
    ("response", "field"),
    [
        ({"status": 302}, "response.status"),
        ({"status": 500}, "response.status"),
        ({"status": 204, "body": "x"}, "response.body"),
        ({"body": "x" * 4097}, "response.body"),
        ({"body": "a\x00b"}, "response.body"),
        ({"content_type": "text/html\r\nSet-Cookie: a=b"}, "response.content_type"),
        ({"content_type": "<script>"}, "response.content_type"),
        ({"colour": "red"}, "response"),
    ],
)
async def test_a_response_out_of_bounds_is_a_400_naming_the_field(client, account, response, field):
    made = await create_endpoint(client, account.headers)
    resp = await client.patch(f"/v1/endpoints/{made['id']}", json={"response": response}, headers=account.headers)
    error = assert_error(resp, 400, "validation_error")
    assert error["message"].startswith(field), error


async def test_a_lone_surrogate_in_the_body_is_a_400(client, account):
    made = await create_endpoint(client, account.headers)
    raw = b'{"response": {"body": "a\\ud800b"}}'
    headers = {**account.headers, "content-type": "application/json"}
    resp = await client.patch(f"/v1/endpoints/{made['id']}", content=raw, headers=headers)
    field = "response.body"
    error = assert_error(resp, 400, "validation_error")
    assert error["message"].startswith(field), error
