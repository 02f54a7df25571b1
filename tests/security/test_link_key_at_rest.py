"""The inbox link key at rest (issue 23, item 4): from a ``pg_dump`` alone the audit read ``instance_keys``,
signed a 12-hour page cookie for another account's endpoint with it and read (and could replay) its events.

Here the attacker does the same with every key the dumped row could stand for, and the server refuses each
cookie, while the same forging with the deployment's real key (which only ``HOOKYARD_ENCRYPTION_KEYS``
opens) would pass, and a real link still opens the page. A deployment upgraded with the key in clear has it
sealed by ``hookyard migrate`` with its links and cookies still valid; one without encryption keys keeps
working with the key in clear (as every secret is then) until ``rotate-encryption-key`` seals it.
"""

from __future__ import annotations

import os

import asyncpg
import msgspec
from litestar.testing import AsyncTestClient

from control.app import create_app
from control.db.keyring import PREFIX
from control.db.migrate import available, migrate
from control.service.inbox_links import LINK_COOKIE, _key
from tests.conftest import make_account
from tests.helpers import assert_error, create_endpoint
from tests.security.dumps import copied_rows, dump, encodings, forged_cookie, hookyard, keys_an_attacker_tries

SEALED_IN = "0015_instance_keys_sealed"


async def _opens_the_page(client, endpoint_id: str, cookie: str) -> int:
    """The status of the inbox page for a browser holding only this link cookie."""
    client.cookies.clear()
    return (await client.get(f"/inbox/{endpoint_id}", headers={"cookie": f"{LINK_COOKIE}={cookie}"})).status_code


async def _real_link_opens(client, headers: dict[str, str], endpoint_id: str, settings) -> str:
    """Makes a link as a user would, opens it, and returns the page cookie it was traded for."""
    client.cookies.clear()
    resp = await client.post(f"/v1/endpoints/{endpoint_id}/inbox-link", headers=headers)
    assert resp.status_code == 200, resp.text
    opened = await client.get(resp.json()["url"].removeprefix(settings.control_url), follow_redirects=False)
    assert opened.status_code == 303, opened.text
    cookie = opened.cookies[LINK_COOKIE]
    assert await _opens_the_page(client, endpoint_id, cookie) == 200
    return cookie


def _dumped_link_key(database_url: str) -> tuple[str, set[bytes]]:
    """The text of the whole dump, and the keys its ``instance_keys`` row could stand for."""
    text = dump(database_url)
    (row,) = copied_rows(text, "instance_keys")
    assert row["name"] == "inbox-links"
    return text, keys_an_attacker_tries(row["secret"])


async def _refuses_every_forgery(client, text: str, tried: set[bytes], endpoint_id: str, account_id: str) -> None:
    assert account_id in text  # the dump names the victim...
    assert endpoint_id in text
    for key in tried:  # ...but nothing in it signs a cookie the server takes
        cookie = forged_cookie(key, endpoint_id, account_id)
        client.cookies.clear()
        resp = await client.get(f"/inbox/{endpoint_id}", headers={"cookie": f"{LINK_COOKIE}={cookie}"})
        assert_error(resp, 401, "unauthorized")


async def test_a_link_cookie_forged_from_a_dump_is_refused_and_a_real_link_opens(
    client, account, ctx, settings, database_url
):
    victim = await create_endpoint(client, account.headers)
    await _real_link_opens(client, account.headers, victim["id"], settings)  # the link key exists from here

    text, tried = _dumped_link_key(database_url)
    await _refuses_every_forgery(client, text, tried, victim["id"], account.id)

    # The refusals are the seal's doing, not a flaw in the forging: the real key signs a cookie that opens.
    real = await _key(ctx)
    assert real not in tried
    for written in encodings(real):
        assert written not in text
    assert await _opens_the_page(client, victim["id"], forged_cookie(real, victim["id"], account.id)) == 200
    await _real_link_opens(client, account.headers, victim["id"], settings)


async def test_migrate_seals_a_clear_link_key_and_its_cookies_keep_opening(
    empty_database,
    settings,
    monkeypatch,
):
    # A deployment from before: every migration up to the one that seals, and a link key made in clear.
    monkeypatch.setattr("control.db.migrate.available", lambda: [m for m in available() if m[0] < SEALED_IN])
    await migrate(empty_database)
    monkeypatch.undo()
    old_key = os.urandom(32)
    conn = await asyncpg.connect(empty_database)
    try:
        await conn.execute("INSERT INTO instance_keys (name, secret) VALUES ('inbox-links', $1)", old_key)
    finally:
        await conn.close()
    assert old_key in _dumped_link_key(empty_database)[1]  # the audit's finding, as it was

    env = {"DATABASE_URL": empty_database, "HOOKYARD_ENCRYPTION_KEYS": ",".join(settings.encryption_keys)}
    migrated = hookyard("migrate", env=env)
    assert migrated.returncode == 0, migrated.stderr
    assert f"applied {SEALED_IN}" in migrated.stdout
    assert "1 instance_keys.secret" in migrated.stdout
    text, tried = _dumped_link_key(empty_database)
    assert old_key not in tried
    assert copied_rows(text, "instance_keys")[0]["secret"].startswith(PREFIX)

    upgraded = msgspec.structs.replace(settings, database_url=empty_database)
    account = await make_account(empty_database)
    async with AsyncTestClient(app=create_app(upgraded)) as client:
        endpoint = await create_endpoint(client, account.headers)
        # Sealing changed how the key is stored, not the key: what it signed before the upgrade still opens.
        assert await _opens_the_page(client, endpoint["id"], forged_cookie(old_key, endpoint["id"], account.id)) == 200
        await _real_link_opens(client, account.headers, endpoint["id"], upgraded)
        await _refuses_every_forgery(client, dump(empty_database), tried, endpoint["id"], account.id)


async def test_without_keys_the_link_key_stays_clear_until_a_rotation_seals_it(account, settings, database_url):
    clear = msgspec.structs.replace(settings, encryption_keys=())
    async with AsyncTestClient(app=create_app(clear)) as client:
        endpoint = await create_endpoint(client, account.headers)
        cookie = await _real_link_opens(client, account.headers, endpoint["id"], clear)
        # Unprotected, like every secret of a deployment without a key (logged at start): the dump gives the
        # key away. This is also the forging of the other tests shown to work when the key is there to take.
        _, tried = _dumped_link_key(database_url)
        forged = [
            key
            for key in tried
            if await _opens_the_page(client, endpoint["id"], forged_cookie(key, endpoint["id"], account.id)) == 200
        ]
        assert len(forged) == 1

    env = {"DATABASE_URL": database_url, "HOOKYARD_ENCRYPTION_KEYS": ",".join(settings.encryption_keys)}
    rotated = hookyard("rotate-encryption-key", env=env)
    assert rotated.returncode == 0, rotated.stderr
    assert msgspec.json.decode(rotated.stdout)["instance_keys.secret"] == 1

    text, tried = _dumped_link_key(database_url)
    assert forged[0] not in tried
    async with AsyncTestClient(app=create_app(settings)) as client:
        assert await _opens_the_page(client, endpoint["id"], cookie) == 200  # the same key, now sealed
        await _real_link_opens(client, account.headers, endpoint["id"], settings)
        await _refuses_every_forgery(client, text, tried, endpoint["id"], account.id)
