"""/v1/endpoints create, list and get: the record with its ingest URL and signing secret, defaults,
temporary endpoints, refusals naming the field, newest-first lists filtered by external_ref."""

from __future__ import annotations

import base64
import re
from datetime import UTC, datetime, timedelta

from litestar.testing import AsyncTestClient

from control.app import create_app
from shared.settings import load_settings
from tests.helpers import (
    BASE62,
    ENDPOINT_FIELDS,
    ULID,
    assert_error,
    create_endpoint,
    db,
    parse_ts,
    token_of,
    unsealed,
    utcnow,
)


async def test_create_returns_the_record_with_ingest_url_and_signing_secret(client, account, settings, database_url):
    before = utcnow()
    resp = await client.post(
        "/v1/endpoints",
        json={"name": "Orders", "environment": "staging", "external_ref": "shop-1"},
        headers=account.headers,
    )
    assert resp.status_code == 201, resp.text
    assert resp.headers["content-type"].startswith("application/json")
    body = resp.json()
    assert set(body) == ENDPOINT_FIELDS | {"signing_secret"}
    assert re.fullmatch(rf"ep_{ULID}", body["id"])
    assert body["name"] == "Orders"
    assert body["environment"] == "staging"
    assert body["external_ref"] == "shop-1"
    assert body["temporary"] is False
    assert body["expires_at"] is None

    assert body["ingest_url"].startswith(f"{settings.edge_url}/h/")
    token = token_of(body["ingest_url"])
    assert len(token) >= 22
    assert BASE62.match(token)

    secret = body["signing_secret"]
    assert secret.startswith("whsec_")
    assert len(base64.b64decode(secret.removeprefix("whsec_"), validate=True)) == 32

    created, updated = parse_ts(body["created_at"]), parse_ts(body["updated_at"])
    assert created == updated
    assert before - timedelta(seconds=5) <= created <= utcnow() + timedelta(seconds=5)

    async with db(database_url) as conn:
        row = await conn.fetchrow("SELECT * FROM endpoints WHERE id = $1", body["id"])
        auth = await conn.fetchrow("SELECT * FROM auth_configs WHERE endpoint_id = $1", body["id"])
    assert row["account_id"] == account.id
    assert row["ingest_token"] == token
    assert unsealed(row["signing_secret"], "endpoints.signing_secret", body["id"]) == secret
    assert (row["name"], row["environment"], row["external_ref"]) == ("Orders", "staging", "shop-1")
    assert auth is not None, "an endpoint is created with its auth config"
    assert auth["hmac_enabled"] is False, "verification is opt-in"


async def test_create_defaults_environment_to_production_and_ref_to_null(client, account):
    body = await create_endpoint(client, account.headers, name="x")
    assert body["environment"] == "production"
    assert body["external_ref"] is None


async def test_create_accepts_every_environment(client, account):
    for environment in ("production", "staging", "sandbox", "development"):
        body = await create_endpoint(client, account.headers, environment=environment)
        assert body["environment"] == environment


async def test_each_endpoint_gets_its_own_id_token_and_secret(client, account):
    a = await create_endpoint(client, account.headers)
    b = await create_endpoint(client, account.headers)
    assert a["id"] != b["id"]
    assert token_of(a["ingest_url"]) != token_of(b["ingest_url"])
    assert a["signing_secret"] != b["signing_secret"]


async def test_ingest_url_uses_the_public_edge_url(servers, database_url, redis_prefix, account):
    s = load_settings(
        {},
        database_url=database_url,
        redis_url=servers.redis_url,
        redis_prefix=redis_prefix,
        public_edge_url="https://in.example.com/",
    )
    async with AsyncTestClient(app=create_app(s)) as c:
        body = await create_endpoint(c, account.headers)
    assert re.fullmatch(r"https://in\.example\.com/h/[0-9A-Za-z]{22,}", body["ingest_url"])


INVALID_CREATES = [
    ({}, "name"),
    ({"name": ""}, "name"),
    ({"name": "   "}, "name"),
    ({"name": None}, "name"),
    ({"name": 5}, "name"),
    ({"name": "x" * 201}, "name"),
    ({"name": "x", "environment": "prod"}, "environment"),
    ({"name": "x", "environment": 1}, "environment"),
    ({"name": "x", "external_ref": ""}, "external_ref"),
    ({"name": "x", "external_ref": " padded"}, "external_ref"),
    ({"name": "x", "external_ref": 7}, "external_ref"),
    ({"name": "x", "temporary": "yes"}, "temporary"),
    ({"name": "x", "id": "ep_mine"}, "id"),
]


