"""Bearer authentication, key kinds and scopes, endpoint quotas and the per-key rate limit on /v1."""

from __future__ import annotations

import asyncio
import time

from litestar.testing import AsyncTestClient

from control.app import create_app
from control.service.accounts import issue_key
from shared import ids
from shared.keys import Keys
from shared.settings import load_settings
from tests.conftest import make_account
from tests.helpers import (
    assert_error,
    concurrent_client,
    create_endpoint,
    db,
    key_id_of,
    module_database_url,  # noqa: F401 - fixtures
    redis_client,
)


async def test_401_for_every_kind_of_bad_credentials(client, account, database_url, subtests):
    revoked = await make_account(database_url)
    async with db(database_url) as conn:
        await conn.execute("UPDATE api_keys SET revoked_at = now() WHERE account_id = $1", revoked.id)
    cases = {
        "missing header": None,
        "empty header": "",
        "basic scheme": f"Basic {account.key}",
        "key without scheme": account.key,
        "bearer without key": "Bearer",
        "bearer blank key": "Bearer    ",
        "malformed key": "Bearer not-a-hookyard-key",
        "wrong prefix": "Bearer sk_live_" + account.key.removeprefix("hy_live_"),
        "unknown live key": f"Bearer {ids.api_key()}",
        "unknown temporary token": f"Bearer {ids.temporary_token()}",
        "truncated key": f"Bearer {account.key[:-1]}",
        "key with a suffix": f"Bearer {account.key}x",
        "revoked key": f"Bearer {revoked.key}",
    }
    for name, authorization in cases.items():
        with subtests.test(name):
            headers = {} if authorization is None else {"Authorization": authorization}
            resp = await client.get("/v1/endpoints", headers=headers)
            assert_error(resp, 401, "unauthorized")
            assert resp.headers["www-authenticate"] == 'Bearer realm="hookyard"'


async def test_valid_key_is_accepted_with_any_scheme_case_and_spacing(client, account):
    for authorization in (f"Bearer {account.key}", f"bearer {account.key}", f"BEARER  {account.key} "):
        resp = await client.get("/v1/endpoints", headers={"Authorization": authorization})
        assert resp.status_code == 200, (authorization, resp.text)


async def test_revoking_a_key_takes_effect_at_once(client, account, database_url):
    assert (await client.get("/v1/endpoints", headers=account.headers)).status_code == 200
    async with db(database_url) as conn:
        await conn.execute("UPDATE api_keys SET revoked_at = now() WHERE account_id = $1", account.id)
    assert_error(await client.get("/v1/endpoints", headers=account.headers), 401, "unauthorized")


async def test_temporary_token_gets_403_on_v1(client, database_url):
    anon = await make_account(database_url, kind="anonymous")
    assert anon.key.startswith("hy_tmp_")
    for method, payload in (("GET", None), ("POST", {"name": "x"})):
        resp = await client.request(method, "/v1/endpoints", json=payload, headers=anon.headers)
        err = assert_error(resp, 403, "temporary_token")
        assert "register" in err["message"]
    async with db(database_url) as conn:
        assert await conn.fetchval("SELECT count(*) FROM endpoints WHERE account_id = $1", anon.id) == 0


async def test_read_only_key_can_read_but_not_write(client, account, database_url):
    made = await create_endpoint(client, account.headers, name="keep")
    async with db(database_url) as conn:
        ro = {"Authorization": f"Bearer {await issue_key(conn, account.id, read_only=True)}"}
    listed = await client.get("/v1/endpoints", headers=ro)
    assert listed.status_code == 200
    assert [e["id"] for e in listed.json()["endpoints"]] == [made["id"]]
    assert (await client.get(f"/v1/endpoints/{made['id']}", headers=ro)).status_code == 200

    assert_error(await client.post("/v1/endpoints", json={"name": "x"}, headers=ro), 403, "forbidden")
    assert_error(await client.patch(f"/v1/endpoints/{made['id']}", json={"name": "y"}, headers=ro), 403, "forbidden")
    assert_error(await client.delete(f"/v1/endpoints/{made['id']}", headers=ro), 403, "forbidden")
    # An unknown id is still 404 for reads, and the write attempts changed nothing.
    assert_error(await client.get("/v1/endpoints/ep_nope", headers=ro), 404, "not_found")
    after = await client.get(f"/v1/endpoints/{made['id']}", headers=account.headers)
    assert after.json()["name"] == "keep"


