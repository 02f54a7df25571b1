"""Rules created, listed and fetched: the record with its normalised tree, condition trees refused with
their path and nothing stored, tree limits, invalid bodies, destination_ids of the same endpoint only,
the per-endpoint cap."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest

from control.service.rules import MAX_RULES
from shared import ids
from tests.control.rules.support import (
    EVERYTHING,
    NORMALISED,
    RULE_FIELDS,
    TREE,
    create,
    created,
    fetched,
    list_path,
    listed,
    setup,
)
from tests.helpers import ULID, assert_error, db, parse_ts, utcnow


async def test_create_returns_the_record_with_the_normalised_tree(client, account):
    made, (d0, d1) = await setup(client, account)
    before = utcnow()
    resp = await create(client, account, made, name="paid", condition_tree=TREE, destination_ids=[d1, d0])
    assert resp.status_code == 201, resp.text
    body = resp.json()
    assert set(body) == RULE_FIELDS
    assert re.fullmatch(rf"rule_{ULID}", body["id"])
    assert body["endpoint_id"] == made["id"]
    assert body["name"] == "paid"
    assert body["condition_tree"] == NORMALISED
    assert body["destination_ids"] == [d1, d0]  # in the order given
    assert body["active"] is True
    stamp = parse_ts(body["created_at"])
    assert stamp == parse_ts(body["updated_at"])
    assert before - timedelta(seconds=5) <= stamp <= utcnow() + timedelta(seconds=5)
    assert await listed(client, account, made) == [body]
    assert await fetched(client, account, body) == body


async def test_create_inactive_and_list_oldest_first(client, account):
    made, (d0, _) = await setup(client, account)
    first = await created(client, account, made, destination_ids=[d0], active=False)
    second = await created(client, account, made, name="all", condition_tree=EVERYTHING, destination_ids=[d0])
    assert first["active"] is False
    assert second["condition_tree"] == EVERYTHING
    assert [r["id"] for r in await listed(client, account, made)] == [first["id"], second["id"]]


async def test_a_leaf_alone_is_a_tree(client, account):
    made, (d0, _) = await setup(client, account)
    leaf = {"field": "meta.provider", "operator": "equals", "value": "payments"}
    assert (await created(client, account, made, condition_tree=leaf, destination_ids=[d0]))["condition_tree"] == leaf


@pytest.mark.parametrize(
    ("tree", "message"),
    [
        (
            {
                "op": "AND",
                "children": [
                    {"field": "body.x", "operator": "exists"},
                    {"field": "body.x", "operator": "gt", "value": 1},
                ],
            },
            'condition_tree.children[1].operator: unknown operator "gt"; '
            "one of equals, not_equals, contains, exists, regex",
        ),
        (
            {"op": "OR", "children": [{"op": "AND", "children": [{}, {}, {"field": "body.a", "operator": "equals"}]}]},
            "condition_tree.children[0].children[0]: empty object; expected a group {op, children} or a leaf "
            "{field, operator, value}",
        ),
        (
            {
                "op": "OR",
                "children": [
                    {"op": "AND", "children": [EVERYTHING, EVERYTHING, {"field": "body.a", "operator": "equals"}]}
                ],
            },
            'condition_tree.children[0].children[2].value: required for operator "equals"',
        ),
        (
            {"field": "body.x", "operator": "regex", "value": "(a"},
            "condition_tree.value: invalid RE2 pattern: missing ): (a",
        ),
        (
            {"field": "body.x", "operator": "regex", "value": "a" * 1001},
            "condition_tree.value: pattern longer than 1000 characters",
        ),
        ({"op": "and", "children": []}, 'condition_tree.op: must be "AND" or "OR", got "and"'),
        ({"op": "AND", "children": {}}, "condition_tree.children: must be an array, got {}"),
        (
            {"op": "AND", "children": [], "extra": 1},
            "condition_tree.extra: unknown key; a group has only op and children",
        ),
        (
            {"field": "meta.nope", "operator": "exists"},
            'condition_tree.field: unknown meta key "nope"; one of provider, '
            "event_type, method, path, content_type, source_ip, signature_valid, ip_allowed, endpoint_id, environment "
            "or label.<key>",
        ),
        (
            {"field": "body.x", "operator": "exists", "value": 1},
            'condition_tree.value: not allowed for operator "exists"',
        ),
        ([], "condition_tree: must be an object, a group {op, children} or a leaf {field, operator, value}, got []"),
        (
            None,
            "condition_tree: must be an object, a group {op, children} or a leaf {field, operator, value}, got null",
        ),
        (
            "x",
            'condition_tree: must be an object, a group {op, children} or a leaf {field, operator, value}, got "x"',
        ),
    ],
)
async def test_a_malformed_tree_is_400_naming_the_path_and_nothing_is_stored(client, account, tree, message):
    made, (d0, _) = await setup(client, account)
    resp = await create(client, account, made, name="x", condition_tree=tree, destination_ids=[d0])
    err = assert_error(resp, 400, "invalid_condition_tree")
    assert err["message"] == message
    assert await listed(client, account, made) == []


async def test_tree_limits_are_enforced_on_write(client, account):
    made, (d0, _) = await setup(client, account)
    deep: dict[str, Any] = {"field": "body.x", "operator": "exists"}
    for _ in range(32):
        deep = {"op": "AND", "children": [deep]}
    err = assert_error(
        await create(client, account, made, name="x", condition_tree=deep, destination_ids=[d0]),
        400,
        "invalid_condition_tree",
    )
    assert err["message"].endswith(": nested deeper than 32 levels")
    wide = {"op": "OR", "children": [{"field": "body.x", "operator": "exists"}] * 256}
    err = assert_error(
        await create(client, account, made, name="x", condition_tree=wide, destination_ids=[d0]),
        400,
        "invalid_condition_tree",
    )
    assert err["message"] == "condition_tree.children[255]: the tree has more than 256 nodes"
    big = {"op": "OR", "children": [{"field": "body.x", "operator": "equals", "value": "v" * 40_000}] * 2}
    err = assert_error(
        await create(client, account, made, name="x", condition_tree=big, destination_ids=[d0]),
        400,
        "invalid_condition_tree",
    )
    assert err["message"].startswith("condition_tree: larger than 65536 bytes")
    assert await listed(client, account, made) == []


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"condition_tree": TREE, "destination_ids": ["{d0}"]}, "name"),
        ({"name": "", "condition_tree": TREE, "destination_ids": ["{d0}"]}, "name"),
        ({"name": " ", "condition_tree": TREE, "destination_ids": ["{d0}"]}, "name"),
        ({"name": "x" * 201, "condition_tree": TREE, "destination_ids": ["{d0}"]}, "name"),
        ({"name": "x", "destination_ids": ["{d0}"]}, "condition_tree"),
        ({"name": "x", "condition_tree": TREE}, "destination_ids"),
        ({"name": "x", "condition_tree": TREE, "destination_ids": []}, "destination_ids"),
        ({"name": "x", "condition_tree": TREE, "destination_ids": "{d0}"}, "destination_ids"),
        ({"name": "x", "condition_tree": TREE, "destination_ids": [1]}, "destination_ids[0]"),
        ({"name": "x", "condition_tree": TREE, "destination_ids": ["{d0}", "{d1}", "{d0}"]}, "destination_ids[2]"),
        (
            {"name": "x", "condition_tree": TREE, "destination_ids": ["{d0}", "dst_01JAAAAAAAAAAAAAAAAAAAAAAA"]},
            "destination_ids[1]",
        ),
        ({"name": "x", "condition_tree": TREE, "destination_ids": ["nope"]}, "destination_ids[0]"),
        ({"name": "x", "condition_tree": TREE, "destination_ids": ["{d0}"], "active": "yes"}, "active"),
        ({"name": "x", "condition_tree": TREE, "destination_ids": ["{d0}"], "extra": 1}, "extra"),
    ],
)
async def test_create_rejects_invalid_bodies_and_stores_nothing(client, account, body, field):
    made, (d0, d1) = await setup(client, account)

    def fill(value: Any) -> Any:
        if isinstance(value, str):
            return value.format(d0=d0, d1=d1)
        if isinstance(value, list):
            return [fill(v) for v in value]
        return value

    resp = await client.post(list_path(made), json={k: fill(v) for k, v in body.items()}, headers=account.headers)
    assert_error(resp, 400, "validation_error", field=field)
    assert await listed(client, account, made) == []


async def test_duplicate_and_unknown_destination_messages(client, account):
    made, (d0, _) = await setup(client, account)
    err = assert_error(
        await create(client, account, made, name="x", condition_tree=TREE, destination_ids=[d0, d0]),
        400,
        "validation_error",
    )
    assert err["message"] == f"destination_ids[1]: {d0!r} is already listed at destination_ids[0]"
    unknown = "dst_01JAAAAAAAAAAAAAAAAAAAAAAA"
    err = assert_error(
        await create(client, account, made, name="x", condition_tree=TREE, destination_ids=[unknown]),
        400,
        "validation_error",
    )
    assert err["message"] == f"destination_ids[0]: no destination {unknown!r} on endpoint {made['id']!r}"


async def test_destinations_of_another_endpoint_or_account_are_refused_like_unknown_ones(
    client, account, other_account
):
    made, (d0, _) = await setup(client, account)
    sibling, (sibling_dst, _) = await setup(client, account)
    _, (foreign_dst, _) = await setup(client, other_account)
    messages = []
    for bad in (sibling_dst, foreign_dst, "dst_01JAAAAAAAAAAAAAAAAAAAAAAA"):
        resp = await create(client, account, made, name="x", condition_tree=TREE, destination_ids=[d0, bad])
        err = assert_error(resp, 400, "validation_error", field="destination_ids[1]")
        messages.append(err["message"].replace(bad, "<id>"))
    assert len(set(messages)) == 1  # another account's id reads exactly like an unknown one
    assert await listed(client, account, made) == []
    assert await listed(client, account, sibling) == []


async def test_rules_are_capped_per_endpoint(client, account, database_url):
    made, (d0, _) = await setup(client, account)
    async with db(database_url) as conn:
        await conn.executemany(
            "INSERT INTO rules (id, endpoint_id, name, condition_tree) VALUES ($1, $2, 'r', '{}'::jsonb)",
            [(ids.new_id("rule"), made["id"]) for _ in range(MAX_RULES - 1)],
        )
    await created(client, account, made, destination_ids=[d0])
    err = assert_error(
        await create(client, account, made, name="x", condition_tree=TREE, destination_ids=[d0]),
        400,
        "validation_error",
    )
    assert f"{MAX_RULES} rules" in err["message"]
    resp = await client.post(
        f"/v1/endpoints/{made['id']}/destinations",
        json={"url": "https://example.com/", "forward_all": True},
        headers=account.headers,
    )
    assert_error(resp, 400, "validation_error")
    assert len(await listed(client, account, made)) == MAX_RULES
    assert (
        len(
            (await client.get(f"/v1/endpoints/{made['id']}/destinations", headers=account.headers)).json()[
                "destinations"
            ]
        )
        == 2
    )
