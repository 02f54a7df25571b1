"""Rules updated (active toggles, each field, refusals that change nothing) and deleted (then 404; the
destinations stay)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.control.rules.support import EVERYTHING, created, fetched, listed, setup
from tests.helpers import assert_error, parse_ts


async def test_patch_toggles_active_both_ways(client, account):
    made, (d0, _) = await setup(client, account)
    rule = await created(client, account, made, destination_ids=[d0])
    path = f"/v1/rules/{rule['id']}"
    off = (await client.patch(path, json={"active": False}, headers=account.headers)).json()
    assert off["active"] is False
    assert parse_ts(off["updated_at"]) > parse_ts(rule["updated_at"])
    assert {k: v for k, v in off.items() if k not in ("active", "updated_at")} == {
        k: v for k, v in rule.items() if k not in ("active", "updated_at")
    }
    on = (await client.patch(path, json={"active": True}, headers=account.headers)).json()
    assert on["active"] is True
    assert await fetched(client, account, rule) == on


async def test_patch_each_field(client, account):
    made, (d0, d1) = await setup(client, account)
    rule = await created(client, account, made, destination_ids=[d0])
    path = f"/v1/rules/{rule['id']}"
    body = (await client.patch(path, json={"name": "renamed"}, headers=account.headers)).json()
    assert body["name"] == "renamed"
    body = (
        await client.patch(
            path,
            json={"condition_tree": {"op": "OR", "children": [{"field": "header.X-A", "operator": "exists"}]}},
            headers=account.headers,
        )
    ).json()
    assert body["condition_tree"] == {"op": "OR", "children": [{"field": "header.x-a", "operator": "exists"}]}
    body = (await client.patch(path, json={"destination_ids": [d1, d0]}, headers=account.headers)).json()
    assert body["destination_ids"] == [d1, d0]
    assert parse_ts(body["updated_at"]) > parse_ts(rule["updated_at"])
    body = (await client.patch(path, json={"destination_ids": [d0]}, headers=account.headers)).json()
    assert body["destination_ids"] == [d0]
    together = {"name": "all", "active": False, "condition_tree": EVERYTHING, "destination_ids": [d1]}
    body = (await client.patch(path, json=together, headers=account.headers)).json()
    assert {k: body[k] for k in together} == together
    assert body["created_at"] == rule["created_at"]
    assert await fetched(client, account, rule) == body


async def test_patch_with_an_empty_body_changes_nothing(client, account):
    made, (d0, _) = await setup(client, account)
    rule = await created(client, account, made, destination_ids=[d0])
    resp = await client.patch(f"/v1/rules/{rule['id']}", json={}, headers=account.headers)
    assert resp.status_code == 200
    assert resp.json() == rule


@pytest.mark.parametrize(
    ("body", "code", "field"),
    [
        (
            {"condition_tree": {"op": "AND", "children": [{"field": "body.x", "operator": "gt", "value": 1}]}},
            "invalid_condition_tree",
            "condition_tree.children[0].operator",
        ),
        ({"condition_tree": None}, "invalid_condition_tree", "condition_tree"),
        (
            {"name": "renamed", "condition_tree": {"op": "X", "children": []}},
            "invalid_condition_tree",
            "condition_tree.op",
        ),
        ({"destination_ids": []}, "validation_error", "destination_ids"),
        ({"destination_ids": None}, "validation_error", "destination_ids"),
        ({"destination_ids": ["{d1}", "{d1}"]}, "validation_error", "destination_ids[1]"),
        ({"active": False, "destination_ids": ["{d1}", "{foreign}"]}, "validation_error", "destination_ids[1]"),
        ({"destination_ids": ["{sibling}"]}, "validation_error", "destination_ids[0]"),
        ({"name": None}, "validation_error", "name"),
        ({"active": None}, "validation_error", "active"),
        ({"endpoint_id": "ep_01JAAAAAAAAAAAAAAAAAAAAAAA"}, "validation_error", "endpoint_id"),
    ],
)
async def test_patch_rejects_invalid_bodies_and_changes_nothing(client, account, other_account, body, code, field):
    made, (d0, d1) = await setup(client, account)
    _, (sibling, _) = await setup(client, account)
    _, (foreign, _) = await setup(client, other_account)
    rule = await created(client, account, made, destination_ids=[d0])
    names = {"d1": d1, "sibling": sibling, "foreign": foreign}

    def fill(value: Any) -> Any:
        if isinstance(value, str) and value.startswith("{"):
            return value.format(**names)
        if isinstance(value, list):
            return [fill(v) for v in value]
        return value

    resp = await client.patch(
        f"/v1/rules/{rule['id']}", json={k: fill(v) for k, v in body.items()}, headers=account.headers
    )
    assert_error(resp, 400, code, field=field)
    assert await fetched(client, account, rule) == rule


async def test_delete_returns_id_and_deleted_then_404_and_keeps_destinations(client, account):
    made, (d0, _) = await setup(client, account)
    rule = await created(client, account, made, destination_ids=[d0])
    resp = await client.delete(f"/v1/rules/{rule['id']}", headers=account.headers)
    assert resp.status_code == 200, resp.text
    assert resp.json() == {"id": rule["id"], "deleted": True}
    assert_error(await client.get(f"/v1/rules/{rule['id']}", headers=account.headers), 404, "not_found")
    assert_error(await client.delete(f"/v1/rules/{rule['id']}", headers=account.headers), 404, "not_found")
    assert await listed(client, account, made) == []
    assert (await client.get(f"/v1/destinations/{d0}", headers=account.headers)).status_code == 200
