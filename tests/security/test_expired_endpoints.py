"""A temporary endpoint past its ``expires_at`` is gone on every surface, not only at the edge.

Until the sweep deletes it (a day later) its rows are still there; before the fix /v1, MCP and the inbox kept
reading and changing them. Now every route that names the endpoint, or an object of it (event, destination,
rule, label, delivery, allowlist entry, bulk retry, erasure), answers 410 ``endpoint_expired`` with a message naming
the endpoint and when it expired; lists leave it out; /api/start with its session makes a new one.

The routes are walked from the app itself (the OpenAPI document, the MCP tool list, the route table), so a
route added later is checked without being listed here; a new kind of id in a path fails until it is
classified below. Real Postgres and Redis, the app in the test's loop, the official MCP client over
Streamable HTTP. Expiry is set in the database, never waited for.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from litestar import Litestar

from control.db.context import Context, Principal
from control.mcp.registry import snake_case
from control.records.destinations import DestinationCreate
from control.records.erasures import EraseRequest
from control.records.labels import LabelRuleCreate
from control.service import erasures as erasures_service
from control.service import inbox_links
from control.service import labels as labels_service
from control.service import retries as retries_service
from control.service import trust as trust_service
from control.service.accounts import authenticate
from control.service.destinations import crud as destinations_service
from control.service.events.read import event_filters
from shared.samples import EVENT_TYPES
from shared.settings import Settings
from tests.conftest import Account, make_account
from tests.delivery.retries_support import fail_deliveries
from tests.events_support import Ev, live_app
from tests.helpers import assert_error, create_endpoint, db
from tests.mcp_client import connected

SINK = "http://127.0.0.1:9/hook"  # discard port: nothing listens, and nothing is sent to an expired endpoint
ID_PARAMETERS = {"endpoint_id", "event_id", "destination_id", "rule_id", "label_id", "delivery_id", "entry_id"}
ID_PARAMETERS |= {"retry_id", "erasure_id"}
"""Path parameters that name an endpoint or an object of one: each route with one must answer 410."""
ACCOUNT_LEVEL = {"schema_id", "alert_destination_id", "alert_id"}
"""Learned schemas belong to the account and outlive its endpoints (docs/reference/retention.md), as do alert
destinations and the alerts sent to them: not an endpoint's objects."""
_BODIES: dict[str, dict[str, Any]] = {
    "UpdateEndpoint": {"name": "renamed"},
    "UpdateAuthConfig": {"hmac_enabled": False},
    "AddAllowlistEntry": {"cidr": "198.51.100.0/24"},
    "CreateDestination": {"url": SINK},
    "UpdateDestination": {"name": "renamed"},
    "RotateDestinationSecret": {"overlap_s": 0},
    "DisableDestination": {"reason": "gone"},
    "CreateRule": {"name": "all", "condition_tree": {"op": "AND", "children": []}},
    "UpdateRule": {"name": "renamed"},
    "CreateLabelRule": {"path": "type", "output_key": "kind"},
    "UpdateLabelRule": {"color": "#112233"},
    "ReplayEvent": {"url": SINK},
    "RecordForward": {"url": SINK, "status": 200},
    "EraseEvents": {"field": "body.customer", "value": "cus_1"},
    "SendTestWebhook": {"provider": "payments", "event_type": EVENT_TYPES["payments"][0]},
    "update_destination_transform": {"transform": "function handler(request) { return request; }"},
}
"""A valid request body per operation that takes one, so that what is refused is the endpoint, not the body
(a tool of its own, with no /v1 operation, by its name)."""


def body_of(operation_id: str, ids: dict[str, str]) -> dict[str, Any]:
    assert operation_id in _BODIES, f"{operation_id}: add a valid body to _BODIES"
    body = _BODIES[operation_id]
    return {**body, "destination_ids": [ids["destination_id"]]} if operation_id == "CreateRule" else body


