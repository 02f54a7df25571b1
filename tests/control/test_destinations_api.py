"""/v1/endpoints/{id}/destinations and /v1/destinations/{id}: record shape, URL and header checks, the rule
created with a destination (one transaction), rules losing a deleted destination, the rules channel,
401/403/404 and tenant isolation."""

from __future__ import annotations

import asyncio
import re
from datetime import timedelta
from typing import Any

import pytest

from control.db import rules as db_rules
from control.service.accounts import issue_key
from control.service.destinations import MAX_DESTINATIONS
from shared import ids
from tests.helpers import (  # noqa: F401 - fixtures
    ULID,
    assert_error,
    concurrent_client,
    config_version,
    create_endpoint,
    db,
    module_database_url,
    parse_ts,
    utcnow,
)

DESTINATION_FIELDS = {
    "id",
    "endpoint_id",
    "name",
    "url",
    "headers",
    "sign_deliveries",
    "rate_limit_per_s",
    "ordering",
    "ordering_key",
    "deduplicate_window_s",
    "created_at",
    "updated_at",
    "transform",
}
RULE_FIELDS = {"id", "endpoint_id", "name", "condition_tree", "destination_ids", "active", "created_at", "updated_at"}
TREE = {
    "op": "AND",
    "children": [
        {"field": "body.type", "operator": "equals", "value": "invoice.paid"},
        {"field": "header.X-Shop-Topic", "operator": "exists"},
    ],
}


def list_path(endpoint: dict[str, Any]) -> str:
    return f"/v1/endpoints/{endpoint['id']}/destinations"


async def add(client, account, endpoint: dict[str, Any], **body: Any) -> Any:
    body.setdefault("url", "https://example.com/hooks")
    return await client.post(list_path(endpoint), json=body, headers=account.headers)


async def added(client, account, endpoint: dict[str, Any], **body: Any) -> dict[str, Any]:
    resp = await add(client, account, endpoint, **body)
    assert resp.status_code == 201, resp.text
    made = resp.json()
    assert made.pop("signing_secret").startswith("whsec_")  # in the create answer only
    return made


async def listed(client, account, endpoint: dict[str, Any]) -> list[dict[str, Any]]:
    resp = await client.get(list_path(endpoint), headers=account.headers)
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert set(body) == {"destinations"}
    return body["destinations"]


async def rules_of(client, account, endpoint: dict[str, Any]) -> list[dict[str, Any]]:
    resp = await client.get(f"/v1/endpoints/{endpoint['id']}/rules", headers=account.headers)
    assert resp.status_code == 200, resp.text
    return resp.json()["rules"]


IDLE_HEALTH = {
    "attempts": 0,
    "succeeded": 0,
    "failed": 0,
    "success_rate": None,
    "latency_ms": {"p50": None, "p95": None, "p99": None},
    "last_status": None,
    "last_attempt_at": None,
    "consecutive_failures": 0,
    "circuit": "closed",
    "reopens_at": None,
    "paused_until": None,
    "fifo_waiting": 0,
}
"""The ``health`` of a destination nothing was delivered to (tests/workers/test_stats.py covers the rest)."""


async def fetched(client, headers: dict[str, str], destination_id: str) -> dict[str, Any]:
    """GET /v1/destinations/{id}: the record without its ``health``, which must be that of an idle one."""
    resp = await client.get(f"/v1/destinations/{destination_id}", headers=headers)
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body.pop("health") == IDLE_HEALTH
    return body


# -- create, list, get ------------------------------------------------------------------------------------


async def test_create_returns_the_record_and_no_rule(client, account):
    made = await create_endpoint(client, account.headers)
    before = utcnow()
    resp = await add(client, account, made, url="https://example.com/hooks?x=1")
    assert resp.status_code == 201, resp.text
    body = resp.json()
    assert body.pop("signing_secret").startswith("whsec_")  # shown on create (and rotate-secret) only
    assert set(body) == DESTINATION_FIELDS
    assert re.fullmatch(rf"dst_{ULID}", body["id"])
    assert body["endpoint_id"] == made["id"]
    assert body["url"] == "https://example.com/hooks?x=1"
    assert body["name"] is None
    assert body["headers"] is None
    created = parse_ts(body["created_at"])
    assert created == parse_ts(body["updated_at"])
    assert before - timedelta(seconds=5) <= created <= utcnow() + timedelta(seconds=5)
    assert await listed(client, account, made) == [body]
    assert await fetched(client, account.headers, body["id"]) == body
    assert await rules_of(client, account, made) == []


