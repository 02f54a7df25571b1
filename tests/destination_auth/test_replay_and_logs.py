"""Replays to a destination use its authentication, replays to a bare URL never do; the destination test
authenticates too. And no secret shows anywhere: every log record of an authenticated delivery, a replay and
the API calls around them (captured at DEBUG), every answer and every stored record is searched for each."""

from __future__ import annotations

import base64
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from control.db.context import Context
from tests.destination import Destination, deliveries_of, make_task, running, serving, settled
from tests.destination_auth.support import Pki, TokenEndpoint, requiring
from tests.helpers import create_endpoint

PASSWORD = "hunter2-basic-password-3d1f"
CLIENT_SECRET = "oauth-client-secret-9a7c"


@pytest.fixture
def token_server() -> Iterator[Destination]:
    with serving() as server:
        yield server


async def test_a_replay_to_the_destination_authenticates_and_to_its_bare_url_does_not(
    ctx: Context, client: Any, account: Any, destination: Destination
) -> None:
    expected = "Basic " + base64.b64encode(f"replayer:{PASSWORD}".encode()).decode()
    requiring(destination, "authorization", expected)
    endpoint = (await create_endpoint(client, account.headers))["id"]
    created = (
        await client.post(
            f"/v1/endpoints/{endpoint}/destinations",
            json={"url": destination.url, "auth": {"type": "basic", "username": "replayer", "password": PASSWORD}},
            headers=account.headers,
        )
    ).json()
    made = await make_task(ctx, destination.url, endpoint_id=endpoint, destination_id=created["id"])
    replay = f"/v1/events/{made['event']}/replay"
    to_destination = await client.post(replay, json={"destination_id": created["id"]}, headers=account.headers)
    assert to_destination.status_code == 200, to_destination.text
    assert to_destination.json()["status"] == 200
    assert to_destination.json()["sent_headers"]["authorization"] == "Basic [redacted]"
    to_url = await client.post(replay, json={"url": destination.url}, headers=account.headers)
    assert to_url.json()["status"] == 401
    assert "authorization" not in destination.requests[-1].headers
    elsewhere = await client.post(
        replay, json={"destination_id": created["id"], "url": "http://127.0.0.1:9/other"}, headers=account.headers
    )
    assert elsewhere.status_code == 400
    assert elsewhere.json()["error"]["message"].startswith("url:")
    tested = await client.post(f"/v1/destinations/{created['id']}/test", headers=account.headers)
    assert tested.json()["status"] == 200


async def test_no_secret_in_logs_answers_or_records(
    ctx: Context,
    client: Any,
    account: Any,
    destination: Destination,
    token_server: Destination,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    tokens = TokenEndpoint(token_server, client_id="hookyard", client_secret=CLIENT_SECRET)
    tokens.protect(destination)
    pki = Pki()
    certificate, key = pki.issue("logged-client")
    key_body = key.splitlines()[1]
    endpoint = (await create_endpoint(client, account.headers))["id"]
    oauth = {
        "type": "oauth2_client_credentials",
        "token_url": tokens.url,
        "client_id": "hookyard",
        "client_secret": CLIENT_SECRET,
    }
    answers = []
    created = await client.post(
        f"/v1/endpoints/{endpoint}/destinations", json={"url": destination.url, "auth": oauth}, headers=account.headers
    )
    answers.append(created.text)
    basic_url = destination.url.replace("http://", f"http://someone:{PASSWORD}@")
    answers.append(
        (
            await client.post(
                f"/v1/endpoints/{endpoint}/destinations", json={"url": basic_url}, headers=account.headers
            )
        ).text
    )
    mtls = await client.post(
        f"/v1/endpoints/{endpoint}/destinations",
        json={"url": "https://127.0.0.1:9/x", "auth": {"type": "mtls", "certificate": certificate, "private_key": key}},
        headers=account.headers,
    )
    answers.append(mtls.text)
    destination_id = created.json()["id"]
    made = await make_task(ctx, destination.url, endpoint_id=endpoint, destination_id=destination_id)
    async with running(ctx):
        await settled(ctx, made["task"], "succeeded")
    tokens.revoke()
    replayed = await client.post(
        f"/v1/events/{made['event']}/replay", json={"destination_id": destination_id}, headers=account.headers
    )
    answers.append(replayed.text)
    assert replayed.json()["status"] == 200
    for path in (
        f"/v1/destinations/{destination_id}",
        f"/v1/endpoints/{endpoint}/destinations",
        f"/v1/events/{made['event']}",
        f"/v1/endpoints/{endpoint}/deliveries",
    ):
        answers.append((await client.get(path, headers=account.headers)).text)
    records = [str(dict(r)) for r in await deliveries_of(ctx, made["event"])]
    async with ctx.pool.acquire() as conn:
        stored = [str(dict(r)) for r in await conn.fetch("SELECT * FROM destinations WHERE endpoint_id = $1", endpoint)]
    logged = "\n".join(f"{r.getMessage()} {r.args!r} {r.__dict__!r}" for r in caplog.records)
    assert len(caplog.records) > 0
    issued = tokens.issued
    assert len(issued) == 2  # the worker's and the replay's (each process keeps its own tokens)
    for secret in (PASSWORD, CLIENT_SECRET, key_body, *issued):
        assert secret not in logged
        for text in (*answers, *records, *stored):
            assert secret not in text
