"""/v1/endpoints/{id}/allowlist and /v1/allowlist/{id}: canonical CIDRs, duplicates, errors, tenant
isolation, and the edge config in Redis following every change."""

from __future__ import annotations

import asyncio
import re
from datetime import timedelta
from typing import Any

import pytest
import redis.asyncio as aioredis

from control.service.accounts import issue_key
from control.service.trust import MAX_ALLOWLIST_ENTRIES
from shared.keys import Keys
from shared.wire import decode_edge_endpoint
from tests.helpers import (  # noqa: F401 - fixtures
    ULID,
    assert_error,
    concurrent_client,
    create_endpoint,
    db,
    module_database,
    module_database_url,
    parse_ts,
    redis_client,
    redis_connection,
    token_of,
    utcnow,
)


async def edge_allowlist(redis: aioredis.Redis, settings, endpoint: dict[str, Any]) -> tuple[str, ...]:
    raw = await redis.get(Keys(settings.redis_prefix).endpoint_config(token_of(endpoint["ingest_url"])))
    assert raw is not None
    return decode_edge_endpoint(raw).allowlist


def list_path(endpoint: dict[str, Any]) -> str:
    return f"/v1/endpoints/{endpoint['id']}/allowlist"


async def add(client, account, endpoint: dict[str, Any], cidr: Any) -> Any:
    return await client.post(list_path(endpoint), json={"cidr": cidr}, headers=account.headers)


async def listed(client, account, endpoint: dict[str, Any]) -> list[dict[str, Any]]:
    resp = await client.get(list_path(endpoint), headers=account.headers)
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert set(body) == {"allowlist"}
    return body["allowlist"]


# -- list and add ----------------------------------------------------------------------------------


async def test_a_new_endpoint_has_an_empty_allowlist(client, account, redis, settings):
    made = await create_endpoint(client, account.headers)
    assert await listed(client, account, made) == []
    assert await edge_allowlist(redis, settings, made) == ()


async def test_add_returns_the_entry_and_the_list_keeps_them_oldest_first(client, account, redis, settings):
    made = await create_endpoint(client, account.headers)
    before = utcnow()
    entries = []
    for cidr in ("203.0.113.0/24", "198.51.100.7", "2001:db8::/32"):
        resp = await add(client, account, made, cidr)
        assert resp.status_code == 201, resp.text
        entry = resp.json()
        assert set(entry) == {"id", "endpoint_id", "cidr", "created_at"}
        assert re.fullmatch(rf"al_{ULID}", entry["id"])
        assert entry["endpoint_id"] == made["id"]
        assert before - timedelta(seconds=5) <= parse_ts(entry["created_at"]) <= utcnow() + timedelta(seconds=5)
        entries.append(entry)
    assert [e["cidr"] for e in entries] == ["203.0.113.0/24", "198.51.100.7/32", "2001:db8::/32"]
    assert await listed(client, account, made) == entries
    assert await edge_allowlist(redis, settings, made) == ("203.0.113.0/24", "198.51.100.7/32", "2001:db8::/32")


CANONICAL = [
    ("10.0.0.0/8", "10.0.0.0/8"),
    ("127.0.0.1", "127.0.0.1/32"),
    ("  192.0.2.1/32\n", "192.0.2.1/32"),
    ("10.0.0.0/255.0.0.0", "10.0.0.0/8"),
    ("0.0.0.0/0", "0.0.0.0/0"),
    ("::1", "::1/128"),
    ("2001:DB8:0:0::/48", "2001:db8::/48"),
    ("2001:0db8:0000:0000:0000:0000:0000:0001", "2001:db8::1/128"),
    ("::ffff:1.2.3.4", "1.2.3.4/32"),
    ("::FFFF:102:304/128", "1.2.3.4/32"),
    ("::ffff:10.0.0.0/104", "10.0.0.0/8"),
    ("::ffff:0:0/96", "0.0.0.0/0"),
    ("::/0", "::/0"),
]


@pytest.mark.parametrize(("given", "stored"), CANONICAL, ids=[c[0].strip() for c in CANONICAL])
async def test_addresses_and_ranges_are_stored_in_canonical_form(client, account, redis, settings, given, stored):
    made = await create_endpoint(client, account.headers)
    resp = await add(client, account, made, given)
    assert resp.status_code == 201, resp.text
    assert resp.json()["cidr"] == stored
    assert [e["cidr"] for e in await listed(client, account, made)] == [stored]
    assert await edge_allowlist(redis, settings, made) == (stored,)