async def test_create_with_name_and_headers(client, account):
    made = await create_endpoint(client, account.headers)
    body = await added(client, account, made, name="Billing", headers={"Authorization": "Bearer t", "X-Env": " prod "})
    assert body["name"] == "Billing"
    assert body["headers"] == {"authorization": "Bearer t", "x-env": "prod"}


async def test_forward_all_also_creates_a_rule_matching_everything(client, account):
    made = await create_endpoint(client, account.headers)
    body = await added(client, account, made, name="Sink", forward_all=True)
    assert set(body) == DESTINATION_FIELDS | {"rule"}
    rule = body["rule"]
    assert set(rule) == RULE_FIELDS
    assert re.fullmatch(rf"rule_{ULID}", rule["id"])
    assert rule["endpoint_id"] == made["id"]
    assert rule["condition_tree"] == {"op": "AND", "children": []}
    assert rule["destination_ids"] == [body["id"]]
    assert rule["active"] is True
    assert rule["name"] == "forward to Sink"
    assert await rules_of(client, account, made) == [rule]
    assert (await client.get(f"/v1/rules/{rule['id']}", headers=account.headers)).json() == rule
    # the destination's own record carries no rule
    assert set(await fetched(client, account.headers, body["id"])) == DESTINATION_FIELDS


async def test_condition_tree_creates_a_rule_with_the_normalised_tree_and_rule_name(client, account):
    made = await create_endpoint(client, account.headers)
    body = await added(client, account, made, condition_tree=TREE, rule_name="paid invoices")
    rule = body["rule"]
    assert rule["name"] == "paid invoices"
    assert rule["condition_tree"]["children"][1] == {"field": "header.x-shop-topic", "operator": "exists"}
    assert rule["destination_ids"] == [body["id"]]
    assert await rules_of(client, account, made) == [rule]


async def test_default_rule_name_uses_the_url_host_without_a_name(client, account):
    """Only scheme and host: the rest of a URL may be its secret (a Slack webhook's path, ``?token=``)."""
    made = await create_endpoint(client, account.headers)
    body = await added(client, account, made, url="http://alice:pw@127.0.0.1:9/T0/SECRET?token=Q", forward_all=True)
    assert body["rule"]["name"] == "forward to http://127.0.0.1:9"


async def test_forward_all_false_and_null_tree_create_no_rule(client, account):
    made = await create_endpoint(client, account.headers)
    body = await added(client, account, made, forward_all=False, condition_tree=None)
    assert "rule" not in body
    assert await rules_of(client, account, made) == []


async def test_list_is_oldest_first(client, account):
    made = await create_endpoint(client, account.headers)
    first = await added(client, account, made, name="a")
    second = await added(client, account, made, name="b")
    assert [d["id"] for d in await listed(client, account, made)] == [first["id"], second["id"]]


async def test_accepted_urls(client, account, subtests):
    made = await create_endpoint(client, account.headers)
    for url in [
        "http://127.0.0.1:9/x?y=1",
        "HTTPS://Example.COM",
        "https://user:pw@example.com/path",
        "http://[::1]:8080/",
        "https://bücher.example/hook",
        "https://example.com/" + "a" * (2048 - len("https://example.com/")),
    ]:
        with subtests.test(url=url):
            assert (await added(client, account, made, url=url))["url"] == url


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "url"),
        ({"url": None}, "url"),
        ({"url": 5}, "url"),
        ({"url": ""}, "url"),
        ({"url": "ftp://example.com/x"}, "url"),
        ({"url": "example.com/hooks"}, "url"),
        ({"url": "/relative"}, "url"),
        ({"url": "http://"}, "url"),
        ({"url": "http:///path"}, "url"),
        ({"url": "https://exa mple.com/"}, "url"),
        ({"url": "https://example.com/\n"}, "url"),
        ({"url": " https://example.com/"}, "url"),
        ({"url": "http://example.com:99999/"}, "url"),
        ({"url": "http://example.com:0/"}, "url"),
        ({"url": "http://[::1/"}, "url"),
        ({"url": "https://example.com/" + "a" * 2029}, "url"),
        ({"url": "https://example.com/", "name": ""}, "name"),
        ({"url": "https://example.com/", "name": "   "}, "name"),
        ({"url": "https://example.com/", "name": "x" * 201}, "name"),
        ({"url": "https://example.com/", "forward_all": "yes"}, "forward_all"),
        ({"url": "https://example.com/", "rule_name": "r"}, "rule_name"),
        ({"url": "https://example.com/", "forward_all": True, "condition_tree": {"op": "AND", "children": []}}, None),
        ({"url": "https://example.com/", "forward_all": True, "rule_name": ""}, "rule_name"),
        ({"url": "https://example.com/", "extra": 1}, "extra"),
        ({"url": "https://example.com/", "headers": {"Host": "x"}}, "headers.Host"),
        ({"url": "https://example.com/", "headers": ["x"]}, "headers"),
    ],
)
async def test_create_rejects_invalid_bodies_and_stores_nothing(client, account, body, field):
    made = await create_endpoint(client, account.headers)
    resp = await client.post(list_path(made), json=body, headers=account.headers)
    err = assert_error(resp, 400, "validation_error", field=field)
    if field is None:
        assert err["message"].startswith("forward_all: cannot be combined with condition_tree")
    assert await listed(client, account, made) == []
    assert await rules_of(client, account, made) == []


