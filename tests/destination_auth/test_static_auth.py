"""Basic, Bearer and a header of the destination's choosing, each against a real loopback server that answers
401 without exactly those credentials; the URL's ``user:pass@`` goes out as Basic; the credentials never show
in a read, a delivery record or a PATCH answer; PATCH replaces and null clears."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from control.db.context import Context
from tests.destination import Destination, deliveries_of, make_task, running, settled
from tests.destination_auth.support import requiring
from tests.helpers import create_endpoint


async def _destination(client: Any, account: Any, endpoint: str, **body: Any) -> dict[str, Any]:
    resp = await client.post(f"/v1/endpoints/{endpoint}/destinations", json=body, headers=account.headers)
    assert resp.status_code == 201, resp.text
    return resp.json()


def _basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


CASES = [
    (
        {"type": "basic", "username": "hook user", "password": "pa55:wörd"},
        "authorization",
        _basic("hook user", "pa55:wörd"),
        {"type": "basic", "username": "hook user"},
        "Basic [redacted]",
    ),
    (
        {"type": "bearer", "token": "s3cr3t-bearer-token"},
        "authorization",
        "Bearer s3cr3t-bearer-token",
        {"type": "bearer"},
        "Bearer [redacted]",
    ),
    (
        {"type": "header", "name": "X-Api-Key", "value": "k3y-value-of-the-header"},
        "x-api-key",
        "k3y-value-of-the-header",
        {"type": "header", "name": "x-api-key"},
        "[redacted]",
    ),
]


@pytest.mark.parametrize(("auth", "header", "expected", "shown", "recorded"), CASES, ids=["basic", "bearer", "header"])
async def test_each_static_kind_passes_a_server_that_enforces_it(
    ctx: Context,
    client: Any,
    account: Any,
    destination: Destination,
    auth: dict[str, Any],
    header: str,
    expected: str,
    shown: dict[str, Any],
    recorded: str,
) -> None:
    requiring(destination, header, expected)
    endpoint = (await create_endpoint(client, account.headers))["id"]
    created = await _destination(client, account, endpoint, url=destination.url, auth=auth)
    assert created["auth"] == shown
    secret = auth.get("password") or auth.get("token") or auth["value"]
    read = await client.get(f"/v1/destinations/{created['id']}", headers=account.headers)
    assert read.json()["auth"] == shown
    assert secret not in read.text
    # The event arrived with an authorization of the provider's own: the destination's replaces it.
    made = await make_task(
        ctx, destination.url, endpoint_id=endpoint, destination_id=created["id"], headers={"authorization": "x"}
    )
    async with running(ctx):
        await settled(ctx, made["task"], "succeeded")
    (got,) = destination.requests
    assert got.headers[header] == expected
    (record,) = await deliveries_of(ctx, made["event"])
    assert record["request_headers"][header] == recorded
    assert secret not in str(dict(record))
    listed = await client.get(f"/v1/events/{made['event']}", headers=account.headers)
    assert secret not in listed.text


async def test_the_server_refuses_a_delivery_without_the_credentials(
    ctx: Context, client: Any, account: Any, destination: Destination
) -> None:
    """The control for the test above: the same server, a destination without auth, a 401 on every attempt.

    It waits for the task's end (``failed`` once the test schedule's three attempts are spent), not for its
    ``pending`` between them: that lasts one 50 ms retry wait, which a poll on a loaded machine can miss."""
    requiring(destination, "authorization", "Bearer right")
    endpoint = (await create_endpoint(client, account.headers))["id"]
    created = await _destination(client, account, endpoint, url=destination.url)
    made = await make_task(ctx, destination.url, endpoint_id=endpoint, destination_id=created["id"])
    async with running(ctx):
        row = await settled(ctx, made["task"], "failed")
    assert row["last_error"].startswith("HTTP 401")
    records = await deliveries_of(ctx, made["event"])
    assert [r["response_status"] for r in records] == [401] * (len(ctx.settings.retry_schedule_s) + 1)
    assert not any("authorization" in got.headers for got in destination.requests)


async def test_url_credentials_are_sent_as_basic_and_leave_the_url(
    ctx: Context, client: Any, account: Any, destination: Destination
) -> None:
    requiring(destination, "authorization", _basic("ops@example.com", "p:ss word"))
    endpoint = (await create_endpoint(client, account.headers))["id"]
    url = destination.url.replace("http://", "http://ops%40example.com:p%3Ass%20word@")
    created = await _destination(client, account, endpoint, url=url)
    assert created["url"] == destination.url
    assert created["auth"] == {"type": "basic", "username": "ops@example.com"}
    made = await make_task(ctx, destination.url, endpoint_id=endpoint, destination_id=created["id"])
    async with running(ctx):
        await settled(ctx, made["task"], "succeeded")
    both = await client.post(
        f"/v1/endpoints/{endpoint}/destinations",
        json={"url": url, "auth": {"type": "bearer", "token": "t"}},
        headers=account.headers,
    )
    assert both.status_code == 400
    assert both.json()["error"]["message"].startswith("url:")


async def test_patch_replaces_the_auth_and_null_clears_it(
    ctx: Context, client: Any, account: Any, destination: Destination
) -> None:
    endpoint = (await create_endpoint(client, account.headers))["id"]
    created = await _destination(
        client, account, endpoint, url=destination.url, auth={"type": "bearer", "token": "first-token"}
    )
    path = f"/v1/destinations/{created['id']}"
    renamed = await client.patch(path, json={"name": "kept"}, headers=account.headers)
    assert renamed.json()["auth"] == {"type": "bearer"}  # a PATCH without auth leaves it
    replaced = await client.patch(
        path, json={"auth": {"type": "header", "name": "x-token", "value": "second"}}, headers=account.headers
    )
    assert replaced.status_code == 200, replaced.text
    assert replaced.json()["auth"] == {"type": "header", "name": "x-token"}
    requiring(destination, "x-token", "second")
    made = await make_task(ctx, destination.url, endpoint_id=endpoint, destination_id=created["id"])
    async with running(ctx):
        await settled(ctx, made["task"], "succeeded")
    assert "authorization" not in destination.requests[0].headers
    cleared = await client.patch(path, json={"auth": None}, headers=account.headers)
    assert cleared.json()["auth"] is None


@pytest.mark.parametrize(
    ("auth", "field"),
    [
        ({"type": "basic", "username": "a:b", "password": "x"}, "auth.username"),
        ({"type": "bearer", "token": "line\nbreak"}, "auth.token"),
        ({"type": "header", "name": "x-hookyard-event-id", "value": "x"}, "auth.name"),
        ({"type": "header", "name": "webhook-signature", "value": "x"}, "auth.name"),
        ({"type": "header", "name": "bad name", "value": "x"}, "auth.name"),
        ({"type": "nonsense"}, "auth.type"),
        ({"type": "bearer", "token": "t", "extra": 1}, "auth.extra"),
        (
            {"type": "oauth2_client_credentials", "token_url": "ftp://x", "client_id": "a", "client_secret": "b"},
            "auth.token_url",
        ),
    ],
)
async def test_bad_auth_is_a_400_naming_the_field(client: Any, account: Any, auth: dict[str, Any], field: str) -> None:
    endpoint = (await create_endpoint(client, account.headers))["id"]
    resp = await client.post(
        f"/v1/endpoints/{endpoint}/destinations",
        json={"url": "https://example.com/hook", "auth": auth},
        headers=account.headers,
    )
    assert resp.status_code == 400, resp.text
    error = resp.json()["error"]
    assert error["code"] == "validation_error"
    assert field in error["message"], error["message"]