INVALID = [
    ("10.0.0.1/8", "host bits set"),
    ("2001:db8::1/32", "host bits set"),
    ("1.2.3.4/33", "is not an IP address or CIDR range"),
    ("1.2.3", "is not an IP address or CIDR range"),
    ("256.1.1.1", "is not an IP address or CIDR range"),
    ("010.0.0.1", "is not an IP address or CIDR range"),
    ("example.com", "is not an IP address or CIDR range"),
    ("10.0.0.0/8, 192.168.0.0/16", "is not an IP address or CIDR range"),
    ("fe80::1%eth0", "zone"),
    ("   ", "is not an IP address or CIDR range"),
]


@pytest.mark.parametrize(("cidr", "message"), INVALID, ids=[c for c, _ in INVALID])
async def test_invalid_ranges_are_400_naming_cidr(client, account, redis, settings, cidr, message):
    made = await create_endpoint(client, account.headers)
    err = assert_error(await add(client, account, made, cidr), 400, "validation_error", field="cidr")
    assert message in err["message"], err
    assert await listed(client, account, made) == []
    assert await edge_allowlist(redis, settings, made) == ()


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({}, "cidr: required field is missing"),
        ({"cidr": 10}, "cidr: must be a string, got 10"),
        ({"cidr": None}, "cidr: must be a string, got null"),
        ({"cidr": ""}, "cidr: must be 1 to 100 characters long, got 0"),
        ({"cidr": "1" * 101}, "cidr: must be 1 to 100 characters long, got 101"),
        ({"cidr": "10.0.0.0/8", "note": "x"}, "note: unknown field"),
        ([], "body: must be an object, got []"),
    ],
    ids=["missing", "int", "null", "empty", "long", "unknown-field", "array"],
)
async def test_malformed_bodies_are_400(client, account, body, message):
    made = await create_endpoint(client, account.headers)
    resp = await client.post(list_path(made), json=body, headers=account.headers)
    err = assert_error(resp, 400, "validation_error")
    assert err["message"] == message or err["message"].startswith(message), err


async def test_adding_a_range_already_present_answers_200_with_the_existing_entry(client, account, redis, settings):
    made = await create_endpoint(client, account.headers)
    first = await add(client, account, made, "1.2.3.4")
    assert first.status_code == 201
    for same in ("1.2.3.4", "1.2.3.4/32", "::ffff:1.2.3.4", " 1.2.3.4 "):
        again = await add(client, account, made, same)
        assert again.status_code == 200, again.text
        assert again.json() == first.json()
    assert await listed(client, account, made) == [first.json()]
    assert await edge_allowlist(redis, settings, made) == ("1.2.3.4/32",)


async def test_concurrent_adds_of_one_range_make_one_entry(settings, account):
    async with concurrent_client(settings) as c:
        made = await create_endpoint(c, account.headers)
        answers = await asyncio.gather(*(add(c, account, made, "192.0.2.0/24") for _ in range(8)))
        assert sorted(a.status_code for a in answers) == [200] * 7 + [201]
        assert len({a.json()["id"] for a in answers}) == 1
        assert len(await listed(c, account, made)) == 1


async def test_the_allowlist_is_capped_per_endpoint(client, account, database_url):
    made = await create_endpoint(client, account.headers)
    async with db(database_url) as conn:  # fill it directly: 256 round trips through the API add nothing
        await conn.executemany(
            "INSERT INTO allowlist_entries (id, endpoint_id, cidr) VALUES ($1, $2, $3::cidr)",
            [(f"al_cap{made['id']}{i}", made["id"], f"10.0.{i}.0/24") for i in range(MAX_ALLOWLIST_ENTRIES)],
        )
    err = assert_error(await add(client, account, made, "192.0.2.1"), 400, "validation_error", field="cidr")
    assert str(MAX_ALLOWLIST_ENTRIES) in err["message"]
    assert (await add(client, account, made, "10.0.7.0/24")).status_code == 200  # a duplicate still answers
    assert len(await listed(client, account, made)) == MAX_ALLOWLIST_ENTRIES


# -- delete ---------------------------------------------------------------------------------------


