"""Secrets at rest: a real ``pg_dump`` of the database holds nothing from which a credential can be made (no
API key, temporary token or session cookie, no endpoint, provider or destination signing secret, no inbox
link or link cookie, nor the key that signs those); the edge config in Redis still carries what the edge
verifies with; ``hookyard migrate`` seals clear values left from before; ``hookyard rotate-encryption-key``
moves every value, the inbox link key included, to the first key; a value moved to another row, or sealed
with a key no longer configured, does not open. How a dump fares against a forged link cookie is
test_link_key_at_rest.py."""

from __future__ import annotations

import base64

import msgspec
import pytest

from control.app import create_app
from control.db.keyring import PREFIX, Keyring, generate_key, parse_keys
from control.service.inbox_links import LINK_COOKIE, _key
from shared.errors import ConfigError
from tests.control.test_auth_config_api import edge_config
from tests.helpers import create_endpoint, db, redis_connection, token_of  # noqa: F401 - fixtures
from tests.security.dumps import dump, encodings, hookyard

PROVIDER_SECRET = "whsec_provider-own-secret-at-rest-0123456789"


async def _inbox_cookie(client, headers: dict[str, str], endpoint_id: str, settings) -> tuple[str, str]:
    """(the link's token, the page cookie it is traded for) of a new inbox link to the endpoint."""
    resp = await client.post(f"/v1/endpoints/{endpoint_id}/inbox-link", headers=headers)
    assert resp.status_code == 200, resp.text
    url = resp.json()["url"]
    opened = await client.get(url.removeprefix(settings.control_url), follow_redirects=False)
    assert opened.status_code == 303, opened.text
    return url.split("?link=", 1)[1], opened.cookies[LINK_COOKIE]


async def test_a_database_dump_holds_no_credential(client, account, settings, database_url, redis, ctx):
    started = await client.post("/api/start")
    assert started.status_code == 200, started.text
    session = client.cookies["hy_session"]
    made = await create_endpoint(client, account.headers)
    other = await create_endpoint(client, account.headers)
    resp = await client.patch(
        f"/v1/endpoints/{made['id']}/auth-config",
        headers=account.headers,
        json={"hmac_enabled": True, "secret": PROVIDER_SECRET},
    )
    assert resp.status_code == 200, resp.text
    rotated = await client.post(f"/v1/endpoints/{other['id']}/auth-config/rotate-secret", headers=account.headers)
    assert rotated.status_code == 200, rotated.text
    destination = await client.post(
        f"/v1/endpoints/{made['id']}/destinations", headers=account.headers, json={"url": "https://example.com/in"}
    )
    assert destination.status_code == 201, destination.text
    moved = await client.post(f"/v1/destinations/{destination.json()['id']}/rotate-secret", headers=account.headers)
    assert moved.status_code == 200, moved.text
    secrets = [made["signing_secret"], other["signing_secret"], rotated.json()["signing_secret"], PROVIDER_SECRET]
    secrets += [destination.json()["signing_secret"], moved.json()["signing_secret"]]
    link, cookie = await _inbox_cookie(client, account.headers, made["id"], settings)
    secrets += [account.key, started.json()["api_token"], session, link, cookie]
    secrets += [mac for value in (link, cookie) for mac in value.rsplit(".", 1)[1:]]
    link_key = await _key(ctx)  # what signs every link and cookie: with it, anyone makes one

    text = dump(database_url)
    assert made["id"] in text  # the dump holds the rows...
    for secret in secrets:  # ...but none of the secrets, nor the key material of one
        assert secret not in text
        for prefix in ("whsec_", "hy_live_", "hy_tmp_"):
            assert secret.removeprefix(prefix) not in text
    for written in encodings(link_key):
        assert written not in text
    assert text.count(PREFIX) >= 5

    # The edge verifies with the clear secret: Redis carries it (docs/adr/0027-sealed-secrets-at-rest.md:
    # who may read Redis).
    assert (await edge_config(redis, settings, made)).auth.secret == PROVIDER_SECRET
    assert (await edge_config(redis, settings, other)).auth.secret == rotated.json()["signing_secret"]


