"""/v1/endpoints/{id} DELETE (events and everything hanging off the endpoint go with it), another
account's endpoints are 404 and untouched, and the 401/403 statuses of every route."""

from __future__ import annotations

import uuid

from control.service.accounts import issue_key
from tests.conftest import make_account
from tests.helpers import assert_error, create_endpoint, db


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
    err = assert_error(resp, 403, "quota_exceeded")
    assert "quota" in err["message"]