async def test_delete_removes_the_entry_and_the_last_one_reopens_the_endpoint(client, account, redis, settings):
    made = await create_endpoint(client, account.headers)
    a = (await add(client, account, made, "10.0.0.0/8")).json()
    b = (await add(client, account, made, "::1")).json()
    assert await edge_allowlist(redis, settings, made) == ("10.0.0.0/8", "::1/128")

    resp = await client.delete(f"/v1/allowlist/{a['id']}", headers=account.headers)
    assert resp.status_code == 200, resp.text
    assert resp.json() == {"id": a["id"], "deleted": True}
    assert await listed(client, account, made) == [b]
    assert await edge_allowlist(redis, settings, made) == ("::1/128",)

    assert_error(await client.delete(f"/v1/allowlist/{a['id']}", headers=account.headers), 404, "not_found")

    assert (await client.delete(f"/v1/allowlist/{b['id']}", headers=account.headers)).status_code == 200
    assert await listed(client, account, made) == []
    assert await edge_allowlist(redis, settings, made) == ()


async def test_entries_go_with_their_endpoint(client, account, database_url):
    made = await create_endpoint(client, account.headers)
    entry = (await add(client, account, made, "10.0.0.0/8")).json()
    assert (await client.delete(f"/v1/endpoints/{made['id']}", headers=account.headers)).status_code == 200
    assert_error(await client.delete(f"/v1/allowlist/{entry['id']}", headers=account.headers), 404, "not_found")
    async with db(database_url) as conn:
        assert await conn.fetchval("SELECT count(*) FROM allowlist_entries WHERE endpoint_id = $1", made["id"]) == 0


# -- errors: 401, 403, 404 and tenant isolation -------------------------------------------------------


async def test_every_route_answers_401_without_a_valid_key(client, account, subtests):
    made = await create_endpoint(client, account.headers)
    entry = (await add(client, account, made, "10.0.0.0/8")).json()
    routes = [
        ("GET", list_path(made), None),
        ("POST", list_path(made), {"cidr": "192.0.2.0/24"}),
        ("DELETE", f"/v1/allowlist/{entry['id']}", None),
    ]
    for method, url, payload in routes:
        for headers in ({}, {"Authorization": "Bearer hy_live_" + "0" * 32}):
            with subtests.test(method=method, headers=headers):
                resp = await client.request(method, url, json=payload, headers=headers)
                assert_error(resp, 401, "unauthorized")
    assert await listed(client, account, made) == [entry]


async def test_another_accounts_endpoint_and_entry_are_404(client, account, other_account, redis, settings, subtests):
    mine = await create_endpoint(client, account.headers)
    entry = (await add(client, account, mine, "10.0.0.0/8")).json()
    for endpoint_id in (mine["id"], "ep_01JAAAAAAAAAAAAAAAAAAAAAAA"):
        for method, payload in (("GET", None), ("POST", {"cidr": "0.0.0.0/0"})):
            with subtests.test(method=method, endpoint_id=endpoint_id):
                resp = await client.request(
                    method, f"/v1/endpoints/{endpoint_id}/allowlist", json=payload, headers=other_account.headers
                )
                assert_error(resp, 404, "not_found")
    for entry_id in (entry["id"], "al_01JAAAAAAAAAAAAAAAAAAAAAAA", "x"):
        with subtests.test(delete=entry_id):
            resp = await client.delete(f"/v1/allowlist/{entry_id}", headers=other_account.headers)
            assert_error(resp, 404, "not_found")
    assert await listed(client, account, mine) == [entry]
    assert await edge_allowlist(redis, settings, mine) == ("10.0.0.0/8",)


async def test_a_read_only_key_reads_but_cannot_change(client, account, database_url):
    made = await create_endpoint(client, account.headers)
    entry = (await add(client, account, made, "10.0.0.0/8")).json()
    async with db(database_url) as conn:
        ro = {"Authorization": f"Bearer {await issue_key(conn, account.id, read_only=True)}"}
    assert (await client.get(list_path(made), headers=ro)).json() == {"allowlist": [entry]}
    assert_error(await client.post(list_path(made), json={"cidr": "0.0.0.0/0"}, headers=ro), 403, "forbidden")
    assert_error(await client.delete(f"/v1/allowlist/{entry['id']}", headers=ro), 403, "forbidden")
    assert await listed(client, account, made) == [entry]


async def test_openapi_documents_the_allowlist_routes(client):
    schema = (await client.get("/schema/openapi.json")).json()
    item = schema["paths"]["/v1/endpoints/{endpoint_id}/allowlist"]
    assert {"200", "401", "404"} <= set(item["get"]["responses"])
    assert {"200", "201", "400", "401", "404"} <= set(item["post"]["responses"])
    assert {"200", "401", "404"} <= set(schema["paths"]["/v1/allowlist/{entry_id}"]["delete"]["responses"])
    assert set(schema["components"]["schemas"]["AllowlistEntry"]["properties"]) == {
        "id",
        "endpoint_id",
        "cidr",
        "created_at",
    }