@pytest.mark.parametrize(
    ("tree", "message"),
    [
        ({"op": "AND", "children": [{"field": "body.x", "operator": "gt", "value": 1}]}, "children[0].operator"),
        ({"field": "body.x", "operator": "regex", "value": "(a"}, "value: invalid RE2 pattern"),
        ([], "condition_tree: must be an object"),
        ("AND", "condition_tree: must be an object"),
    ],
)
async def test_a_malformed_tree_stores_neither_destination_nor_rule(client, account, tree, message):
    made = await create_endpoint(client, account.headers)
    resp = await add(client, account, made, condition_tree=tree)
    err = assert_error(resp, 400, "invalid_condition_tree", field=None)
    assert err["message"].startswith("condition_tree")
    assert message in err["message"]
    assert await listed(client, account, made) == []
    assert await rules_of(client, account, made) == []


async def test_destination_and_rule_are_created_in_one_transaction(client, account, monkeypatch):
    made = await create_endpoint(client, account.headers)

    async def failing_insert(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("the rule insert fails after the destination insert")

    monkeypatch.setattr(db_rules, "insert", failing_insert)
    resp = await add(client, account, made, forward_all=True)
    assert_error(resp, 500, "internal_error")
    monkeypatch.undo()
    assert await listed(client, account, made) == []
    assert await rules_of(client, account, made) == []


async def test_destinations_are_capped_per_endpoint(client, account, database_url):
    made = await create_endpoint(client, account.headers)
    async with db(database_url) as conn:
        await conn.executemany(
            "INSERT INTO destinations (id, endpoint_id, url) VALUES ($1, $2, 'https://example.com/')",
            [(ids.new_id("dst"), made["id"]) for _ in range(MAX_DESTINATIONS - 1)],
        )
    await added(client, account, made)
    err = assert_error(await add(client, account, made), 400, "validation_error")
    assert f"{MAX_DESTINATIONS} destinations" in err["message"]
    assert len(await listed(client, account, made)) == MAX_DESTINATIONS


# -- update -----------------------------------------------------------------------------------------------


async def test_patch_changes_only_the_given_fields_and_moves_updated_at(client, account):
    made = await create_endpoint(client, account.headers)
    dest = await added(client, account, made, name="old", headers={"x-a": "1"})
    resp = await client.patch(
        f"/v1/destinations/{dest['id']}", json={"url": "http://10.0.0.1:8080/new"}, headers=account.headers
    )
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert set(body) == DESTINATION_FIELDS
    assert body["url"] == "http://10.0.0.1:8080/new"
    assert (body["name"], body["headers"], body["created_at"]) == ("old", {"x-a": "1"}, dest["created_at"])
    assert parse_ts(body["updated_at"]) > parse_ts(dest["updated_at"])
    assert await fetched(client, account.headers, dest["id"]) == body


async def test_patch_headers_replaces_them_and_null_clears_name_and_headers(client, account):
    made = await create_endpoint(client, account.headers)
    dest = await added(client, account, made, name="n", headers={"x-a": "1"})
    path = f"/v1/destinations/{dest['id']}"
    body = (await client.patch(path, json={"headers": {"X-B": "2", "X-C": ""}}, headers=account.headers)).json()
    assert body["headers"] == {"x-b": "2", "x-c": ""}
    body = (await client.patch(path, json={"headers": None, "name": None}, headers=account.headers)).json()
    assert (body["headers"], body["name"]) == (None, None)
    body = (await client.patch(path, json={"headers": {}}, headers=account.headers)).json()
    assert body["headers"] == {}


async def test_patch_with_an_empty_body_changes_nothing(client, account):
    made = await create_endpoint(client, account.headers)
    dest = await added(client, account, made)
    resp = await client.patch(f"/v1/destinations/{dest['id']}", json={}, headers=account.headers)
    assert resp.status_code == 200
    assert resp.json() == dest


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"url": "ftp://x/"}, "url"),
        ({"url": None}, "url"),
        ({"name": ""}, "name"),
        ({"headers": {"host": "evil"}}, "headers.host"),
        ({"headers": {"Content-Length": "1"}}, "headers.Content-Length"),
        ({"headers": {"Transfer-Encoding": "chunked"}}, "headers.Transfer-Encoding"),
        ({"headers": {"connection": "close"}}, "headers.connection"),
        ({"headers": {"Upgrade": "h2c"}}, "headers.Upgrade"),
        ({"headers": {"Keep-Alive": "1"}}, "headers.Keep-Alive"),
        ({"headers": {"X-Hookyard-Event-Id": "evt"}}, "headers.X-Hookyard-Event-Id"),
        ({"headers": {"bad name": "x"}}, "headers"),
        ({"headers": {"x:y": "x"}}, "headers"),
        ({"headers": {"": "x"}}, "headers"),
        ({"headers": {"X-A": "1", "x-a": "2"}}, "headers.x-a"),
        ({"headers": {"x-a": "line\nbreak"}}, "headers.x-a"),
        ({"headers": {"x-a": "\r"}}, "headers.x-a"),
        ({"headers": {"x-a": "caf\u00e9"}}, "headers.x-a"),
        ({"headers": {"x-a": "x" * 8193}}, "headers.x-a"),
        ({"headers": {"x-a": 1}}, "headers[...]"),  # msgspec names no key inside an object
        ({"headers": {f"x-{i}": "v" for i in range(51)}}, "headers"),
        ({"headers": "x"}, "headers"),
        ({"forward_all": True}, "forward_all"),
    ],
)
async def test_patch_rejects_invalid_bodies_and_changes_nothing(client, account, body, field):
    made = await create_endpoint(client, account.headers)
    dest = await added(client, account, made, name="keep", headers={"x-a": "1"})
    resp = await client.patch(f"/v1/destinations/{dest['id']}", json=body, headers=account.headers)
    assert_error(resp, 400, "validation_error", field=field)
    assert await fetched(client, account.headers, dest["id"]) == dest


