"""Rule routes: 401 without a valid key, 404 for unknown ids and other accounts' records, a read-only key
reads but cannot change, and the OpenAPI document lists them."""

from __future__ import annotations

from control.service.accounts import issue_key
from tests.control.rules.support import EVERYTHING, RULE_FIELDS, created, list_path, listed, setup
from tests.helpers import assert_error, db


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
