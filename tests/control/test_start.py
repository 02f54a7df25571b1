"""POST /api/start: a temporary endpoint without an account, found again through the session cookie and `ref`,
its temporary token (403 on /v1, refused for new endpoints everywhere) and the bad bodies it refuses."""

from __future__ import annotations

import asyncio
import json
import re
from datetime import timedelta
from typing import Any

import pytest
from litestar.testing import AsyncTestClient

from control.app import create_app
from control.records.endpoints import EndpointCreate
from control.service import endpoints as endpoints_service
from control.service.accounts import authenticate, hash_key
from control.service.anonymous import MAX_TOKENS
from shared.errors import ForbiddenError
from shared.settings import load_settings
from tests.helpers import ISO_Z, assert_error, concurrent_client, db, parse_ts, utcnow

FIELDS = {"endpoint_id", "inbox_url", "ingest_url", "expires_at", "expires_in_days", "reused", "api_token"}
TOKEN = re.compile(r"^hy_tmp_[0-9A-Za-z]{32}$")


async def start(client: Any, body: Any = None, **kwargs: Any) -> dict[str, Any]:
    resp = (
        await client.post("/api/start", json=body, **kwargs)
        if body is not None
        else await client.post("/api/start", **kwargs)
    )
    assert resp.status_code == 200, resp.text
    return resp.json()


def session_of(client: Any) -> str | None:
    return client.cookies.get("hy_session")


async def test_start_answers_a_new_temporary_endpoint(client, settings, database_url):
    before = utcnow()
    resp = await client.post("/api/start")
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert set(body) == FIELDS
    assert body["reused"] is False
    assert body["expires_in_days"] == 3
    assert ISO_Z.match(body["expires_at"])
    expires = parse_ts(body["expires_at"])
    assert before + timedelta(days=3) <= expires <= utcnow() + timedelta(days=3)
    assert body["endpoint_id"].startswith("ep_")
    assert body["inbox_url"].startswith(f"{settings.control_url}/inbox/{body['endpoint_id']}?link=")  # a link
    assert body["ingest_url"].startswith(f"{settings.edge_url}/h/")
    assert TOKEN.match(body["api_token"])

    cookie = resp.headers["set-cookie"]
    assert cookie.startswith("hy_session=")
    attributes = {part.strip().lower() for part in cookie.split(";")[1:]}
    assert {"httponly", "samesite=lax", "path=/", "max-age=259200"} <= attributes
    assert "secure" not in attributes  # the control URL is http here

    async with db(database_url) as conn:
        account = await conn.fetchrow(
            "SELECT a.* FROM accounts a JOIN endpoints e ON e.account_id = a.id WHERE e.id = $1", body["endpoint_id"]
        )
        assert account["kind"] == "anonymous"
        assert account["email"] is None
        endpoint = await conn.fetchrow("SELECT * FROM endpoints WHERE id = $1", body["endpoint_id"])
        assert endpoint["temporary"] is True
        assert endpoint["expires_at"] == expires
        assert endpoint["name"] == "Temporary endpoint"
        key = await conn.fetchrow("SELECT * FROM api_keys WHERE account_id = $1", account["id"])
        assert key["kind"] == "temporary"
        assert key["key_hash"] == hash_key(body["api_token"])  # stored hashed, never as given
        assert body["api_token"] not in repr(dict(key))
        assert before + timedelta(days=3) <= key["expires_at"] <= utcnow() + timedelta(days=3)
        session = await conn.fetchrow("SELECT * FROM anonymous_sessions WHERE account_id = $1", account["id"])
        assert session["session_hash"] != session_of(client).encode()


@pytest.mark.parametrize(
    ("content", "content_type"),
    [
        (None, None),
        (b"", "application/json"),
        (b"{}", "application/json"),
        (b"{}", None),
    ],
)
async def test_an_empty_body_is_fine(client, content, content_type):
    headers = {"content-type": content_type} if content_type else {}
    resp = await client.post("/api/start", content=content, headers=headers)
    assert resp.status_code == 200, resp.text
    assert resp.json()["reused"] is False