async def _populate(ctx: Context, principal: Principal, endpoint_id: str) -> dict[str, str]:
    """One of each object of the endpoint, made as the API makes them; their ids by path parameter name."""
    created = await destinations_service.create_destination(
        ctx, principal, endpoint_id, DestinationCreate(url=SINK, forward_all=True)
    )
    assert created.rule is not None
    label = await labels_service.create_label(
        ctx, principal, endpoint_id, LabelRuleCreate(path="type", output_key="kind")
    )
    entry, _ = await trust_service.add_allowlist_entry(ctx, principal, endpoint_id, "203.0.113.7")
    async with db(ctx.settings.database_url) as conn:
        [failed] = await fail_deliveries(
            conn, [Ev(endpoint_id=endpoint_id)], destination_id=created.id, rule_id=created.rule.id, url=SINK
        )
    job, _ = await retries_service.retry_deliveries(ctx, principal, endpoint_id, event_filters())
    erasure = await erasures_service.erase_events(
        ctx, principal, endpoint_id, EraseRequest(field="body.customer", value="cus_1")
    )
    return {
        "endpoint_id": endpoint_id,
        "event_id": failed.event_id,
        "destination_id": created.id,
        "rule_id": created.rule.id,
        "label_id": label.id,
        "delivery_id": failed.delivery_id,
        "entry_id": entry.id,
        "retry_id": job.id,
        "erasure_id": erasure.id,
    }


async def _expire(ctx: Context, endpoint_id: str) -> str:
    """Sets ``expires_at`` a minute into the past; answers it as the 410's message writes it."""
    async with db(ctx.settings.database_url) as conn:
        at: datetime = await conn.fetchval(
            "UPDATE endpoints SET expires_at = now() - interval '1 minute' WHERE id = $1 AND temporary "
            "RETURNING expires_at",
            endpoint_id,
        )
    return at.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _expired(error: dict[str, str], endpoint_id: str, at: str, where: str) -> None:
    assert error["code"] == "endpoint_expired", f"{where}: {error}"
    assert f"endpoint {endpoint_id!r} expired at {at}" in error["message"], f"{where}: {error}"


def _operations(app: Litestar) -> list[tuple[str, str, dict[str, Any]]]:
    document = app.openapi_schema.to_schema()
    return [
        (method.upper(), path, operation)
        for path, item in document["paths"].items()
        for method, operation in item.items()
        if path.startswith("/v1/")
    ]


def _id_parameters(operation: dict[str, Any]) -> set[str]:
    names = {p["name"] for p in operation.get("parameters", []) if p["in"] == "path"}
    unknown = names - ID_PARAMETERS - ACCOUNT_LEVEL
    assert not unknown, f"{operation['operationId']}: classify path parameter(s) {unknown} in this module"
    return names & ID_PARAMETERS


def _request(method: str, path: str, operation: dict[str, Any], ids: dict[str, str]) -> dict[str, Any]:
    url = path.format(**{name: ids[name] for name in _id_parameters(operation)})
    request: dict[str, Any] = {"method": method, "url": url}
    if "requestBody" in operation:
        request["json"] = body_of(operation["operationId"], ids)
    return request


@pytest.fixture
async def app(settings: Settings) -> AsyncIterator[tuple[httpx.AsyncClient, Litestar]]:
    async with live_app(settings) as (client, application):
        yield client, application


@pytest.fixture
async def v1_expired(app, ctx: Context, account: Account) -> tuple[dict[str, str], str]:
    """A registered account's temporary endpoint (``temporary: true``, reachable with its key on /v1) with one
    object of each kind, then expired: (ids, expiry as the message writes it)."""
    client, _ = app
    made = await create_endpoint(client, account.headers, name="doomed", temporary=True)
    ids = await _populate(ctx, await authenticate(ctx, f"Bearer {account.key}", allow_temporary=False), made["id"])
    return ids, await _expire(ctx, made["id"])


@pytest.fixture
async def started(app, ctx: Context) -> dict[str, Any]:
    """An /api/start endpoint with one object of each kind, an inbox link made while it lived, then expired.
    The client keeps the session cookie."""
    client, _ = app
    resp = await client.post("/api/start")
    assert resp.status_code == 200, resp.text
    body = resp.json()
    principal = await authenticate(ctx, f"Bearer {body['api_token']}", allow_temporary=True)
    ids = await _populate(ctx, principal, body["endpoint_id"])
    link = await inbox_links.create_inbox_link(ctx, principal, body["endpoint_id"])
    return {**body, "ids": ids, "link": link.url, "at": await _expire(ctx, body["endpoint_id"])}


# -- /v1 ----------------------------------------------------------------------------------------------------