# -- delete -----------------------------------------------------------------------------------------------


async def test_delete_returns_id_and_deleted_then_404(client, account):
    made = await create_endpoint(client, account.headers)
    dest = await added(client, account, made)
    resp = await client.delete(f"/v1/destinations/{dest['id']}", headers=account.headers)
    assert resp.status_code == 200, resp.text
    assert resp.json() == {"id": dest["id"], "deleted": True, "deleted_rule_ids": []}
    assert_error(await client.get(f"/v1/destinations/{dest['id']}", headers=account.headers), 404, "not_found")
    assert_error(await client.delete(f"/v1/destinations/{dest['id']}", headers=account.headers), 404, "not_found")
    assert await listed(client, account, made) == []


async def test_delete_removes_it_from_rules_and_deletes_rules_left_without_destinations(client, account):
    made = await create_endpoint(client, account.headers)
    first = await added(client, account, made, name="first", forward_all=True)
    second = await added(client, account, made, name="second")
    shared_rule = (
        await client.post(
            f"/v1/endpoints/{made['id']}/rules",
            json={"name": "both", "condition_tree": TREE, "destination_ids": [first["id"], second["id"]]},
            headers=account.headers,
        )
    ).json()
    resp = await client.delete(f"/v1/destinations/{first['id']}", headers=account.headers)
    assert resp.json() == {"id": first["id"], "deleted": True, "deleted_rule_ids": [first["rule"]["id"]]}
    rules = await rules_of(client, account, made)
    assert [r["id"] for r in rules] == [shared_rule["id"]]
    assert rules[0]["destination_ids"] == [second["id"]]
    assert parse_ts(rules[0]["updated_at"]) > parse_ts(shared_rule["updated_at"])
    assert_error(await client.get(f"/v1/rules/{first['rule']['id']}", headers=account.headers), 404, "not_found")
    assert [d["id"] for d in await listed(client, account, made)] == [second["id"]]


