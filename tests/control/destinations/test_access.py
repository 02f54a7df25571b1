"""Destination routes: every change bumps the config version; 401 without a valid key, 404 for unknown ids
and other accounts' records, a read-only key reads but cannot change, and the OpenAPI document."""

from __future__ import annotations

from control.service.accounts import issue_key
from tests.control.destinations.support import (
    DESTINATION_FIELDS,
    IDLE_HEALTH,
    add,
    added,
    fetched,
    list_path,
    listed,
    rules_of,
)
from tests.helpers import assert_error, config_version, create_endpoint, db


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
