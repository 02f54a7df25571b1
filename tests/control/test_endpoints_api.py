"""/v1/endpoints: every route, its record shape and each error status SPEC.md lists for it."""

from __future__ import annotations

import asyncio
import base64
import re
import uuid
from datetime import UTC, datetime, timedelta

from litestar.testing import AsyncTestClient

from control.app import create_app
from control.service.accounts import issue_key
from shared.settings import load_settings
from tests.conftest import make_account
from tests.helpers import (
    BASE62,
    ENDPOINT_FIELDS,
    ULID,
    assert_error,
    concurrent_client,
    create_endpoint,
    db,
    module_database_url,  # noqa: F401 - fixtures
    parse_ts,
    token_of,
    unsealed,
    utcnow,
)

# -- create ---------------------------------------------------------------------------------------


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


# -- list -----------------------------------------------------------------------------------------


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


# -- read -----------------------------------------------------------------------------------------


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


# -- update ---------------------------------------------------------------------------------------


async def test_patch_changes_only_the_given_fields_and_moves_updated_at(client, account):
    made = await create_endpoint(client, account.headers, name="old", environment="sandbox", external_ref="r")
    resp = await client.patch(f"/v1/endpoints/{made['id']}", json={"name": "new"}, headers=account.headers)
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert set(body) == ENDPOINT_FIELDS
    assert body["name"] == "new"
    assert body["environment"] == "sandbox"
    assert body["external_ref"] == "r"
    assert body["ingest_url"] == made["ingest_url"]
    assert body["created_at"] == made["created_at"]
    assert parse_ts(body["updated_at"]) > parse_ts(made["updated_at"])

    again = await client.get(f"/v1/endpoints/{made['id']}", headers=account.headers)
    assert again.json() == body


async def test_patch_environment_and_ref_together(client, account):
    made = await create_endpoint(client, account.headers)
    resp = await client.patch(
        f"/v1/endpoints/{made['id']}",
        json={"environment": "development", "external_ref": "dev-hooks"},
        headers=account.headers,
    )
    assert resp.status_code == 200
    assert (resp.json()["environment"], resp.json()["external_ref"], resp.json()["name"]) == (
        "development",
        "dev-hooks",
        made["name"],
    )


async def test_patch_null_external_ref_clears_it(client, account, database_url):
    made = await create_endpoint(client, account.headers, external_ref="to-clear")
    resp = await client.patch(f"/v1/endpoints/{made['id']}", json={"external_ref": None}, headers=account.headers)
    assert resp.status_code == 200
    assert resp.json()["external_ref"] is None
    async with db(database_url) as conn:
        assert await conn.fetchval("SELECT external_ref FROM endpoints WHERE id = $1", made["id"]) is None
    # The freed ref can be taken again.
    await create_endpoint(client, account.headers, external_ref="to-clear")


async def test_patch_empty_body_changes_nothing(client, account):
    made = await create_endpoint(client, account.headers, external_ref="keep")
    resp = await client.patch(f"/v1/endpoints/{made['id']}", json={}, headers=account.headers)
    assert resp.status_code == 200
    assert resp.json() == {k: v for k, v in made.items() if k != "signing_secret"}


async def test_patch_to_its_own_ref_is_not_a_conflict(client, account):
    made = await create_endpoint(client, account.headers, external_ref="same")
    resp = await client.patch(f"/v1/endpoints/{made['id']}", json={"external_ref": "same"}, headers=account.headers)
    assert resp.status_code == 200
    assert resp.json()["external_ref"] == "same"


INVALID_PATCHES = [
    ({"colour": "red"}, "colour"),
    ({"name": "ok", "ingest_url": "x"}, "ingest_url"),
    ({"name": 1}, "name"),
    ({"name": None}, "name"),
    ({"name": ""}, "name"),
    ({"name": " \t "}, "name"),
    ({"environment": "prod"}, "environment"),
    ({"environment": None}, "environment"),
    ({"external_ref": ""}, "external_ref"),
    ({"external_ref": ["a"]}, "external_ref"),
]


async def test_patch_rejects_invalid_bodies_and_changes_nothing(client, account, subtests):
    made = await create_endpoint(client, account.headers, name="keep", external_ref="keep")
    for payload, field in INVALID_PATCHES:
        with subtests.test(payload=payload):
            resp = await client.patch(f"/v1/endpoints/{made['id']}", json=payload, headers=account.headers)
            assert_error(resp, 400, "validation_error", field=field)
    after = await client.get(f"/v1/endpoints/{made['id']}", headers=account.headers)
    assert after.json() == {k: v for k, v in made.items() if k != "signing_secret"}