async def test_delete_removes_pending_delivery_tasks_but_keeps_the_delivery_log(client, account, database_url):
    made = await create_endpoint(client, account.headers)
    dest = await added(client, account, made, forward_all=True)
    async with db(database_url) as conn:
        await conn.execute(
            """INSERT INTO delivery_tasks (id, endpoint_id, event_id, event_received_at, rule_id, destination_id)
               VALUES ($1, $2, 'evt_x', now(), $3, $4)""",
            ids.new_id("task"),
            made["id"],
            dest["rule"]["id"],
            dest["id"],
        )
        await conn.execute(
            """INSERT INTO deliveries (id, endpoint_id, event_id, destination_id, destination_url, source,
                                       attempt_number, success)
               VALUES ($1, $2, 'evt_x', $3, $4, 'rule', 1, true)""",
            ids.new_id("dlv"),
            made["id"],
            dest["id"],
            dest["url"],
        )
    assert (await client.delete(f"/v1/destinations/{dest['id']}", headers=account.headers)).status_code == 200
    async with db(database_url) as conn:
        assert await conn.fetchval("SELECT count(*) FROM delivery_tasks WHERE destination_id = $1", dest["id"]) == 0
        assert await conn.fetchval("SELECT count(*) FROM deliveries WHERE destination_id = $1", dest["id"]) == 1


async def test_concurrent_deletes_of_one_destination_give_one_200_and_404s(settings, account):
    async with concurrent_client(settings) as c:
        made = await create_endpoint(c, account.headers)
        for _ in range(3):
            dest = await added(c, account, made, forward_all=True)
            results = await asyncio.gather(
                *(c.delete(f"/v1/destinations/{dest['id']}", headers=account.headers) for _ in range(4))
            )
            assert sorted(r.status_code for r in results) == [200, 404, 404, 404]
            winner = next(r.json() for r in results if r.status_code == 200)
            assert winner["deleted_rule_ids"] == [dest["rule"]["id"]]
        assert await listed(c, account, made) == []
        assert await rules_of(c, account, made) == []


async def test_destinations_go_with_their_endpoint(client, account, database_url):
    made = await create_endpoint(client, account.headers)
    dest = await added(client, account, made, forward_all=True)
    assert (await client.delete(f"/v1/endpoints/{made['id']}", headers=account.headers)).status_code == 200
    assert_error(await client.get(f"/v1/destinations/{dest['id']}", headers=account.headers), 404, "not_found")
    async with db(database_url) as conn:
        assert await conn.fetchval("SELECT count(*) FROM rules WHERE id = $1", dest["rule"]["id"]) == 0


# -- the config version ------------------------------------------------------------------------------


async def test_every_change_bumps_the_config_version(client, account, database_url):
    """What flush workers check per batch (instead of a message): every committed change moves it, refused
    and empty writes do not."""
    made = await create_endpoint(client, account.headers)
    seen = [await config_version(database_url, made["id"])]

    async def moved() -> bool:
        seen.append(await config_version(database_url, made["id"]))
        return seen[-1] > seen[-2]

    dest = await added(client, account, made)
    assert await moved()
    await added(client, account, made, forward_all=True)
    assert await moved()
    resp = await client.patch(f"/v1/destinations/{dest['id']}", json={"name": "n"}, headers=account.headers)
    assert resp.status_code == 200
    assert await moved()
    assert (await client.delete(f"/v1/destinations/{dest['id']}", headers=account.headers)).status_code == 200
    assert await moved()
    assert (await add(client, account, made, url="ftp://x/")).status_code == 400
    assert (await add(client, account, made, condition_tree={"op": "X", "children": []})).status_code == 400
    assert not await moved()
    other = await added(client, account, made, name="marker")
    assert await moved()
    assert (await client.patch(f"/v1/destinations/{other['id']}", json={}, headers=account.headers)).status_code == 200
    assert not await moved()


# -- 401, 403, 404 and tenant isolation -------------------------------------------------------------------


async def test_every_route_answers_401_without_a_valid_key(client, account, subtests):
    made = await create_endpoint(client, account.headers)
    dest = await added(client, account, made)
    routes = [
        ("GET", list_path(made), None),
        ("POST", list_path(made), {"url": "https://example.com/"}),
        ("GET", f"/v1/destinations/{dest['id']}", None),
        ("PATCH", f"/v1/destinations/{dest['id']}", {"name": "x"}),
        ("DELETE", f"/v1/destinations/{dest['id']}", None),
    ]
    for method, url, payload in routes:
        for headers in ({}, {"Authorization": "Bearer hy_live_" + "0" * 32}, {"Authorization": "Basic eDp5"}):
            with subtests.test(method=method, url=url, headers=headers):
                resp = await client.request(method, url, json=payload, headers=headers)
                assert_error(resp, 401, "unauthorized")
    assert await listed(client, account, made) == [dest]