async def test_temporary_true_makes_an_endpoint_that_expires_in_three_days(client, account):
    """What `hookyard listen --start` asks for: like /api/start's, but in the key's own account."""
    resp = await client.post("/v1/endpoints", json={"name": "listen", "temporary": True}, headers=account.headers)
    assert resp.status_code == 201, resp.text
    body = resp.json()
    assert body["temporary"] is True
    left = datetime.fromisoformat(body["expires_at"].replace("Z", "+00:00")) - datetime.now(UTC)
    assert timedelta(days=3) - timedelta(minutes=1) < left <= timedelta(days=3)


async def test_create_rejects_invalid_bodies_naming_the_field(client, account, database_url, subtests):
    for payload, field in INVALID_CREATES:
        with subtests.test(payload=payload):
            resp = await client.post("/v1/endpoints", json=payload, headers=account.headers)
            assert_error(resp, 400, "validation_error", field=field)
    async with db(database_url) as conn:
        assert await conn.fetchval("SELECT count(*) FROM endpoints WHERE account_id = $1", account.id) == 0


async def test_create_name_of_200_characters_is_accepted(client, account):
    body = await create_endpoint(client, account.headers, name="n" * 200)
    assert body["name"] == "n" * 200


async def test_list_is_newest_first_without_secrets(client, account):
    created = [await create_endpoint(client, account.headers, name=f"ep{i}") for i in range(3)]
    resp = await client.get("/v1/endpoints", headers=account.headers)
    assert resp.status_code == 200
    body = resp.json()
    assert set(body) == {"endpoints"}
    assert [e["id"] for e in body["endpoints"]] == [e["id"] for e in reversed(created)]
    for listed, made in zip(body["endpoints"], reversed(created), strict=True):
        assert set(listed) == ENDPOINT_FIELDS
        assert listed == {k: v for k, v in made.items() if k != "signing_secret"}


async def test_list_of_a_new_account_is_empty(client, account):
    resp = await client.get("/v1/endpoints", headers=account.headers)
    assert resp.status_code == 200
    assert resp.json() == {"endpoints": []}


async def test_list_filters_by_external_ref(client, account, other_account):
    wanted = await create_endpoint(client, account.headers, external_ref="billing")
    await create_endpoint(client, account.headers, external_ref="shipping")
    await create_endpoint(client, account.headers)
    await create_endpoint(client, other_account.headers, external_ref="billing")

    resp = await client.get("/v1/endpoints", params={"external_ref": "billing"}, headers=account.headers)
    assert resp.status_code == 200
    assert [e["id"] for e in resp.json()["endpoints"]] == [wanted["id"]]

    resp = await client.get("/v1/endpoints", params={"external_ref": "nope"}, headers=account.headers)
    assert resp.json() == {"endpoints": []}


async def test_list_shows_only_the_callers_endpoints(client, account, other_account):
    mine = await create_endpoint(client, account.headers)
    theirs = await create_endpoint(client, other_account.headers)
    resp = await client.get("/v1/endpoints", headers=account.headers)
    assert [e["id"] for e in resp.json()["endpoints"]] == [mine["id"]]
    resp = await client.get("/v1/endpoints", headers=other_account.headers)
    assert [e["id"] for e in resp.json()["endpoints"]] == [theirs["id"]]


async def test_get_returns_the_record_without_the_secret(client, account):
    made = await create_endpoint(client, account.headers, external_ref="r1")
    resp = await client.get(f"/v1/endpoints/{made['id']}", headers=account.headers)
    assert resp.status_code == 200
    body = resp.json()
    assert set(body) == ENDPOINT_FIELDS
    assert "signing_secret" not in resp.text
    assert made["signing_secret"] not in resp.text
    assert body == {k: v for k, v in made.items() if k != "signing_secret"}


async def test_get_unknown_id_is_404(client, account):
    for endpoint_id in ("ep_01J0000000000000000000000", "nope", "ep_", "%20"):
        resp = await client.get(f"/v1/endpoints/{endpoint_id}", headers=account.headers)
        assert_error(resp, 404, "not_found")
