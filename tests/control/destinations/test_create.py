"""Destinations created and listed: the record and no rule, or a rule matching everything or the given
tree (one transaction), accepted URLs, refusals that store nothing, the per-endpoint cap."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest

from control.db import rules as db_rules
from control.service.destinations.crud import MAX_DESTINATIONS
from shared import ids
from tests.control.destinations.support import (
    DESTINATION_FIELDS,
    TREE,
    add,
    added,
    fetched,
    list_path,
    listed,
    rules_of,
)
from tests.helpers import ULID, assert_error, create_endpoint, db, parse_ts, utcnow

RULE_FIELDS = {"id", "endpoint_id", "name", "condition_tree", "destination_ids", "active", "created_at", "updated_at"}


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
        "http://[::1]:8080/",
        "https://bücher.example/hook",
        "https://example.com/" + "a" * (2048 - len("https://example.com/")),
    ]:
        with subtests.test(url=url):
            assert (await added(client, account, made, url=url))["url"] == url


async def test_a_urls_credentials_become_basic_auth_and_leave_the_stored_url(client, account):
    made = await create_endpoint(client, account.headers)
    body = await added(client, account, made, url="https://us%40er:p%3Aw@[::1]:8443/path?q=1")
    assert body["url"] == "https://[::1]:8443/path?q=1"
    assert body["auth"] == {"type": "basic", "username": "us@er"}
    assert "p:w" not in str(body)


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