async def test_every_v1_route_of_an_expired_endpoint_or_its_objects_is_410(app, ctx, account, v1_expired) -> None:
    client, application = app
    ids, at = v1_expired
    walked = []
    for method, path, operation in _operations(application):
        if not _id_parameters(operation):
            continue
        assert "410" in operation["responses"], f"{method} {path} does not document 410"
        resp = await client.request(**_request(method, path, operation, ids), headers=account.headers)
        _expired(assert_error(resp, 410, "endpoint_expired"), ids["endpoint_id"], at, f"{method} {path}")
        walked.append(operation["operationId"])
    assert len(walked) >= 39, walked  # every endpoint route and child route of today, at least
    assert {"GetEvent", "GetDestination", "RetryDelivery", "WaitForEvent", "CreateInboxLink"} <= set(walked)
    # Nothing was changed meanwhile: the refused writes left the rows as they were.
    async with db(ctx.settings.database_url) as conn:
        row = await conn.fetchrow(
            "SELECT e.name, (SELECT name FROM destinations WHERE id = $2) AS destination, "
            "(SELECT count(*) FROM allowlist_entries WHERE endpoint_id = e.id) AS entries "
            "FROM endpoints e WHERE e.id = $1",
            ids["endpoint_id"],
            ids["destination_id"],
        )
    assert (row["name"], row["destination"], row["entries"]) == ("doomed", None, 1)


async def test_lists_leave_an_expired_endpoint_out(app, ctx, account, v1_expired) -> None:
    client, _ = app
    ids, _ = v1_expired
    kept = await create_endpoint(client, account.headers, name="kept", external_ref="kept")
    listed = (await client.get("/v1/endpoints", headers=account.headers)).json()["endpoints"]
    assert [e["id"] for e in listed] == [kept["id"]]
    async with db(ctx.settings.database_url) as conn:
        await conn.execute("UPDATE endpoints SET external_ref = 'doomed' WHERE id = $1", ids["endpoint_id"])
    found = await client.get("/v1/endpoints", params={"external_ref": "doomed"}, headers=account.headers)
    assert found.status_code == 200
    assert found.json()["endpoints"] == []


async def test_an_expired_endpoints_external_ref_and_quota_are_free_again(app, ctx, database_url) -> None:
    """Gone for the account, so not a 409 ``external_ref_taken`` by an endpoint no list shows, nor counted
    against the quota: the new endpoint takes the ref, and the expired one is deleted (tombstoned) at once."""
    client, _ = app
    owner = await make_account(database_url, endpoint_quota=1)
    old = await create_endpoint(client, owner.headers, name="old", external_ref="orders", temporary=True)
    await _expire(ctx, old["id"])
    new = await create_endpoint(client, owner.headers, name="new", external_ref="orders")
    assert_error(await client.get(f"/v1/endpoints/{old['id']}", headers=owner.headers), 404, "not_found")
    assert new["external_ref"] == "orders"
    # PATCH to a ref that an expired endpoint holds frees it the same way.
    async with db(database_url) as conn:
        await conn.execute("UPDATE accounts SET endpoint_quota = 2 WHERE id = $1", owner.id)
    other = await create_endpoint(client, owner.headers, name="other", external_ref="billing", temporary=True)
    await _expire(ctx, other["id"])
    resp = await client.patch(f"/v1/endpoints/{new['id']}", json={"external_ref": "billing"}, headers=owner.headers)
    assert resp.status_code == 200, resp.text
    async with db(database_url) as conn:
        assert await conn.fetchval("SELECT count(*) FROM endpoints WHERE id = $1", other["id"]) == 0


async def test_permanent_and_unexpired_endpoints_keep_working(app, ctx, account) -> None:
    client, application = app
    principal = await authenticate(ctx, f"Bearer {account.key}", allow_temporary=False)
    for temporary in (False, True):
        made = await create_endpoint(client, account.headers, name="live", temporary=temporary)
        ids = await _populate(ctx, principal, made["id"])
        for method, path, operation in _operations(application):
            if method != "GET" or not _id_parameters(operation):
                continue
            params = {"since": "2000-01-01T00:00:00Z", "timeout": 1} if path.endswith("/wait") else None
            request = _request(method, path, operation, ids)
            resp = await client.request(**request, params=params, headers=account.headers)
            assert resp.status_code == 200, f"{method} {path} (temporary={temporary}): {resp.text}"
        for route, body in (("destinations", {"url": SINK}), ("inbox-link", None)):
            resp = await client.post(f"/v1/endpoints/{made['id']}/{route}", json=body, headers=account.headers)
            assert resp.status_code in (200, 201), resp.text
        listed = (await client.get("/v1/endpoints", headers=account.headers)).json()["endpoints"]
        assert made["id"] in {e["id"] for e in listed}