async def test_patch_unknown_id_is_404(client, account):
    resp = await client.patch("/v1/endpoints/ep_missing", json={"name": "x"}, headers=account.headers)
    assert_error(resp, 404, "not_found")


# -- external_ref uniqueness ----------------------------------------------------------------------


async def test_external_ref_is_unique_per_account_on_create(client, account, database_url):
    await create_endpoint(client, account.headers, external_ref="unique")
    resp = await client.post("/v1/endpoints", json={"name": "dup", "external_ref": "unique"}, headers=account.headers)
    err = assert_error(resp, 409, "external_ref_taken", field="external_ref")
    assert "unique" in err["message"]
    async with db(database_url) as conn:
        assert await conn.fetchval("SELECT count(*) FROM endpoints WHERE account_id = $1", account.id) == 1
        assert (
            await conn.fetchval(
                "SELECT count(*) FROM auth_configs a JOIN endpoints e ON e.id = a.endpoint_id WHERE e.account_id = $1",
                account.id,
            )
            == 1
        )


async def test_external_ref_is_unique_per_account_on_patch(client, account):
    await create_endpoint(client, account.headers, external_ref="taken")
    other = await create_endpoint(client, account.headers, external_ref="mine")
    resp = await client.patch(f"/v1/endpoints/{other['id']}", json={"external_ref": "taken"}, headers=account.headers)
    assert_error(resp, 409, "external_ref_taken", field="external_ref")
    after = await client.get(f"/v1/endpoints/{other['id']}", headers=account.headers)
    assert after.json()["external_ref"] == "mine"


async def test_same_external_ref_is_allowed_in_another_account(client, account, other_account):
    a = await create_endpoint(client, account.headers, external_ref="shared-name")
    b = await create_endpoint(client, other_account.headers, external_ref="shared-name")
    assert a["id"] != b["id"]
    patched = await create_endpoint(client, other_account.headers, external_ref="elsewhere")
    resp = await client.patch(
        f"/v1/endpoints/{patched['id']}", json={"external_ref": "shared-name-2"}, headers=other_account.headers
    )
    assert resp.status_code == 200
    # ...and a ref one account moved onto is still free in the other
    await create_endpoint(client, account.headers, external_ref="shared-name-2")


async def test_racing_writes_of_one_external_ref_give_one_winner_and_409s(settings, account, database_url):
    async with concurrent_client(settings) as c:
        creates = await asyncio.gather(
            *(
                c.post("/v1/endpoints", json={"name": f"n{i}", "external_ref": "race"}, headers=account.headers)
                for i in range(6)
            )
        )
        assert sorted(r.status_code for r in creates) == [201] + [409] * 5, [r.text for r in creates]
        for r in creates:
            if r.status_code == 409:
                assert_error(r, 409, "external_ref_taken", field="external_ref")

        a = await create_endpoint(c, account.headers)
        b = await create_endpoint(c, account.headers)
        patches = await asyncio.gather(
            *(
                c.patch(f"/v1/endpoints/{e['id']}", json={"external_ref": "race-2"}, headers=account.headers)
                for e in (a, b)
            )
        )
        assert sorted(r.status_code for r in patches) == [200, 409], [r.text for r in patches]
    async with db(database_url) as conn:
        rows = await conn.fetch("SELECT external_ref FROM endpoints WHERE account_id = $1", account.id)
    refs = [r["external_ref"] for r in rows]
    assert len(refs) == 3
    assert sorted(r for r in refs if r is not None) == ["race", "race-2"]


async def test_many_endpoints_without_ref_do_not_conflict(client, account):
    for _ in range(3):
        await create_endpoint(client, account.headers)
    resp = await client.get("/v1/endpoints", headers=account.headers)
    assert len(resp.json()["endpoints"]) == 3


# -- delete ---------------------------------------------------------------------------------------


async def test_delete_returns_id_and_deleted_then_404(client, account):
    made = await create_endpoint(client, account.headers)
    resp = await client.delete(f"/v1/endpoints/{made['id']}", headers=account.headers)
    assert resp.status_code == 200
    assert resp.json() == {"id": made["id"], "deleted": True}

    assert_error(await client.get(f"/v1/endpoints/{made['id']}", headers=account.headers), 404, "not_found")
    assert_error(await client.delete(f"/v1/endpoints/{made['id']}", headers=account.headers), 404, "not_found")
    assert_error(
        await client.patch(f"/v1/endpoints/{made['id']}", json={"name": "x"}, headers=account.headers),
        404,
        "not_found",
    )
    assert (await client.get("/v1/endpoints", headers=account.headers)).json() == {"endpoints": []}


