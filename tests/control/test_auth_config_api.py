"""/v1/endpoints/{id}/auth-config and its rotate-secret: shape, validation, errors, tenant isolation, the
write-only secret, and the edge config in Redis following every change."""

from __future__ import annotations

import json
from typing import Any

import pytest
import redis.asyncio as aioredis

from control.records.trust import MAX_TOLERANCE_SECONDS
from control.service.accounts import issue_key
from shared.headers import raw_headers
from shared.keys import Keys
from shared.signatures import sign, verify
from shared.wire import EdgeEndpoint, decode_edge_endpoint
from tests.helpers import (  # noqa: F401 - fixtures
    ENDPOINT_FIELDS,
    assert_error,
    create_endpoint,
    db,
    module_database_url,
    parse_ts,
    redis_connection,
    token_of,
    unsealed,
)

DEFAULTS = {
    "hmac_enabled": False,
    "header_name": None,
    "tolerance_seconds": 300,
    "on_failure": "reject",
    "log_blocked_ips": False,
    "secret_set": False,
    "provider": None,
    "verify_token_set": False,
}
PROVIDER_SECRET = "whsec_provider-own-secret-0123456789"


async def edge_config(redis: aioredis.Redis, settings, endpoint: dict[str, Any]) -> EdgeEndpoint:
    raw = await redis.get(Keys(settings.redis_prefix).endpoint_config(token_of(endpoint["ingest_url"])))
    assert raw is not None
    return decode_edge_endpoint(raw)


def path(endpoint: dict[str, Any], suffix: str = "") -> str:
    return f"/v1/endpoints/{endpoint['id']}/auth-config{suffix}"


# -- GET ------------------------------------------------------------------------------------------


async def test_a_new_endpoint_has_the_default_config(client, account):
    made = await create_endpoint(client, account.headers)
    resp = await client.get(path(made), headers=account.headers)
    assert resp.status_code == 200, resp.text
    assert resp.headers["content-type"].startswith("application/json")
    assert resp.json() == DEFAULTS
    assert made["signing_secret"] not in resp.text


# -- PATCH ----------------------------------------------------------------------------------------


async def test_patch_sets_every_field_and_never_returns_the_secret(client, account, database_url):
    made = await create_endpoint(client, account.headers)
    change = {
        "hmac_enabled": True,
        "secret": PROVIDER_SECRET,
        "header_name": "X-My-Signature",
        "tolerance_seconds": 60,
        "on_failure": "accept_log",
        "log_blocked_ips": True,
    }
    resp = await client.patch(path(made), json=change, headers=account.headers)
    assert resp.status_code == 200, resp.text
    expected = {
        "hmac_enabled": True,
        "header_name": "x-my-signature",  # a header name is stored as the edge sees it: lowercased
        "tolerance_seconds": 60,
        "on_failure": "accept_log",
        "log_blocked_ips": True,
        "secret_set": True,
        "provider": None,
        "verify_token_set": False,
    }
    assert resp.json() == expected
    answers = [resp.text]
    for url in (path(made), f"/v1/endpoints/{made['id']}", "/v1/endpoints"):
        got = await client.get(url, headers=account.headers)
        assert got.status_code == 200, got.text
        answers.append(got.text)
    assert json.loads(answers[1]) == expected
    for text in answers:
        assert PROVIDER_SECRET not in text
        assert made["signing_secret"] not in text
    async with db(database_url) as conn:
        row = await conn.fetchrow("SELECT secret, header_name FROM auth_configs WHERE endpoint_id = $1", made["id"])
    assert row["secret"].startswith("hyenc:")  # sealed at rest (tests/security/test_secrets_at_rest.py)
    assert (unsealed(row["secret"], "auth_configs.secret", made["id"]), row["header_name"]) == (
        PROVIDER_SECRET,
        "x-my-signature",
    )


async def test_patch_changes_only_the_fields_given(client, account):
    made = await create_endpoint(client, account.headers)
    first = await client.patch(
        path(made),
        json={"hmac_enabled": True, "secret": PROVIDER_SECRET, "header_name": "x-sig"},
        headers=account.headers,
    )
    assert first.status_code == 200, first.text
    resp = await client.patch(path(made), json={"tolerance_seconds": 10}, headers=account.headers)
    assert resp.status_code == 200, resp.text
    assert resp.json() == {
        **DEFAULTS,
        "hmac_enabled": True,
        "header_name": "x-sig",
        "secret_set": True,
        "tolerance_seconds": 10,
    }
    empty = await client.patch(path(made), json={}, headers=account.headers)
    assert empty.status_code == 200, empty.text
    assert empty.json() == resp.json()


