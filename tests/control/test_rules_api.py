"""/v1/endpoints/{id}/rules and /v1/rules/{id}: record shape, condition trees refused with their path and
nothing stored, destination_ids of the same endpoint only, active toggles, the rules channel, the flush
worker's routing query, 401/403/404 and tenant isolation."""

from __future__ import annotations

import asyncio
import re
from datetime import timedelta
from typing import Any

import pytest

from control.routing import EventView, compile_tree
from control.service.accounts import issue_key
from control.service.rules import MAX_RULES
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

RULE_FIELDS = {"id", "endpoint_id", "name", "condition_tree", "destination_ids", "active", "created_at", "updated_at"}
TREE = {
    "op": "AND",
    "children": [
        {"field": "body.type", "operator": "equals", "value": "invoice.paid"},
        {
            "op": "OR",
            "children": [
                {"field": "header.X-Shop-Topic", "operator": "exists"},
                {"field": "body.amount", "operator": "equals", "value": 2000},
            ],
        },
    ],
}
NORMALISED = {
    "op": "AND",
    "children": [
        {"field": "body.type", "operator": "equals", "value": "invoice.paid"},
        {
            "op": "OR",
            "children": [
                {"field": "header.x-shop-topic", "operator": "exists"},
                {"field": "body.amount", "operator": "equals", "value": 2000},
            ],
        },
    ],
}
EVERYTHING = {"op": "AND", "children": []}


def list_path(endpoint: dict[str, Any]) -> str:
    return f"/v1/endpoints/{endpoint['id']}/rules"


async def destination(client, account, endpoint: dict[str, Any], name: str = "d") -> str:
    resp = await client.post(
        f"/v1/endpoints/{endpoint['id']}/destinations",
        json={"url": f"https://example.com/{name}", "name": name},
        headers=account.headers,
    )
    assert resp.status_code == 201, resp.text
    return resp.json()["id"]


async def setup(client, account, destinations: int = 2) -> tuple[dict[str, Any], list[str]]:
    made = await create_endpoint(client, account.headers)
    return made, [await destination(client, account, made, f"d{i}") for i in range(destinations)]


async def create(client, account, endpoint: dict[str, Any], **body: Any) -> Any:
    return await client.post(list_path(endpoint), json=body, headers=account.headers)


async def created(client, account, endpoint: dict[str, Any], **body: Any) -> dict[str, Any]:
    body.setdefault("name", "paid")
    body.setdefault("condition_tree", TREE)
    resp = await create(client, account, endpoint, **body)
    assert resp.status_code == 201, resp.text
    return resp.json()


async def listed(client, account, endpoint: dict[str, Any]) -> list[dict[str, Any]]:
    resp = await client.get(list_path(endpoint), headers=account.headers)
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert set(body) == {"rules"}
    return body["rules"]


async def fetched(client, account, rule: dict[str, Any]) -> dict[str, Any]:
    resp = await client.get(f"/v1/rules/{rule['id']}", headers=account.headers)
    assert resp.status_code == 200, resp.text
    return resp.json()


