"""POST /api/register: a free account and its key (shown once); with `api_token`, the temporary endpoints of
that token's account become permanent at once, in /v1 and in the edge's config; taken addresses, unknown or
used tokens, a closed registration and bad bodies."""

from __future__ import annotations

import asyncio
import re

import pytest
from litestar.testing import AsyncTestClient

from control.app import create_app
from control.service.accounts import hash_key
from shared.keys import Keys
from shared.settings import load_settings
from shared.wire import decode_edge_endpoint
from tests.helpers import (
    ENDPOINT_FIELDS,
    assert_error,
    concurrent_client,
    db,
    redis_connection,  # noqa: F401 - the `redis` fixture
    token_of,
)

LIVE = re.compile(r"^hy_live_[0-9A-Za-z]{32}$")


async def _start(client, **body) -> dict:
    resp = await client.post("/api/start", json=body)
    assert resp.status_code == 200, resp.text
    return resp.json()


async def test_register_without_a_token_makes_a_free_account(client, database_url):
    resp = await client.post("/api/register", json={"email": "Ada@Example.com"})
    assert resp.status_code == 201, resp.text
    body = resp.json()
    assert set(body) == {"account_id", "email", "api_key", "endpoints"}
    assert body["email"] == "Ada@Example.com"
    assert body["endpoints"] == []
    assert LIVE.match(body["api_key"])
    headers = {"Authorization": f"Bearer {body['api_key']}"}
    assert (await client.get("/v1/endpoints", headers=headers)).json() == {"endpoints": []}
    created = await client.post("/v1/endpoints", json={"name": "mine"}, headers=headers)
    assert created.status_code == 201
    assert created.json()["temporary"] is False
    async with db(database_url) as conn:
        account = await conn.fetchrow("SELECT * FROM accounts WHERE id = $1", body["account_id"])
        assert (account["kind"], account["email"], account["claimed_at"]) == ("permanent", "Ada@Example.com", None)
        key = await conn.fetchrow("SELECT * FROM api_keys WHERE account_id = $1", body["account_id"])
        assert (key["kind"], key["expires_at"], key["key_hash"]) == ("live", None, hash_key(body["api_key"]))


@pytest.mark.parametrize("again", ["ada@example.com", "ADA@EXAMPLE.COM", "Ada@Example.com"])
async def test_an_address_registered_already_is_409_email_taken(client, again):
    assert (await client.post("/api/register", json={"email": "Ada@Example.com"})).status_code == 201
    err = assert_error(await client.post("/api/register", json={"email": again}), 409, "email_taken", field="email")
    assert again in err["message"]
    started = await _start(client)  # with a token too, and the token's account stays anonymous
    resp = await client.post("/api/register", json={"email": again, "api_token": started["api_token"]})
    assert_error(resp, 409, "email_taken")
    assert (await client.get(f"/inbox/{started['endpoint_id']}")).status_code == 200  # still its session's


async def test_concurrent_registrations_of_one_address_make_one_account(settings, database_url):
    async with concurrent_client(settings) as client:
        answers = await asyncio.gather(
            *(client.post("/api/register", json={"email": e}) for e in ("x@example.com", "X@example.com") * 4)
        )
    assert sorted(r.status_code for r in answers) == [201] + [409] * 7
    async with db(database_url) as conn:
        assert await conn.fetchval("SELECT count(*) FROM accounts WHERE lower(email) = 'x@example.com'") == 1


async def test_registering_with_the_token_makes_its_endpoints_permanent(client, settings, database_url, redis):
    first = await _start(client)
    second = await _start(client, ref="shop")
    resp = await client.post("/api/register", json={"email": "ada@example.com", "api_token": first["api_token"]})
    assert resp.status_code == 201, resp.text
    body = resp.json()
    assert {e["id"] for e in body["endpoints"]} == {first["endpoint_id"], second["endpoint_id"]}
    for endpoint in body["endpoints"]:
        assert set(endpoint) == ENDPOINT_FIELDS
        assert (endpoint["temporary"], endpoint["expires_at"]) == (False, None)

    # The anonymous account itself is now the permanent one, reached with the new key on /v1.
    headers = {"Authorization": f"Bearer {body['api_key']}"}
    listed = (await client.get("/v1/endpoints", headers=headers)).json()["endpoints"]
    assert {e["id"] for e in listed} == {first["endpoint_id"], second["endpoint_id"]}
    assert all(e["temporary"] is False and e["expires_at"] is None for e in listed)
    one = (await client.get(f"/v1/endpoints/{second['endpoint_id']}", headers=headers)).json()
    assert (one["external_ref"], one["ingest_url"]) == ("shop", second["ingest_url"])

    # The edge's copy says so before the answer: no expiry left to answer 410 with.
    keys = Keys(settings.redis_prefix)
    for started in (first, second):
        config = decode_edge_endpoint(await redis.get(keys.endpoint_config(token_of(started["ingest_url"]))))
        assert config.expires_at is None

    async with db(database_url) as conn:
        account = await conn.fetchrow("SELECT * FROM accounts WHERE id = $1", body["account_id"])
        assert (account["kind"], account["email"]) == ("permanent", "ada@example.com")
        assert account["claimed_at"] is not None

    # The temporary tokens stay what they were: still refused on /v1, still unable to make endpoints.
    tmp = {"Authorization": f"Bearer {first['api_token']}"}
    assert_error(await client.get("/v1/endpoints", headers=tmp), 403, "temporary_token")
    assert (await client.get(f"/inbox/{first['endpoint_id']}", headers=tmp)).status_code == 200