async def test_null_clears_the_secret_and_the_header_name(client, account, database_url):
    made = await create_endpoint(client, account.headers)
    await client.patch(path(made), json={"secret": PROVIDER_SECRET, "header_name": "x-sig"}, headers=account.headers)
    resp = await client.patch(path(made), json={"secret": None, "header_name": None}, headers=account.headers)
    assert resp.status_code == 200, resp.text
    assert resp.json() == DEFAULTS
    async with db(database_url) as conn:
        row = await conn.fetchrow("SELECT secret, header_name FROM auth_configs WHERE endpoint_id = $1", made["id"])
    assert tuple(row) == (None, None)


@pytest.mark.parametrize(
    "change",
    [
        {"secret": "x" * 16},
        {"secret": "x" * 1024},
        {"tolerance_seconds": 1},
        {"tolerance_seconds": MAX_TOLERANCE_SECONDS},
        {"header_name": "!#$%&'*+-.^_`|~09azAZ"},
        {"header_name": "h" * 100},
    ],
    ids=["secret-16", "secret-1024", "tolerance-1", "tolerance-max", "header-token-chars", "header-100"],
)
async def test_patch_accepts_the_boundaries(client, account, change):
    made = await create_endpoint(client, account.headers)
    resp = await client.patch(path(made), json=change, headers=account.headers)
    assert resp.status_code == 200, resp.text
    field, value = next(iter(change.items()))
    if field == "secret":
        assert resp.json()["secret_set"] is True
    else:
        assert resp.json()[field] == (value.lower() if isinstance(value, str) else value)


INVALID = [
    (
        {"secret": "x" * 15},
        "secret",
        "secret: must be 16 to 1024 characters long, got 15 (a shorter secret is too easy to guess: if the provider "
        "issued this one, or let you set it, rotate it there to one of at least 16 characters and give that here)",
    ),
    ({"secret": ""}, "secret", "secret: must be 16 to 1024 characters long, got 0"),
    ({"secret": "x" * 1025}, "secret", "secret: must be 16 to 1024 characters long, got 1025"),
    ({"secret": 1234567890123456789}, "secret", "secret: must be a string or null, got a number"),
    ({"secret": " whsec_padded-secret-value "}, "secret", "must not start or end with whitespace"),
    ({"secret": "whsec_trailing-newline-secret\n"}, "secret", "must not start or end with whitespace"),
    ({"header_name": "x signature"}, "header_name", "header_name: must be a header name"),
    ({"header_name": "x-sig:"}, "header_name", "header_name: must be a header name"),
    ({"header_name": ""}, "header_name", "header_name: must be 1 to 100 characters long, got 0"),
    ({"header_name": "h" * 101}, "header_name", "header_name: must be 1 to 100 characters long, got 101"),
    ({"header_name": 5}, "header_name", "header_name: must be a string or null, got 5"),
    (
        {"tolerance_seconds": 0},
        "tolerance_seconds",
        f"tolerance_seconds: must be an integer from 1 to {MAX_TOLERANCE_SECONDS}, got 0",
    ),
    (
        {"tolerance_seconds": -300},
        "tolerance_seconds",
        f"must be an integer from 1 to {MAX_TOLERANCE_SECONDS}, got -300",
    ),
    (
        {"tolerance_seconds": MAX_TOLERANCE_SECONDS + 1},
        "tolerance_seconds",
        f"must be an integer from 1 to {MAX_TOLERANCE_SECONDS}, got {MAX_TOLERANCE_SECONDS + 1}",
    ),
    ({"tolerance_seconds": 1.5}, "tolerance_seconds", f"must be an integer from 1 to {MAX_TOLERANCE_SECONDS}, got 1.5"),
    (
        {"tolerance_seconds": None},
        "tolerance_seconds",
        f"must be an integer from 1 to {MAX_TOLERANCE_SECONDS}, got null",
    ),
    ({"on_failure": "drop"}, "on_failure", 'on_failure: must be one of accept_log, reject, got "drop"'),
    ({"on_failure": None}, "on_failure", "on_failure: must be one of accept_log, reject, got null"),
    ({"hmac_enabled": "yes"}, "hmac_enabled", 'hmac_enabled: must be true or false, got "yes"'),
    ({"hmac_enabled": None}, "hmac_enabled", "hmac_enabled: must be true or false, got null"),
    ({"log_blocked_ips": [True]}, "log_blocked_ips", "log_blocked_ips: must be true or false, got [true]"),
    ({"algorithm": "sha256"}, "algorithm", "unknown field"),
]