async def test_unknown_ids_are_404(client, account, subtests):
    for endpoint_id in ("ep_01JAAAAAAAAAAAAAAAAAAAAAAA", "nope", "dst_01JAAAAAAAAAAAAAAAAAAAAAAA"):
        for method, payload in (("GET", None), ("POST", {"url": "https://example.com/"})):
            with subtests.test(endpoint_id=endpoint_id, method=method):
                resp = await client.request(
                    method, f"/v1/endpoints/{endpoint_id}/destinations", json=payload, headers=account.headers
                )
                assert_error(resp, 404, "not_found")
    for destination_id in ("dst_01JAAAAAAAAAAAAAAAAAAAAAAA", "x", "ep_01JAAAAAAAAAAAAAAAAAAAAAAA", "dst_%00"):
        for method, payload in (("GET", None), ("PATCH", {"name": "x"}), ("DELETE", None)):
            with subtests.test(destination_id=destination_id, method=method):
                resp = await client.request(
                    method, f"/v1/destinations/{destination_id}", json=payload, headers=account.headers
                )
                assert_error(resp, 404, "not_found")


async def test_another_accounts_endpoint_and_destination_are_404_and_untouched(
    client, account, other_account, subtests
):
    mine = await create_endpoint(client, account.headers)
    dest = await added(client, account, mine, name="mine", forward_all=True)
    for method, payload in (("GET", None), ("POST", {"url": "https://evil.example/", "forward_all": True})):
        with subtests.test(method=method):
            resp = await client.request(method, list_path(mine), json=payload, headers=other_account.headers)
            assert_error(resp, 404, "not_found")
    for method, payload in (("GET", None), ("PATCH", {"url": "https://evil.example/"}), ("DELETE", None)):
        with subtests.test(method=method, destination=True):
            resp = await client.request(
                method, f"/v1/destinations/{dest['id']}", json=payload, headers=other_account.headers
            )
            assert_error(resp, 404, "not_found")
    assert await listed(client, account, mine) == [{k: v for k, v in dest.items() if k != "rule"}]
    assert await rules_of(client, account, mine) == [dest["rule"]]


async def test_a_read_only_key_reads_but_cannot_change(client, account, database_url, subtests):
    made = await create_endpoint(client, account.headers)
    dest = await added(client, account, made)
    async with db(database_url) as conn:
        ro = {"Authorization": f"Bearer {await issue_key(conn, account.id, read_only=True)}"}
    assert (await client.get(list_path(made), headers=ro)).json() == {"destinations": [dest]}
    assert await fetched(client, ro, dest["id"]) == dest
    for method, url, payload in (
        ("POST", list_path(made), {"url": "https://example.com/", "forward_all": True}),
        ("PATCH", f"/v1/destinations/{dest['id']}", {"name": "x"}),
        ("DELETE", f"/v1/destinations/{dest['id']}", None),
    ):
        with subtests.test(method=method):
            assert_error(await client.request(method, url, json=payload, headers=ro), 403, "forbidden")
    assert await listed(client, account, made) == [dest]
    assert await rules_of(client, account, made) == []


async def test_openapi_documents_the_destination_routes(client):
    schema = (await client.get("/schema/openapi.json")).json()
    item = schema["paths"]["/v1/endpoints/{endpoint_id}/destinations"]
    assert {"200", "401", "404"} <= set(item["get"]["responses"])
    assert {"201", "400", "401", "403", "404"} <= set(item["post"]["responses"])
    one = schema["paths"]["/v1/destinations/{destination_id}"]
    assert {"200", "401", "404"} <= set(one["get"]["responses"])
    assert {"200", "400", "401", "403", "404"} <= set(one["patch"]["responses"])
    assert {"200", "401", "403", "404"} <= set(one["delete"]["responses"])
    assert set(schema["components"]["schemas"]["Destination"]["properties"]) == DESTINATION_FIELDS
    detail = schema["components"]["schemas"]["DestinationDetail"]["properties"]
    assert set(detail) == DESTINATION_FIELDS | {"health"}
    assert set(schema["components"]["schemas"]["DestinationHealth"]["properties"]) == set(IDLE_HEALTH)