async def test_endpoint_quota(client, database_url):
    capped = await make_account(database_url, endpoint_quota=2)
    first = await create_endpoint(client, capped.headers)
    await create_endpoint(client, capped.headers)
    resp = await client.post("/v1/endpoints", json={"name": "x"}, headers=capped.headers)
    err = assert_error(resp, 403, "quota_exceeded")
    assert "quota of 2" in err["message"]
    # Deleting one frees a slot.
    assert (await client.delete(f"/v1/endpoints/{first['id']}", headers=capped.headers)).status_code == 200
    await create_endpoint(client, capped.headers)
    assert_error(await client.post("/v1/endpoints", json={"name": "x"}, headers=capped.headers), 403, "quota_exceeded")

    # A quota of zero admits nothing; other accounts are not affected by anyone's quota.
    zero = await make_account(database_url, endpoint_quota=0)
    assert_error(await client.post("/v1/endpoints", json={"name": "x"}, headers=zero.headers), 403, "quota_exceeded")
    unlimited = await make_account(database_url)
    for _ in range(3):
        await create_endpoint(client, unlimited.headers)


async def test_concurrent_creates_cannot_exceed_the_quota(settings, database_url):
    capped = await make_account(database_url, endpoint_quota=3)
    async with concurrent_client(settings) as c:
        responses = await asyncio.gather(
            *(c.post("/v1/endpoints", json={"name": f"ep{i}"}, headers=capped.headers) for i in range(10))
        )
    statuses = sorted(r.status_code for r in responses)
    assert statuses == [201] * 3 + [403] * 7, [r.text for r in responses]
    for r in responses:
        if r.status_code == 403:
            assert_error(r, 403, "quota_exceeded")
    async with db(database_url) as conn:
        assert await conn.fetchval("SELECT count(*) FROM endpoints WHERE account_id = $1", capped.id) == 3


def _limited_settings(servers, database_url: str, redis_prefix: str):
    return load_settings(
        {},
        database_url=database_url,
        redis_url=servers.redis_url,
        redis_prefix=redis_prefix,
        rate_limit_per_s=1,
        rate_limit_burst=3,
    )


async def test_rate_limit_is_a_per_key_token_bucket(servers, database_url, redis_prefix, account, other_account):
    async with db(database_url) as conn:
        second_key = await issue_key(conn, account.id)
    async with AsyncTestClient(app=create_app(_limited_settings(servers, database_url, redis_prefix))) as c:
        started = time.monotonic()
        # The burst: GET and POST draw from the same bucket.
        assert (await c.get("/v1/endpoints", headers=account.headers)).status_code == 200
        assert (await c.post("/v1/endpoints", json={"name": "a"}, headers=account.headers)).status_code == 201
        assert (await c.get("/v1/endpoints", headers=account.headers)).status_code == 200

        # Past the burst only refilled tokens (1/s) pass; on any machine the next request is refused unless
        # a whole second went by, so count what the clock allows instead of assuming speed.
        refilled = 0
        for i in range(10):
            resp = await c.post("/v1/endpoints", json={"name": f"over{i}"}, headers=account.headers)
            if resp.status_code != 201:
                break
            refilled += 1
        assert refilled <= int(time.monotonic() - started), "more passed than the bucket refilled"
        err = assert_error(resp, 429, "rate_limited")
        assert "1/s" in err["message"]
        assert resp.headers["retry-after"] == "1"

        # Another key of the same account and another account's key have their own buckets.
        assert (await c.get("/v1/endpoints", headers={"Authorization": f"Bearer {second_key}"})).status_code == 200
        assert (await c.get("/v1/endpoints", headers=other_account.headers)).status_code == 200
        # Bad credentials are rejected as 401, not 429.
        assert_error(await c.get("/v1/endpoints", headers={"Authorization": "Bearer nope"}), 401, "unauthorized")

    async with db(database_url) as conn:
        count = await conn.fetchval("SELECT count(*) FROM endpoints WHERE account_id = $1", account.id)
    assert count == 1 + refilled, "a throttled POST created something"

    async with redis_client(servers.redis_url) as r:
        bucket = Keys(redis_prefix).rate_limit(await key_id_of(database_url, account.key))
        assert await r.exists(bucket) == 1
        ttl_ms = await r.pttl(bucket)
        assert 0 < ttl_ms <= 4000  # burst / rate seconds plus one, so idle buckets vanish


async def test_rate_limit_holds_under_concurrency(servers, database_url, redis_prefix, account):
    async with concurrent_client(_limited_settings(servers, database_url, redis_prefix)) as c:
        started = time.monotonic()
        responses = await asyncio.gather(*(c.get("/v1/endpoints", headers=account.headers) for _ in range(12)))
        elapsed = time.monotonic() - started
    passed = sum(r.status_code == 200 for r in responses)
    assert 3 <= passed <= 3 + int(elapsed), [r.status_code for r in responses]
    for r in responses:
        if r.status_code != 200:
            assert_error(r, 429, "rate_limited")
            assert r.headers["retry-after"] == "1"