@pytest.mark.parametrize(
    ("change", "field", "message"), INVALID, ids=[f"{f}-{i}" for i, (_, f, _m) in enumerate(INVALID)]
)
async def test_patch_rejects_invalid_fields_naming_the_field(client, account, change, field, message):
    made = await create_endpoint(client, account.headers)
    resp = await client.patch(path(made), json=change, headers=account.headers)
    err = assert_error(resp, 400, "validation_error", field=field)
    assert message in err["message"], err
    if isinstance(change.get("secret"), str) and change["secret"].strip():
        assert change["secret"].strip() not in resp.text  # a rejected secret is not echoed either
    after = await client.get(path(made), headers=account.headers)
    assert after.json() == DEFAULTS


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        # the body holds a secret: given as an array, it is shown by kind and length (it may be the secret)
        (b'["whsec_SECRET"]', "body: must be an object, got an array of 1 item"),
        (b"{", "body: malformed JSON"),
        (b"", "body:"),
    ],
    ids=["array", "malformed", "empty"],
)
async def test_patch_rejects_a_body_that_is_not_an_object(client, account, raw, message):
    made = await create_endpoint(client, account.headers)
    resp = await client.patch(path(made), content=raw, headers={**account.headers, "content-type": "application/json"})
    err = assert_error(resp, 400, "validation_error")
    assert err["message"].startswith(message), err


# -- rotate-secret --------------------------------------------------------------------------------


async def test_rotate_returns_a_new_secret_each_time_with_the_endpoint(client, account, database_url):
    made = await create_endpoint(client, account.headers)
    secrets_seen = {made["signing_secret"]}
    updated_at = parse_ts(made["updated_at"])
    for _ in range(3):
        resp = await client.post(path(made, "/rotate-secret"), headers=account.headers)
        assert resp.status_code == 200, resp.text
        body = resp.json()
        assert set(body) == ENDPOINT_FIELDS | {"signing_secret"}
        assert {k: body[k] for k in ENDPOINT_FIELDS - {"updated_at"}} == {
            k: made[k] for k in ENDPOINT_FIELDS - {"updated_at"}
        }
        assert parse_ts(body["updated_at"]) >= updated_at
        updated_at = parse_ts(body["updated_at"])
        assert body["signing_secret"].startswith("whsec_")
        assert body["signing_secret"] not in secrets_seen
        secrets_seen.add(body["signing_secret"])
        async with db(database_url) as conn:
            stored = await conn.fetchval("SELECT signing_secret FROM endpoints WHERE id = $1", made["id"])
        assert unsealed(stored, "endpoints.signing_secret", made["id"]) == body["signing_secret"]
        for url in (path(made), f"/v1/endpoints/{made['id']}", "/v1/endpoints"):
            got = await client.get(url, headers=account.headers)
            assert not any(s in got.text for s in secrets_seen), url


async def test_rotate_makes_the_edge_verify_with_the_new_secret_only(client, account, redis, settings):
    made = await create_endpoint(client, account.headers)
    await client.patch(path(made), json={"hmac_enabled": True}, headers=account.headers)
    old = made["signing_secret"]
    body = b'{"type":"user.created"}'
    old_signed = sign("identity", body, old)
    config = await edge_config(redis, settings, made)
    assert config.auth.hmac_enabled is True
    assert config.auth.secret == old  # no secret of its own: the platform secret verifies
    assert verify(raw_headers(old_signed), body, config.auth.secret).valid

    rotated = (await client.post(path(made, "/rotate-secret"), headers=account.headers)).json()
    config = await edge_config(redis, settings, made)
    assert config.auth.secret == rotated["signing_secret"]
    assert verify(raw_headers(old_signed), body, config.auth.secret).reason == "signature_mismatch"
    assert verify(raw_headers(sign("identity", body, rotated["signing_secret"])), body, config.auth.secret).valid


async def test_a_provider_secret_wins_over_the_platform_secret_and_survives_rotation(client, account, redis, settings):
    made = await create_endpoint(client, account.headers)
    await client.patch(path(made), json={"hmac_enabled": True, "secret": PROVIDER_SECRET}, headers=account.headers)
    assert (await edge_config(redis, settings, made)).auth.secret == PROVIDER_SECRET
    rotated = await client.post(path(made, "/rotate-secret"), headers=account.headers)
    assert rotated.status_code == 200
    assert (await edge_config(redis, settings, made)).auth.secret == PROVIDER_SECRET
    cleared = await client.patch(path(made), json={"secret": None}, headers=account.headers)
    assert cleared.json()["secret_set"] is False
    assert (await edge_config(redis, settings, made)).auth.secret == rotated.json()["signing_secret"]


# -- the edge config follows every change -----------------------------------------------------------


