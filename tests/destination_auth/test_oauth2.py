"""OAuth2 client credentials against a real token endpoint that counts its calls and a destination that refuses
tokens the endpoint no longer honours: one fetch for many deliveries, a new one after expiry (the worker's
clock moved, no sleep) and once after a 401, each fetch in the delivery record without the token; and a token
endpoint on the same HTTP/1.0 server as the destination (Python's ``http.server``)."""

from __future__ import annotations

import base64
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from control.db.context import Context
from tests.destination import Destination, deliveries_of, make_task, running, serving, settled
from tests.destination_auth.support import TokenEndpoint
from tests.helpers import create_endpoint

CLIENT_SECRET = "cl13nt-s3cret-never-shown"


@pytest.fixture
def token_server() -> Iterator[Destination]:
    with serving() as server:
        yield server


@pytest.fixture
def tokens(token_server: Destination) -> TokenEndpoint:
    return TokenEndpoint(token_server, client_id="hookyard", client_secret=CLIENT_SECRET)


async def _oauth2_destination(
    client: Any, account: Any, url: str, tokens: TokenEndpoint, **auth: Any
) -> tuple[str, dict[str, Any]]:
    endpoint = (await create_endpoint(client, account.headers))["id"]
    config = {
        "type": "oauth2_client_credentials",
        "token_url": tokens.url,
        "client_id": tokens.client_id,
        "client_secret": tokens.client_secret,
        **auth,
    }
    resp = await client.post(
        f"/v1/endpoints/{endpoint}/destinations", json={"url": url, "auth": config}, headers=account.headers
    )
    assert resp.status_code == 201, resp.text
    return endpoint, resp.json()


async def test_one_token_serves_many_deliveries_and_each_fetch_is_recorded(
    ctx: Context, client: Any, account: Any, destination: Destination, tokens: TokenEndpoint
) -> None:
    tokens.protect(destination)
    endpoint, created = await _oauth2_destination(
        client, account, destination.url, tokens, scope="hooks:write", audience="https://api.example"
    )
    assert created["auth"] == {
        "type": "oauth2_client_credentials",
        "token_url": tokens.url,
        "client_id": "hookyard",
        "scope": "hooks:write",
        "audience": "https://api.example",
        "client_auth": "basic",
    }
    made = [await make_task(ctx, destination.url, endpoint_id=endpoint, destination_id=created["id"]) for _ in range(8)]
    async with running(ctx):
        for one in made:
            await settled(ctx, one["task"], "succeeded")
    assert tokens.calls == 1
    assert tokens.forms[0] == {
        "grant_type": ["client_credentials"],
        "scope": ["hooks:write"],
        "audience": ["https://api.example"],
    }
    (token,) = tokens.issued
    assert {r.headers["authorization"] for r in destination.requests} == {f"Bearer {token}"}
    records = [r for one in made for r in await deliveries_of(ctx, one["event"])]
    fetched = [r["auth"] for r in records if r["auth"]["token_fetches"]]
    assert len(fetched) == 1
    (fetch,) = fetched[0]["token_fetches"]
    assert fetch["reason"] == "no token cached"
    assert fetch["status"] == 200
    assert fetch["expires_in"] == 3600
    assert type(fetch["expires_in"]) is int  # as the token endpoint wrote it, not 3600.0
    for record in records:
        assert record["request_headers"]["authorization"] == "Bearer [redacted]"
        assert token not in str(dict(record))
        assert CLIENT_SECRET not in str(dict(record))
    event = (await client.get(f"/v1/events/{made[0]['event']}", headers=account.headers)).json()
    (shown,) = event["deliveries"]
    assert shown["request_headers"]["authorization"] == "Bearer [redacted]"
    assert token not in str(event)
    assert shown["auth"]["type"] == "oauth2_client_credentials"


async def test_a_401_fetches_a_new_token_once_and_sends_again(
    ctx: Context, client: Any, account: Any, destination: Destination, tokens: TokenEndpoint
) -> None:
    tokens.protect(destination)
    endpoint, created = await _oauth2_destination(client, account, destination.url, tokens, client_auth="body")
    first = await make_task(ctx, destination.url, endpoint_id=endpoint, destination_id=created["id"])
    async with running(ctx):
        await settled(ctx, first["task"], "succeeded")
        tokens.revoke()  # the server no longer honours the cached token: stale
        second = await make_task(ctx, destination.url, endpoint_id=endpoint, destination_id=created["id"])
        await settled(ctx, second["task"], "succeeded")
    assert tokens.calls == 2
    assert tokens.refused == 1
    assert tokens.forms[1]["client_secret"] == [CLIENT_SECRET]  # client_auth: body
    (record,) = await deliveries_of(ctx, second["event"])
    assert record["attempt_number"] == 1
    assert record["response_status"] == 200
    assert record["auth"]["retried_after_401"] is True
    assert [f["reason"] for f in record["auth"]["token_fetches"]] == ["the destination answered 401"]