async def test_a_token_whose_account_registered_is_409_already_registered(client):
    started = await _start(client)
    first = await client.post("/api/register", json={"email": "a@example.com", "api_token": started["api_token"]})
    assert first.status_code == 201
    again = await client.post("/api/register", json={"email": "b@example.com", "api_token": started["api_token"]})
    err = assert_error(again, 409, "already_registered", field="api_token")
    assert "hy_live_" in err["message"]


async def test_an_unknown_revoked_or_expired_token_is_401(client, database_url):
    unknown = "hy_tmp_" + "A" * 32
    err = assert_error(
        await client.post("/api/register", json={"email": "a@example.com", "api_token": unknown}),
        401,
        "unauthorized",
        field="api_token",
    )
    assert "unknown" in err["message"]
    for change in ("revoked_at = now()", "expires_at = now() - interval '1 second'"):
        client.cookies.clear()
        started = await _start(client)
        async with db(database_url) as conn:
            await conn.execute(
                f"UPDATE api_keys SET {change} WHERE key_hash = $1",
                hash_key(started["api_token"]),
            )
        resp = await client.post("/api/register", json={"email": "a@example.com", "api_token": started["api_token"]})
        assert_error(resp, 401, "unauthorized", field="api_token")
    async with db(database_url) as conn:
        assert await conn.fetchval("SELECT count(*) FROM accounts WHERE email IS NOT NULL") == 0


async def test_an_expired_endpoint_is_not_claimed(client, database_url):
    live = await _start(client)
    expired = await _start(client, ref="old")
    async with db(database_url) as conn:
        await conn.execute(
            "UPDATE endpoints SET expires_at = now() - interval '1 second' WHERE id = $1", expired["endpoint_id"]
        )
    resp = await client.post("/api/register", json={"email": "a@example.com", "api_token": live["api_token"]})
    assert resp.status_code == 201
    assert [e["id"] for e in resp.json()["endpoints"]] == [live["endpoint_id"]]
    async with db(database_url) as conn:
        row = await conn.fetchrow("SELECT temporary, expires_at FROM endpoints WHERE id = $1", expired["endpoint_id"])
    assert row["temporary"] is True  # left for the sweep
    assert row["expires_at"] is not None


async def test_registration_closed_refuses_register(servers, database_url, redis_prefix):
    settings = load_settings(
        {}, database_url=database_url, redis_url=servers.redis_url, redis_prefix=redis_prefix, registration="closed"
    )
    async with AsyncTestClient(app=create_app(settings)) as client:
        err = assert_error(
            await client.post("/api/register", json={"email": "a@example.com"}), 403, "registration_closed"
        )
        assert "operator" in err["message"]
    async with db(database_url) as conn:
        assert await conn.fetchval("SELECT count(*) FROM accounts") == 0


BAD_BODIES = [
    ({}, "email"),
    ({"email": None}, "email"),
    ({"email": "a\x00b@example.com"}, "email"),
    ({"email": "a@example.com\n"}, "email"),
    ({"email": "not-an-address"}, "email"),
    ({"email": "a@localhost"}, "email"),
    ({"email": "a b@example.com"}, "email"),
    ({"email": "x" * 250 + "@example.com"}, "email"),
    ({"email": 7}, "email"),
    ({"email": "a@example.com", "api_token": "hy_live_" + "A" * 32}, "api_token"),
    ({"email": "a@example.com", "api_token": "hy_tmp_" + "A" * 31}, "api_token"),
    ({"email": "a@example.com", "api_token": "hy_tmp_" + "A" * 31 + "\x00"}, "api_token"),
    ({"email": "a@example.com", "api_token": "hy_tmp_" + "A" * 32 + "\n"}, "api_token"),
    ({"email": "a@example.com", "password": "x"}, "password"),
    ([], "body"),
]


@pytest.mark.parametrize(("body", "field"), BAD_BODIES)
async def test_bad_bodies_are_400_naming_the_field(client, body, field, database_url):
    assert_error(await client.post("/api/register", json=body), 400, "validation_error", field=field)
    async with db(database_url) as conn:
        assert await conn.fetchval("SELECT count(*) FROM accounts") == 0


async def test_an_empty_body_is_400(client):
    assert_error(await client.post("/api/register"), 400, "validation_error", field="body")