async def test_the_cookie_brings_back_the_same_endpoint_with_a_new_working_token(client, settings):
    first = await start(client)
    session = session_of(client)
    again = await start(client)
    assert again["endpoint_id"] == first["endpoint_id"]
    assert again["ingest_url"] == first["ingest_url"]
    assert again["inbox_url"] == first["inbox_url"]
    assert again["expires_at"] == first["expires_at"]
    assert again["reused"] is True
    assert again["expires_in_days"] == 3
    assert again["api_token"] != first["api_token"]
    assert session_of(client) == session  # the session is refreshed, not replaced
    for token in (first["api_token"], again["api_token"]):  # both open the endpoint's inbox
        resp = await client.get(f"/inbox/{first['endpoint_id']}", headers={"Authorization": f"Bearer {token}"})
        assert resp.status_code == 200

    client.cookies.clear()
    fresh = await start(client)
    assert fresh["endpoint_id"] != first["endpoint_id"]
    assert fresh["reused"] is False
    assert session_of(client) != session


async def test_concurrent_calls_of_one_session_share_one_endpoint(settings, database_url):
    async with concurrent_client(settings) as client:
        first = await start(client)
        answers = await asyncio.gather(*(start(client, {"ref": "same"}) for _ in range(6)), start(client))
    assert len({a["endpoint_id"] for a in answers[:-1]}) == 1
    assert [a["reused"] for a in answers[:-1]].count(False) == 1
    assert answers[-1]["endpoint_id"] == first["endpoint_id"]
    assert len({a["api_token"] for a in answers}) == len(answers)
    async with db(database_url) as conn:
        assert await conn.fetchval("SELECT count(*) FROM endpoints") == 2
        assert await conn.fetchval("SELECT count(*) FROM accounts") == 1


async def test_without_the_cookie_every_call_makes_a_new_endpoint_and_account(client, database_url):
    made = []
    for _ in range(3):
        client.cookies.clear()
        made.append(await start(client, {"ref": "same"}))
    assert len({m["endpoint_id"] for m in made}) == 3
    assert not any(m["reused"] for m in made)
    async with db(database_url) as conn:
        accounts = await conn.fetchval(
            "SELECT count(DISTINCT account_id) FROM endpoints WHERE id = any($1::text[])",
            [m["endpoint_id"] for m in made],
        )
    assert accounts == 3


async def test_a_ref_gives_the_session_one_endpoint_per_ref(client, database_url):
    shop = await start(client, {"ref": "shop", "provider_hint": "commerce"})
    default = await start(client)
    billing = await start(client, {"ref": "billing", "provider_hint": "payments"})
    assert len({shop["endpoint_id"], default["endpoint_id"], billing["endpoint_id"]}) == 3
    assert not any(e["reused"] for e in (shop, default, billing))

    again = await start(client, {"ref": "shop", "provider_hint": "payments"})  # the hint changes nothing
    assert (again["endpoint_id"], again["reused"]) == (shop["endpoint_id"], True)
    assert (await start(client, {}))["endpoint_id"] == default["endpoint_id"]
    assert (await start(client, {"ref": "billing"}))["endpoint_id"] == billing["endpoint_id"]

    async with db(database_url) as conn:
        rows = await conn.fetch(
            "SELECT id, account_id, external_ref, name FROM endpoints WHERE id = any($1::text[])",
            [shop["endpoint_id"], default["endpoint_id"], billing["endpoint_id"]],
        )
    by_id = {r["id"]: r for r in rows}
    assert len({r["account_id"] for r in rows}) == 1  # one session, one anonymous account
    assert by_id[shop["endpoint_id"]]["external_ref"] == "shop"
    assert by_id[shop["endpoint_id"]]["name"] == "Temporary commerce endpoint"
    assert by_id[default["endpoint_id"]]["external_ref"] is None
    assert by_id[billing["endpoint_id"]]["name"] == "Temporary payments endpoint"