async def test_delete_unknown_id_is_404(client, account):
    assert_error(await client.delete("/v1/endpoints/ep_nothing", headers=account.headers), 404, "not_found")


async def _attach_everything(conn, account_id: str, endpoint_id: str, tag: str) -> None:
    """One row in every table that hangs off an endpoint (ids carry ``tag`` so two endpoints never clash)."""
    await conn.execute(
        """INSERT INTO events (id, endpoint_id, received_at, method, headers, body, body_is_utf8)
           VALUES ($1, $2, now(), 'POST', '{}'::jsonb, '\\x7b7d'::bytea, true),
                  ($3, $2, now() - interval '1 day', 'POST', '{}'::jsonb, ''::bytea, true)""",
        f"evt_{tag}",
        endpoint_id,
        f"evt_{tag}_old",
    )
    await conn.execute(
        "INSERT INTO destinations (id, endpoint_id, name, url) VALUES ($1, $2, 'd', 'http://127.0.0.1:9/')",
        f"dst_{tag}",
        endpoint_id,
    )
    await conn.execute(
        "INSERT INTO rules (id, endpoint_id, name, condition_tree) VALUES ($1, $2, 'r', $3::jsonb)",
        f"rule_{tag}",
        endpoint_id,
        '{"op": "AND", "children": []}',
    )
    await conn.execute(
        "INSERT INTO rule_destinations (rule_id, destination_id) VALUES ($1, $2)", f"rule_{tag}", f"dst_{tag}"
    )
    await conn.execute(
        """INSERT INTO delivery_tasks (id, endpoint_id, event_id, event_received_at, rule_id, destination_id)
           VALUES ($1, $2, $3, now(), $4, $5)""",
        f"task_{tag}",
        endpoint_id,
        f"evt_{tag}",
        f"rule_{tag}",
        f"dst_{tag}",
    )
    await conn.execute(
        """INSERT INTO deliveries (id, endpoint_id, event_id, destination_id, rule_id, source, attempt_number, success)
           VALUES ($1, $2, $3, $4, $5, 'rule', 1, true)""",
        f"dlv_{tag}",
        endpoint_id,
        f"evt_{tag}",
        f"dst_{tag}",
        f"rule_{tag}",
    )
    await conn.execute(
        "INSERT INTO label_rules (id, endpoint_id, path, output_key) VALUES ($1, $2, 'data.id', 'id')",
        f"lbl_{tag}",
        endpoint_id,
    )
    await conn.execute(
        "INSERT INTO allowlist_entries (id, endpoint_id, cidr) VALUES ($1, $2, '10.0.0.0/8')", f"al_{tag}", endpoint_id
    )
    await conn.execute(
        "INSERT INTO schemas (id, account_id, scope_key, provider, event_type) VALUES ($1, $2, $3, 'payments', $4)",
        f"sch_{tag}",
        account_id,
        f"p:payments:type.{tag}",
        f"type.{tag}",
    )
    await conn.execute(
        """INSERT INTO schema_endpoints (schema_id, endpoint_id, first_seen_at, last_seen_at)
           VALUES ($1, $2, now(), now())""",
        f"sch_{tag}",
        endpoint_id,
    )


_HANGING = {
    "events": "endpoint_id",
    "destinations": "endpoint_id",
    "rules": "endpoint_id",
    "delivery_tasks": "endpoint_id",
    "deliveries": "endpoint_id",
    "label_rules": "endpoint_id",
    "allowlist_entries": "endpoint_id",
    "auth_configs": "endpoint_id",
    "schema_endpoints": "endpoint_id",
}


async def _counts(conn, endpoint_id: str) -> dict[str, int]:
    out = {t: await conn.fetchval(f"SELECT count(*) FROM {t} WHERE {c} = $1", endpoint_id) for t, c in _HANGING.items()}
    out["rule_destinations"] = await conn.fetchval(
        "SELECT count(*) FROM rule_destinations rd JOIN rules r ON r.id = rd.rule_id WHERE r.endpoint_id = $1",
        endpoint_id,
    )
    return out