async def test_every_patch_reaches_the_edge_config(client, account, redis, settings):
    made = await create_endpoint(client, account.headers)
    steps = [
        {"hmac_enabled": True},
        {"secret": PROVIDER_SECRET},
        {"header_name": "X-Signature"},
        {"tolerance_seconds": 5},
        {"on_failure": "accept_log"},
        {"log_blocked_ips": True},
        {"header_name": None},
        {"hmac_enabled": False, "on_failure": "reject"},
    ]
    for step in steps:
        resp = await client.patch(path(made), json=step, headers=account.headers)
        assert resp.status_code == 200, resp.text
        public = resp.json()
        auth = (await edge_config(redis, settings, made)).auth
        assert auth.hmac_enabled == public["hmac_enabled"], step
        assert auth.header_name == public["header_name"], step
        assert auth.tolerance_seconds == public["tolerance_seconds"], step
        assert auth.on_failure == public["on_failure"], step
        assert auth.log_blocked_ips == public["log_blocked_ips"], step
        assert auth.secret == (PROVIDER_SECRET if public["secret_set"] else made["signing_secret"]), step


# -- errors: 401, 403, 404 and tenant isolation -------------------------------------------------------

ROUTES = [("GET", "", None), ("PATCH", "", {"hmac_enabled": True}), ("POST", "/rotate-secret", None)]


async def test_every_route_answers_401_without_a_valid_key(client, account, database_url, subtests):
    made = await create_endpoint(client, account.headers)
    for method, suffix, payload in ROUTES:
        for headers in ({}, {"Authorization": "Bearer hy_live_" + "0" * 32}, {"Authorization": account.key}):
            with subtests.test(method=method, suffix=suffix, headers=headers):
                resp = await client.request(method, path(made, suffix), json=payload, headers=headers)
                assert_error(resp, 401, "unauthorized")
    async with db(database_url) as conn:
        row = await conn.fetchrow("SELECT hmac_enabled FROM auth_configs WHERE endpoint_id = $1", made["id"])
        secret = await conn.fetchval("SELECT signing_secret FROM endpoints WHERE id = $1", made["id"])
    assert row["hmac_enabled"] is False
    assert unsealed(secret, "endpoints.signing_secret", made["id"]) == made["signing_secret"]


async def test_another_accounts_endpoint_is_404_on_every_route(client, account, other_account, database_url, subtests):
    mine = await create_endpoint(client, account.headers)
    for method, suffix, payload in ROUTES:
        for endpoint_id in (mine["id"], "ep_01JAAAAAAAAAAAAAAAAAAAAAAA", "nope"):
            with subtests.test(method=method, suffix=suffix, endpoint_id=endpoint_id):
                resp = await client.request(
                    method,
                    f"/v1/endpoints/{endpoint_id}/auth-config{suffix}",
                    json=payload,
                    headers=other_account.headers,
                )
                assert_error(resp, 404, "not_found")
                assert mine["signing_secret"] not in resp.text
    async with db(database_url) as conn:
        row = await conn.fetchrow("SELECT hmac_enabled FROM auth_configs WHERE endpoint_id = $1", mine["id"])
        secret = await conn.fetchval("SELECT signing_secret FROM endpoints WHERE id = $1", mine["id"])
    assert row["hmac_enabled"] is False
    assert unsealed(secret, "endpoints.signing_secret", mine["id"]) == mine["signing_secret"]


async def test_a_read_only_key_reads_but_cannot_change(client, account, database_url, subtests):
    made = await create_endpoint(client, account.headers)
    async with db(database_url) as conn:
        ro_key = await issue_key(conn, account.id, read_only=True)
    for method, suffix, payload in ROUTES:
        with subtests.test(method=method, suffix=suffix):
            resp = await client.request(
                method, path(made, suffix), json=payload, headers={"Authorization": f"Bearer {ro_key}"}
            )
            if method == "GET":
                assert resp.status_code == 200, resp.text
            else:
                assert_error(resp, 403, "forbidden")
    async with db(database_url) as conn:
        secret = await conn.fetchval("SELECT signing_secret FROM endpoints WHERE id = $1", made["id"])
    assert unsealed(secret, "endpoints.signing_secret", made["id"]) == made["signing_secret"]


# -- OpenAPI --------------------------------------------------------------------------------------


async def test_openapi_documents_the_routes_the_write_only_secret_and_the_rotation_warning(client):
    schema = (await client.get("/schema/openapi.json")).json()
    item = schema["paths"]["/v1/endpoints/{endpoint_id}/auth-config"]
    assert {"400", "401", "404"} <= set(item["patch"]["responses"])
    assert {"401", "404"} <= set(item["get"]["responses"])
    rotate = schema["paths"]["/v1/endpoints/{endpoint_id}/auth-config/rotate-secret"]["post"]
    assert {"200", "401", "404"} <= set(rotate["responses"])
    assert "signed with the previous\nplatform secret fails verification" in rotate["description"]
    assert "provider's own" in rotate["description"]
    components = schema["components"]["schemas"]
    assert "secret" not in components["AuthConfig"]["properties"]
    assert "secret_set" in components["AuthConfig"]["properties"]
    assert "secret" in components["AuthConfigUpdate"]["properties"]