async def test_expires_in_days_counts_the_whole_days_left(client, database_url):
    started = await start(client)
    async with db(database_url) as conn:
        await conn.execute(
            "UPDATE endpoints SET expires_at = now() + interval '36 hours' WHERE id = $1", started["endpoint_id"]
        )
    again = await start(client)
    assert (again["endpoint_id"], again["reused"], again["expires_in_days"]) == (started["endpoint_id"], True, 2)
    assert parse_ts(again["expires_at"]) < parse_ts(started["expires_at"])


async def test_an_expired_endpoint_is_not_handed_back(client, database_url):
    old = await start(client, {"ref": "shop"})
    async with db(database_url) as conn:
        await conn.execute(
            "UPDATE endpoints SET expires_at = now() - interval '1 second' WHERE id = $1", old["endpoint_id"]
        )
    new = await start(client, {"ref": "shop"})
    assert new["endpoint_id"] != old["endpoint_id"]
    assert new["reused"] is False
    async with db(database_url) as conn:  # it held the ref, so it went at once rather than at the next sweep
        assert await conn.fetchval("SELECT count(*) FROM endpoints WHERE id = $1", old["endpoint_id"]) == 0
        assert await conn.fetchval("SELECT external_ref FROM endpoints WHERE id = $1", new["endpoint_id"]) == "shop"


async def test_a_ref_the_session_registered_is_409_ref_taken(client):
    shop = await start(client, {"ref": "shop"})
    registered = await client.post("/api/register", json={"email": "shop@example.com", "api_token": shop["api_token"]})
    assert registered.status_code == 201, registered.text

    err = assert_error(await client.post("/api/start", json={"ref": "shop"}), 409, "ref_taken", field="ref")
    assert "GET /v1/endpoints?external_ref=" in err["message"]
    # Anything else starts a new anonymous session: a registered session mints no temporary tokens.
    session = session_of(client)
    other = await start(client, {"ref": "other"})
    assert other["reused"] is False
    assert session_of(client) != session
    assert (await start(client, {"ref": "shop"}))["reused"] is False  # the new session has its own refs


async def test_the_temporary_token_is_refused_on_v1(client):
    started = await start(client)
    headers = {"Authorization": f"Bearer {started['api_token']}"}
    for method, path, payload in (
        ("GET", "/v1/endpoints", None),
        ("POST", "/v1/endpoints", {"name": "more"}),
        ("GET", f"/v1/endpoints/{started['endpoint_id']}", None),
        ("GET", f"/v1/endpoints/{started['endpoint_id']}/events", None),
    ):
        err = assert_error(await client.request(method, path, json=payload, headers=headers), 403, "temporary_token")
        assert "/api/register" in err["message"]


async def test_a_temporary_principal_cannot_create_endpoints_anywhere(client, ctx, database_url):
    """The rule lives in the service layer, so the MCP tools, which accept the token, inherit it."""
    started = await start(client)
    principal = await authenticate(ctx, f"Bearer {started['api_token']}", allow_temporary=True)
    assert principal.kind == "temporary"
    with pytest.raises(ForbiddenError) as refused:
        await endpoints_service.create_endpoint(ctx, principal, EndpointCreate(name="another"))
    assert refused.value.code == "temporary_token"
    listed = await endpoints_service.list_endpoints(ctx, principal)
    assert [e.id for e in listed.endpoints] == [started["endpoint_id"]]  # its own endpoint, nothing else
    async with db(database_url) as conn:
        assert await conn.fetchval("SELECT count(*) FROM endpoints WHERE account_id = $1", principal.account_id) == 1


async def test_only_the_newest_tokens_of_a_session_stay_usable(servers, database_url, redis_prefix, ctx):
    settings = load_settings(
        {}, database_url=database_url, redis_url=servers.redis_url, redis_prefix=redis_prefix, start_rate_per_min=1000
    )
    async with AsyncTestClient(app=create_app(settings)) as client:
        tokens = [(await start(client))["api_token"] for _ in range(MAX_TOKENS + 2)]
    usable = []
    for token in tokens:
        try:
            await authenticate(ctx, f"Bearer {token}", allow_temporary=True)
        except Exception:  # noqa: BLE001 - 401 for the revoked ones
            usable.append(False)
        else:
            usable.append(True)
    assert usable == [False, False] + [True] * MAX_TOKENS