# -- create, list, get ------------------------------------------------------------------------------------


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
            'condition_tree.children[1].operator: unknown operator "gt"',
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
        ({"op": "AND", "children": {}}, "condition_tree.children: must be an array, got object"),
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
        ([], "condition_tree: must be an object, a group {op, children} or a leaf {field, operator, value}, got array"),
        (
            None,
            "condition_tree: must be an object, a group {op, children} or a leaf {field, operator, value}, got null",
        ),
        (
            "x",
            "condition_tree: must be an object, a group {op, children} or a leaf {field, operator, value}, got string",
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


# -- update -----------------------------------------------------------------------------------------------


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


# -- delete -----------------------------------------------------------------------------------------------


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


# -- what the flush worker reads --------------------------------------------------------------------------


async def test_stored_trees_compile_into_the_predicates_the_flush_worker_runs(client, account, database_url):
    made, (d0, _) = await setup(client, account)
    rule = await created(client, account, made, destination_ids=[d0])
    everything = await created(client, account, made, condition_tree=EVERYTHING, destination_ids=[d0])
    async with db(database_url) as conn:
        stored = dict(await conn.fetch("SELECT id, condition_tree FROM rules WHERE endpoint_id = $1", made["id"]))
    assert stored == {rule["id"]: NORMALISED, everything["id"]: EVERYTHING}
    paid = EventView(body={"type": "invoice.paid", "amount": 2000}, headers={}, meta={})
    topic = EventView(body={"type": "invoice.paid"}, headers={"x-shop-topic": "orders/create"}, meta={})
    other = EventView(body={"type": "invoice.created"}, headers={"x-shop-topic": "t"}, meta={})
    assert [compile_tree(stored[rule["id"]])(e) for e in (paid, topic, other)] == [True, True, False]
    assert [compile_tree(stored[everything["id"]])(e) for e in (paid, topic, other)] == [True, True, True]


# -- the config version ------------------------------------------------------------------------------


async def test_every_change_bumps_the_config_version(client, account, database_url):
    """What flush workers check per batch (instead of a message): every committed change moves it, refused
    writes and empty patches do not."""
    made, (d0, d1) = await setup(client, account)
    seen = [await config_version(database_url, made["id"])]

    async def moved() -> bool:
        seen.append(await config_version(database_url, made["id"]))
        return seen[-1] > seen[-2]

    rule = await created(client, account, made, destination_ids=[d0])
    assert await moved()
    path = f"/v1/rules/{rule['id']}"
    for change in ({"active": False}, {"condition_tree": EVERYTHING}, {"destination_ids": [d1]}, {"name": "n"}):
        assert (await client.patch(path, json=change, headers=account.headers)).status_code == 200
        assert await moved(), change
    assert (await client.delete(path, headers=account.headers)).status_code == 200
    assert await moved()
    bad_tree = {"op": "AND", "children": [{"field": "x", "operator": "exists"}]}
    assert (
        await create(client, account, made, name="x", condition_tree=bad_tree, destination_ids=[d0])
    ).status_code == 400
    assert not await moved()
    kept = await created(client, account, made, destination_ids=[d0])
    assert await moved()
    assert (await client.patch(f"/v1/rules/{kept['id']}", json={}, headers=account.headers)).status_code == 200
    assert (
        await client.patch(f"/v1/rules/{kept['id']}", json={"condition_tree": []}, headers=account.headers)
    ).status_code == 400
    assert not await moved()


# -- races ------------------------------------------------------------------------------------------------


async def test_a_rule_never_points_at_a_deleted_destination(settings, account):
    """Creating rules on a destination while it is deleted: each create either fails with 400 or its rule
    is deleted with the destination; no rule is ever left without destinations."""
    async with concurrent_client(settings) as c:
        made, (keep, doomed) = await setup(c, account)
        body = {"name": "race", "condition_tree": EVERYTHING, "destination_ids": [doomed]}
        both = {"name": "race2", "condition_tree": EVERYTHING, "destination_ids": [keep, doomed]}
        results = await asyncio.gather(
            *(c.post(list_path(made), json=body, headers=account.headers) for _ in range(5)),
            c.delete(f"/v1/destinations/{doomed}", headers=account.headers),
            *(c.post(list_path(made), json=both, headers=account.headers) for _ in range(5)),
        )
        assert results[5].status_code == 200
        assert all(r.status_code in (201, 400) for r in results[:5] + results[6:])
        deleted = set(results[5].json()["deleted_rule_ids"])
        survivors = await listed(c, account, made)
    for r in results[:5]:
        if r.status_code == 201:
            assert r.json()["id"] in deleted
    assert all(r["destination_ids"] == [keep] for r in survivors)
    assert {r["name"] for r in survivors} <= {"race2"}


async def test_patch_racing_delete_of_the_same_rule_is_200_or_404(settings, account):
    async with concurrent_client(settings) as c:
        made, (d0, d1) = await setup(c, account)
        for _ in range(3):
            rule = await created(c, account, made, destination_ids=[d0])
            patch, gone = await asyncio.gather(
                c.patch(f"/v1/rules/{rule['id']}", json={"destination_ids": [d1, d0]}, headers=account.headers),
                c.delete(f"/v1/rules/{rule['id']}", headers=account.headers),
            )
            assert gone.status_code == 200, gone.text
            assert patch.status_code in (200, 404), patch.text
        assert await listed(c, account, made) == []


async def test_concurrent_creates_respect_the_rule_cap(settings, account, database_url):
    async with concurrent_client(settings) as c:
        made, (d0, _) = await setup(c, account)
        async with db(database_url) as conn:
            await conn.executemany(
                "INSERT INTO rules (id, endpoint_id, name, condition_tree) VALUES ($1, $2, 'r', '{}'::jsonb)",
                [(ids.new_id("rule"), made["id"]) for _ in range(MAX_RULES - 3)],
            )
        body = {"name": "x", "condition_tree": EVERYTHING, "destination_ids": [d0]}
        results = await asyncio.gather(*(c.post(list_path(made), json=body, headers=account.headers) for _ in range(8)))
    assert sorted(r.status_code for r in results) == [201] * 3 + [400] * 5
    async with db(database_url) as conn:
        assert await conn.fetchval("SELECT count(*) FROM rules WHERE endpoint_id = $1", made["id"]) == MAX_RULES


# -- 401, 403, 404 and tenant isolation -------------------------------------------------------------------


async def test_every_route_answers_401_without_a_valid_key(client, account, subtests):
    made, (d0, _) = await setup(client, account)
    rule = await created(client, account, made, destination_ids=[d0])
    routes = [
        ("GET", list_path(made), None),
        ("POST", list_path(made), {"name": "x", "condition_tree": EVERYTHING, "destination_ids": [d0]}),
        ("GET", f"/v1/rules/{rule['id']}", None),
        ("PATCH", f"/v1/rules/{rule['id']}", {"active": False}),
        ("DELETE", f"/v1/rules/{rule['id']}", None),
    ]
    for method, url, payload in routes:
        for headers in ({}, {"Authorization": "Bearer hy_live_" + "0" * 32}):
            with subtests.test(method=method, url=url, headers=headers):
                resp = await client.request(method, url, json=payload, headers=headers)
                assert_error(resp, 401, "unauthorized")
    assert await listed(client, account, made) == [rule]


async def test_unknown_ids_are_404(client, account, subtests):
    _, (d0, _) = await setup(client, account)
    body = {"name": "x", "condition_tree": EVERYTHING, "destination_ids": [d0]}
    for endpoint_id in ("ep_01JAAAAAAAAAAAAAAAAAAAAAAA", "nope"):
        for method, payload in (("GET", None), ("POST", body)):
            with subtests.test(endpoint_id=endpoint_id, method=method):
                resp = await client.request(
                    method, f"/v1/endpoints/{endpoint_id}/rules", json=payload, headers=account.headers
                )
                assert_error(resp, 404, "not_found")
    for rule_id in ("rule_01JAAAAAAAAAAAAAAAAAAAAAAA", "x", d0):
        for method, payload in (("GET", None), ("PATCH", {"active": False}), ("DELETE", None)):
            with subtests.test(rule_id=rule_id, method=method):
                resp = await client.request(method, f"/v1/rules/{rule_id}", json=payload, headers=account.headers)
                assert_error(resp, 404, "not_found")


async def test_another_accounts_endpoint_and_rule_are_404_and_untouched(client, account, other_account, subtests):
    made, (d0, _) = await setup(client, account)
    _, (theirs, _) = await setup(client, other_account)
    rule = await created(client, account, made, destination_ids=[d0])
    for method, payload in (
        ("GET", None),
        ("POST", {"name": "x", "condition_tree": EVERYTHING, "destination_ids": [theirs]}),
    ):
        with subtests.test(method=method):
            resp = await client.request(method, list_path(made), json=payload, headers=other_account.headers)
            assert_error(resp, 404, "not_found")
    for method, payload in (("GET", None), ("PATCH", {"active": False, "destination_ids": [theirs]}), ("DELETE", None)):
        with subtests.test(method=method, rule=True):
            resp = await client.request(method, f"/v1/rules/{rule['id']}", json=payload, headers=other_account.headers)
            assert_error(resp, 404, "not_found")
    assert await listed(client, account, made) == [rule]


async def test_a_read_only_key_reads_but_cannot_change(client, account, database_url, subtests):
    made, (d0, _) = await setup(client, account)
    rule = await created(client, account, made, destination_ids=[d0])
    async with db(database_url) as conn:
        ro = {"Authorization": f"Bearer {await issue_key(conn, account.id, read_only=True)}"}
    assert (await client.get(list_path(made), headers=ro)).json() == {"rules": [rule]}
    assert (await client.get(f"/v1/rules/{rule['id']}", headers=ro)).json() == rule
    for method, url, payload in (
        ("POST", list_path(made), {"name": "x", "condition_tree": EVERYTHING, "destination_ids": [d0]}),
        ("PATCH", f"/v1/rules/{rule['id']}", {"active": False}),
        ("DELETE", f"/v1/rules/{rule['id']}", None),
    ):
        with subtests.test(method=method):
            assert_error(await client.request(method, url, json=payload, headers=ro), 403, "forbidden")
    assert await listed(client, account, made) == [rule]


async def test_openapi_documents_the_rule_routes(client):
    schema = (await client.get("/schema/openapi.json")).json()
    item = schema["paths"]["/v1/endpoints/{endpoint_id}/rules"]
    assert {"200", "401", "404"} <= set(item["get"]["responses"])
    assert {"201", "400", "401", "403", "404"} <= set(item["post"]["responses"])
    one = schema["paths"]["/v1/rules/{rule_id}"]
    assert {"200", "401", "404"} <= set(one["get"]["responses"])
    assert {"200", "400", "401", "403", "404"} <= set(one["patch"]["responses"])
    assert {"200", "401", "403", "404"} <= set(one["delete"]["responses"])
    assert set(schema["components"]["schemas"]["Rule"]["properties"]) == RULE_FIELDS
    assert set(schema["components"]["schemas"]["RuleCreate"]["required"]) == {
        "name",
        "condition_tree",
        "destination_ids",
    }
