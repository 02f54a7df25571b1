"""Destinations updated (only the given fields; refusals change nothing) and deleted: gone from rules,
rules left without destinations deleted, pending tasks dropped but the delivery log kept."""

from __future__ import annotations

import asyncio

import pytest

from shared import ids
from tests.control.destinations.support import DESTINATION_FIELDS, TREE, added, fetched, listed, rules_of
from tests.helpers import assert_error, concurrent_client, create_endpoint, db, parse_ts


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
        ({"headers": {"x-a": 1}}, "headers.x-a"),  # msgspec names no key inside an object: its first refused entry
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