async def test_migrate_seals_clear_values_and_rotation_moves_every_value_to_the_first_key(
    client, account, settings, database_url, redis
):
    made = await create_endpoint(client, account.headers)
    async with db(database_url) as conn:  # a row as stored before encryption existed
        await conn.execute("UPDATE endpoints SET signing_secret = $2 WHERE id = $1", made["id"], "whsec_legacyclear")
        await conn.execute(
            "UPDATE auth_configs SET secret = $2, hmac_enabled = true WHERE endpoint_id = $1",
            made["id"],
            PROVIDER_SECRET,
        )
    env = {"DATABASE_URL": database_url, "HOOKYARD_ENCRYPTION_KEYS": ",".join(settings.encryption_keys)}
    migrated = hookyard("migrate", env=env)
    assert migrated.returncode == 0, migrated.stderr
    assert "sealed 1 endpoints.signing_secret, 1 auth_configs.secret" in migrated.stdout
    text = dump(database_url)
    assert "whsec_legacyclear" not in text
    assert PROVIDER_SECRET not in text
    _, cookie = await _inbox_cookie(client, account.headers, made["id"], settings)  # the link key now exists

    new_key = generate_key("k2")
    rotated = hookyard(
        "rotate-encryption-key", env={**env, "HOOKYARD_ENCRYPTION_KEYS": ",".join((new_key, *settings.encryption_keys))}
    )
    assert rotated.returncode == 0, rotated.stderr
    counts = msgspec.json.decode(rotated.stdout)
    assert counts["endpoints.signing_secret"] >= 1
    assert counts["auth_configs.secret"] == 1
    assert counts["instance_keys.secret"] == 1
    async with db(database_url) as conn:
        stored = [r[0] for r in await conn.fetch("SELECT signing_secret FROM endpoints")]
        stored += [r[0] for r in await conn.fetch("SELECT secret FROM auth_configs WHERE secret IS NOT NULL")]
        stored += [r[0] for r in await conn.fetch("SELECT secret FROM instance_keys")]
    assert stored
    assert all(value.startswith(PREFIX + "k2:") for value in stored)
    again = hookyard("rotate-encryption-key", env={**env, "HOOKYARD_ENCRYPTION_KEYS": new_key})
    assert again.returncode == 0, again.stderr
    assert set(msgspec.json.decode(again.stdout).values()) == {0}

    # Only the new key now: control still reads every secret (the edge config is rebuilt from them).
    only_new = msgspec.structs.replace(settings, encryption_keys=(new_key,))
    from litestar.testing import AsyncTestClient

    async with AsyncTestClient(app=create_app(only_new)) as fresh:
        resp = await fresh.patch(
            f"/v1/endpoints/{made['id']}/auth-config", headers=account.headers, json={"tolerance_seconds": 60}
        )
        assert resp.status_code == 200, resp.text
        # The link key is the same key under a new seal: a cookie issued before the rotation still opens.
        page = await fresh.get(f"/inbox/{made['id']}", headers={"cookie": f"{LINK_COOKIE}={cookie}"})
        assert page.status_code == 200, page.text
    assert (await edge_config(redis, settings, made)).auth.secret == PROVIDER_SECRET

    # The old key alone cannot open what the new one sealed, and says which key is missing.
    stale = hookyard("rotate-encryption-key", env={**env, "HOOKYARD_ENCRYPTION_KEYS": settings.encryption_keys[0]})
    assert stale.returncode == 2
    assert "'k2'" in stale.stderr
    assert "is not configured" in stale.stderr


def test_a_sealed_value_opens_only_in_its_own_row_and_column():
    ring = Keyring((generate_key("a"),))
    sealed = ring.seal("whsec_x", "endpoints.signing_secret", "ep_1")
    assert ring.open(sealed, "endpoints.signing_secret", "ep_1") == "whsec_x"
    for purpose, row in (("endpoints.signing_secret", "ep_2"), ("auth_configs.secret", "ep_1")):
        with pytest.raises(ConfigError, match="does not open"):
            ring.open(sealed, purpose, row)
    assert ring.seal("whsec_x", "p", "r") != ring.seal("whsec_x", "p", "r")  # a fresh nonce each time
    assert Keyring(()).seal("clear", "p", "r") == "clear"
    assert ring.open("clear", "p", "r") == "clear"


def test_a_malformed_key_stops_the_process_without_echoing_it(tmp_path):
    short = base64.b64encode(b"too-short-key").decode()
    with pytest.raises(ValueError, match="32 bytes") as info:
        parse_keys((f"k1:{short}",))
    assert short not in str(info.value)
    with pytest.raises(ValueError, match="listed twice"):
        parse_keys((generate_key("k1"), generate_key("k1")))
    bad = {"DATABASE_URL": "postgresql://x@127.0.0.1:1/x", "HOOKYARD_ENCRYPTION_KEYS": "nokid"}
    done = hookyard("migrate", env=bad)
    assert done.returncode == 2
    assert "HOOKYARD_ENCRYPTION_KEYS" in done.stderr


def test_up_keeps_its_key_in_the_data_dir(tmp_path):
    from control.db.keyring import data_dir_keys

    assert data_dir_keys(tmp_path, create=False) == ()
    made = data_dir_keys(tmp_path, create=True)
    assert len(parse_keys(made)) == 1
    assert data_dir_keys(tmp_path, create=True) == made  # kept, never replaced
    assert (tmp_path / "encryption_keys").stat().st_mode & 0o777 == 0o600