async def test_delete_removes_events_and_everything_hanging_off_the_endpoint(client, account, database_url):
    doomed = await create_endpoint(client, account.headers, external_ref="doomed")
    kept = await create_endpoint(client, account.headers)
    async with db(database_url) as conn:
        tag_a, tag_b = (uuid.uuid4().hex[:8] for _ in range(2))
        await _attach_everything(conn, account.id, doomed["id"], tag_a)
        await _attach_everything(conn, account.id, kept["id"], tag_b)
        before = await _counts(conn, doomed["id"])
        assert all(n >= 1 for n in before.values()), before
        assert before["events"] == 2

    resp = await client.delete(f"/v1/endpoints/{doomed['id']}", headers=account.headers)
    assert resp.status_code == 200

    async with db(database_url) as conn:
        assert await conn.fetchval("SELECT count(*) FROM endpoints WHERE id = $1", doomed["id"]) == 0
        assert set((await _counts(conn, doomed["id"])).values()) == {0}
        assert await conn.fetchval("SELECT count(*) FROM rule_destinations WHERE rule_id = $1", f"rule_{tag_a}") == 0
        # The other endpoint keeps everything it had.
        assert await _counts(conn, kept["id"]) == before
        # Learned schemas are retained per account, beyond the endpoint's life.
        assert await conn.fetchval("SELECT count(*) FROM schemas WHERE id = $1", f"sch_{tag_a}") == 1
    # Its external_ref is free again.
    await create_endpoint(client, account.headers, external_ref="doomed")


# -- another account's endpoints ------------------------------------------------------------------


async def test_another_accounts_endpoint_is_404_and_untouched(client, account, other_account, database_url):
    theirs = await create_endpoint(client, other_account.headers, name="theirs", external_ref="t")
    url = f"/v1/endpoints/{theirs['id']}"

    get_err = assert_error(await client.get(url, headers=account.headers), 404, "not_found")
    unknown_err = assert_error(
        await client.get("/v1/endpoints/ep_01J0000000000000000000000", headers=account.headers), 404, "not_found"
    )
    # Same shape of answer as a truly unknown id: nothing tells the caller the id exists.
    assert get_err["message"].replace(theirs["id"], "X") == unknown_err["message"].replace(
        "ep_01J0000000000000000000000", "X"
    )
    assert_error(await client.patch(url, json={"name": "mine"}, headers=account.headers), 404, "not_found")
    assert_error(await client.delete(url, headers=account.headers), 404, "not_found")

    async with db(database_url) as conn:
        row = await conn.fetchrow("SELECT name, account_id FROM endpoints WHERE id = $1", theirs["id"])
    assert (row["name"], row["account_id"]) == ("theirs", other_account.id)
    resp = await client.get(url, headers=other_account.headers)
    assert resp.status_code == 200
    assert resp.json()["name"] == "theirs"


# -- error statuses per route ---------------------------------------------------------------------

ROUTES = [
    ("GET", "/v1/endpoints", None),
    ("POST", "/v1/endpoints", {"name": "x"}),
    ("GET", "/v1/endpoints/{id}", None),
    ("PATCH", "/v1/endpoints/{id}", {"name": "x"}),
    ("DELETE", "/v1/endpoints/{id}", None),
]


async def test_every_route_answers_401_without_valid_credentials(client, account, database_url, subtests):
    made = await create_endpoint(client, account.headers, name="keep")
    for method, path, payload in ROUTES:
        for authorization in (None, "Bearer hy_live_" + "0" * 32, "Token abc"):
            with subtests.test(method=method, path=path, authorization=authorization):
                headers = {"Authorization": authorization} if authorization else {}
                resp = await client.request(method, path.format(id=made["id"]), json=payload, headers=headers)
                assert_error(resp, 401, "unauthorized")
                assert resp.headers["www-authenticate"].startswith("Bearer")
    async with db(database_url) as conn:
        rows = await conn.fetch("SELECT id, name FROM endpoints WHERE account_id = $1", account.id)
    assert [tuple(r) for r in rows] == [(made["id"], "keep")]


async def test_every_writing_route_answers_403_to_a_read_only_key(client, account, database_url, subtests):
    made = await create_endpoint(client, account.headers, name="keep")
    async with db(database_url) as conn:
        ro_key = await issue_key(conn, account.id, read_only=True)
    for method, path, payload in ROUTES:
        with subtests.test(method=method, path=path):
            resp = await client.request(
                method, path.format(id=made["id"]), json=payload, headers={"Authorization": f"Bearer {ro_key}"}
            )
            if method == "GET":
                assert resp.status_code == 200, resp.text
            else:
                assert_error(resp, 403, "forbidden")
    async with db(database_url) as conn:
        rows = await conn.fetch("SELECT id, name FROM endpoints WHERE account_id = $1", account.id)
    assert [tuple(r) for r in rows] == [(made["id"], "keep")]


async def test_post_answers_403_over_quota(client, database_url):
    capped = await make_account(database_url, endpoint_quota=1)
    await create_endpoint(client, capped.headers)
    resp = await client.post("/v1/endpoints", json={"name": "second"}, headers=capped.headers)
    err = assert_error(resp, 403, "forbidden")
    assert "quota" in err["message"]