async def test_an_expired_token_is_fetched_again(
    ctx: Context, client: Any, account: Any, destination: Destination, tokens: TokenEndpoint
) -> None:
    tokens.protect(destination)
    endpoint, created = await _oauth2_destination(client, account, destination.url, tokens)
    first = await make_task(ctx, destination.url, endpoint_id=endpoint, destination_id=created["id"])
    async with running(ctx) as deliver:
        await settled(ctx, first["task"], "succeeded")
        cache = deliver.attempts.authenticator.tokens
        later = cache.now() + 3600
        cache.now = lambda: later  # the token's lifetime has passed on the worker's clock
        second = await make_task(ctx, destination.url, endpoint_id=endpoint, destination_id=created["id"])
        await settled(ctx, second["task"], "succeeded")
    assert tokens.calls == 2
    assert tokens.refused == 0
    (record,) = await deliveries_of(ctx, second["event"])
    assert [f["reason"] for f in record["auth"]["token_fetches"]] == ["token expired"]


async def test_a_refusing_token_endpoint_fails_the_attempt_and_sends_nothing(
    ctx: Context, client: Any, account: Any, destination: Destination, tokens: TokenEndpoint
) -> None:
    endpoint, created = await _oauth2_destination(client, account, destination.url, tokens)
    tokens.client_secret = "rotated-on-the-server"
    made = await make_task(ctx, destination.url, endpoint_id=endpoint, destination_id=created["id"])
    async with running(ctx):
        row = await settled(ctx, made["task"], "failed")
    assert destination.requests == []
    assert "invalid_client: who are you" in row["last_error"]
    records = await deliveries_of(ctx, made["event"])
    assert records
    assert all(r["request_headers"] is None for r in records)
    basic = tokens.server.requests[0].headers["authorization"]
    assert base64.b64decode(basic.removeprefix("Basic ")).decode() == f"hookyard:{CLIENT_SECRET}"


class _Http10(BaseHTTPRequestHandler):
    """Token endpoint (``/oauth/token``) and destination (``/hook``) on one plain ``http.server``: HTTP/1.0,
    Content-Length, no Connection header, so it closes every connection after its answer."""

    token = "tok_http10"
    seen: list[tuple[str, str]]

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", "0")))
        self.seen.append((self.path, self.headers.get("authorization", "")))
        if self.path == "/oauth/token":
            status, body = 200, b'{"access_token":"%b","token_type":"Bearer","expires_in":3600}' % self.token.encode()
        elif self.headers.get("authorization") == f"Bearer {self.token}":
            status, body = 200, b'{"received":true}'
        else:
            status, body = 401, b'{"error":"unauthorized"}'
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


async def test_a_token_from_an_http10_server_does_not_leave_its_closed_connection_for_the_send(
    ctx: Context, client: Any, account: Any
) -> None:
    # The token fetch and the send go to one host:port: a connection the HTTP/1.0 server closed after the token
    # went back to the pool, and the send right after it found it dead (the first attempt failed).
    handler = type("Handler", (_Http10,), {"seen": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}"
        endpoint = (await create_endpoint(client, account.headers))["id"]
        auth = {"type": "oauth2_client_credentials", "token_url": f"{base}/oauth/token", "client_id": "hookyard"}
        resp = await client.post(
            f"/v1/endpoints/{endpoint}/destinations",
            json={"url": f"{base}/hook", "auth": auth | {"client_secret": CLIENT_SECRET}},
            headers=account.headers,
        )
        assert resp.status_code == 201, resp.text
        made = await make_task(ctx, f"{base}/hook", endpoint_id=endpoint, destination_id=resp.json()["id"])
        async with running(ctx):
            row = await settled(ctx, made["task"], "succeeded")
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)
    assert row["attempts"] == 1, row["last_error"]
    (record,) = await deliveries_of(ctx, made["event"])
    assert (record["attempt_number"], record["response_status"]) == (1, 200)
    assert [path for path, _ in handler.seen] == ["/oauth/token", "/hook"]
    assert handler.seen[1][1] == f"Bearer {_Http10.token}"