# -- MCP ----------------------------------------------------------------------------------------------------


async def test_every_mcp_tool_on_an_expired_endpoint_or_its_objects_says_it_expired(app, started) -> None:
    _, application = app
    ids, at = started["ids"], started["at"]
    operations = {snake_case(op["operationId"]): op["operationId"] for _, _, op in _operations(application)}
    called = []
    async with connected(application, started["api_token"]) as client:
        for tool in (await client.list_tools()).tools:
            schema = tool.input_schema
            required = set(schema.get("required", []))
            named = {p for p in schema["properties"] if p.endswith("_id")}
            assert not named - ID_PARAMETERS - ACCOUNT_LEVEL, f"{tool.name}: classify {named} in this module"
            if not required & ID_PARAMETERS:
                continue
            arguments = {p: ids[p] for p in required & ID_PARAMETERS}
            operation = operations.get(tool.name, tool.name)
            # a request body's required fields, or a body that is valid only with one field of two (a replay)
            if (set(schema["properties"]) - ID_PARAMETERS) & required or operation == "ReplayEvent":
                arguments |= body_of(operations.get(tool.name, tool.name), ids)
            result = await client.call_tool(tool.name, arguments)
            assert result.is_error, f"{tool.name} succeeded on an expired endpoint: {result.structured_content}"
            envelope = json.loads(result.content[0].text)
            assert envelope == result.structured_content
            _expired(envelope["error"], ids["endpoint_id"], at, tool.name)
            called.append(tool.name)
        listed = await client.call_tool("list_endpoints", {})
        assert not listed.is_error
        assert listed.structured_content["endpoints"] == []
    assert len(called) >= 39, called
    assert {"get_endpoint", "create_destination", "create_inbox_link", "get_event", "wait_for_event"} <= set(called)


async def test_mcp_on_a_live_endpoint_still_works(app) -> None:
    client, application = app
    body = (await client.post("/api/start")).json()
    async with connected(application, body["api_token"]) as mcp:
        for tool, arguments in (("get_endpoint", {}), ("create_destination", {"url": SINK}), ("create_inbox_link", {})):
            result = await mcp.call_tool(tool, {"endpoint_id": body["endpoint_id"], **arguments})
            assert not result.is_error, f"{tool}: {result.content}"
        listed = await mcp.call_tool("list_endpoints", {})
        assert [e["id"] for e in listed.structured_content["endpoints"]] == [body["endpoint_id"]]


# -- the inbox and /api/start ------------------------------------------------------------------------------


async def test_every_inbox_route_of_an_expired_endpoint_is_410(app, started) -> None:
    client, application = app
    ids, at = started["ids"], started["at"]
    walked = []
    for route in application.routes:
        if not route.path.startswith("/inbox/{endpoint_id"):
            continue
        for method in sorted(set(route.methods) - {"OPTIONS", "HEAD"}):
            url = route.path.replace(":str}", "}").format(**ids)
            body = {"url": SINK} if method == "POST" else None
            for how, headers in (("session", {}), ("token", {"Authorization": f"Bearer {started['api_token']}"})):
                resp = await client.request(method, url, json=body, headers=headers)
                _expired(assert_error(resp, 410, "endpoint_expired"), ids["endpoint_id"], at, f"{how} {method} {url}")
            walked.append(f"{method} {route.path}")
    assert len(walked) >= 6, walked
    # A link made while the endpoint lived is not traded for a cookie either.
    resp = await client.get("/" + started["link"].split("/", 3)[3])
    _expired(assert_error(resp, 410, "endpoint_expired"), ids["endpoint_id"], at, "link")


async def test_api_start_with_the_expired_endpoints_cookie_makes_a_new_one(app, started) -> None:
    client, _ = app
    again = await client.post("/api/start")
    assert again.status_code == 200, again.text
    fresh = again.json()
    assert fresh["reused"] is False
    assert fresh["endpoint_id"] != started["endpoint_id"]
    assert fresh["ingest_url"] != started["ingest_url"]
    assert (await client.get(f"/inbox/{fresh['endpoint_id']}")).status_code == 200  # the same session opens it
    assert (await client.post("/api/start")).json()["endpoint_id"] == fresh["endpoint_id"]  # and reuses it
