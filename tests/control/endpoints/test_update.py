"""/v1/endpoints/{id} PATCH: only the given fields change, refusals change nothing, and external_ref is
unique per account on create and on patch, racing writes included."""

from __future__ import annotations

import asyncio

from tests.helpers import ENDPOINT_FIELDS, assert_error, concurrent_client, create_endpoint, db, parse_ts


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