async def test_a_temporary_token_expires_with_its_lifetime(client, database_url):
    started = await start(client)
    headers = {"Authorization": f"Bearer {started['api_token']}"}
    inbox = f"/inbox/{started['endpoint_id']}"
    assert (await client.get(inbox, headers=headers)).status_code == 200
    async with db(database_url) as conn:
        await conn.execute(
            "UPDATE api_keys SET expires_at = now() - interval '1 second' WHERE key_hash = $1",
            hash_key(started["api_token"]),
        )
    err = assert_error(await client.get(inbox, headers=headers), 401, "unauthorized")
    assert "expired" in err["message"]


async def test_the_cookie_is_secure_behind_https(servers, database_url, redis_prefix):
    settings = load_settings(
        {},
        database_url=database_url,
        redis_url=servers.redis_url,
        redis_prefix=redis_prefix,
        public_control_url="https://hooks.example.com",
    )
    async with AsyncTestClient(app=create_app(settings), base_url="https://testserver.local") as client:
        resp = await client.post("/api/start")
        assert resp.status_code == 200
        assert resp.json()["inbox_url"].startswith("https://hooks.example.com/inbox/ep_")
        attributes = {part.strip().lower() for part in resp.headers["set-cookie"].split(";")[1:]}
        assert "secure" in attributes
        assert {"httponly", "samesite=lax"} <= attributes


async def test_a_cookie_that_is_not_a_session_starts_a_new_one(client):
    for value in ("", "x", "a" * 43, "%C3%A9" * 8, "a" * 400, '"quoted"'):
        client.cookies.clear()
        started = await start(client, headers={"cookie": f"hy_session={value}"})
        assert started["reused"] is False
        assert session_of(client) not in (None, value)


async def test_registration_closed_refuses_start(servers, database_url, redis_prefix):
    settings = load_settings(
        {}, database_url=database_url, redis_url=servers.redis_url, redis_prefix=redis_prefix, registration="closed"
    )
    async with AsyncTestClient(app=create_app(settings)) as client:
        err = assert_error(await client.post("/api/start"), 403, "registration_closed")
        assert "closed" in err["message"]
    async with db(database_url) as conn:
        assert await conn.fetchval("SELECT count(*) FROM accounts") == 0


BAD_BODIES = [
    ({"ref": "a\x00b"}, "ref"),
    ({"ref": "x" * 201}, "ref"),
    ({"ref": ""}, "ref"),
    ({"ref": " padded"}, "ref"),
    ({"ref": "tab\there"}, "ref"),
    ({"ref": 7}, "ref"),
    ({"provider_hint": "stripe"}, "provider_hint"),
    ({"provider_hint": "pay\x00ments"}, "provider_hint"),
    ({"provider_hint": ""}, "provider_hint"),
    ({"surprise": 1}, "surprise"),
    ({"ref": "ok", "api_token": "x"}, "api_token"),
    (["ref"], "body"),
    ("ref", "body"),
    (None, "body"),  # JSON null: only an object (or no body at all) is a request
]


@pytest.mark.parametrize(("body", "field"), BAD_BODIES)
async def test_bad_bodies_are_400_naming_the_field(client, body, field, database_url):
    raw = json.dumps(body).encode()
    resp = await client.post("/api/start", content=raw, headers={"content-type": "application/json"})
    assert_error(resp, 400, "validation_error", field=field)
    async with db(database_url) as conn:
        assert await conn.fetchval("SELECT count(*) FROM accounts") == 0


async def test_malformed_json_and_an_oversized_body_are_refused(client):
    assert_error(
        await client.post("/api/start", content=b'{"ref": ', headers={"content-type": "application/json"}),
        400,
        "validation_error",
        field="body",
    )
    huge = b'{"ref": "' + b"x" * 3_000_000 + b'"}'
    assert_error(
        await client.post("/api/start", content=huge, headers={"content-type": "application/json"}),
        413,
        "payload_too_large",
    )
