"""The ingest handler in process, against the test Redis: what the sender gets when Redis fails, when
something unexpected raises, when the body did not arrive, when a signature header is repeated, and what
path and query are recorded. The server side of ASGI (``receive``/``send``) is played by the test where a
server's failure is the point; everything of ours is the real thing.

The same behaviours through a real granian process are in ``test_edge_e2e.py``.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import pytest
import redis.asyncio as aioredis
import standardwebhooks
import stripe

from edge.app import create_app
from shared import redis_client
from shared.ids import ingest_token, new_id, signing_secret
from shared.keys import CONFIGS_COMPLETE, Keys
from shared.settings import Settings, load_settings
from shared.wire import EdgeAuth, EdgeEndpoint, IngestRecord, decode_records, encode
from tests.edge.support import http, started_edge
from tests.helpers import (
    assert_error,
    redis_connection,  # noqa: F401 - the `redis` fixture
)
from tests.redis_relay import RedisRelay

BODY = b'{"id":"evt_1","type":"invoice.paid"}'


async def put_endpoint(redis: aioredis.Redis, settings: Settings, **auth: Any) -> str:
    """A token the edge serves: its config written where control writes it, in control's wire format."""
    token = ingest_token()
    config = EdgeEndpoint(
        endpoint_id=new_id("ep"), account_id=new_id("acct"), environment="production", auth=EdgeAuth(**auth)
    )
    keys = Keys(settings.redis_prefix)
    await redis.set(keys.endpoint_config(token), encode(config))
    await redis.set(keys.config_marker, CONFIGS_COMPLETE)  # and, as a sweep would, every config written
    return token


async def stored(redis: aioredis.Redis, settings: Settings) -> list[IngestRecord]:
    """Every record in the ingest stream (nothing consumes it in these tests)."""
    entries = await redis.xrange(Keys(settings.redis_prefix).ingest_stream(0))
    return [record for _, fields in entries for record in decode_records(fields[b"r"])]


def scope(raw_path: bytes, *, method: str = "POST", headers: list[tuple[bytes, bytes]] | None = None) -> dict:
    path, _, query = raw_path.partition(b"?")
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path.decode("latin-1"),
        "raw_path": path,
        "query_string": query,
        "root_path": "",
        "headers": headers if headers is not None else [(b"host", b"edge.test")],
        "client": ("127.0.0.1", 40000),
        "server": ("127.0.0.1", 8080),
    }


class Server:
    """The server's half of one ASGI exchange: hands out ``messages`` and records what the app sends;
    ``failing_sends`` of the app's sends raise, as a server's send does when its connection breaks."""

    def __init__(self, messages: list[dict] | None = None, *, failing_sends: int = 0) -> None:
        self.messages = list(messages or [{"type": "http.request", "body": BODY, "more_body": False}])
        self.sent: list[dict] = []
        self.failing_sends = failing_sends

    async def receive(self) -> dict:
        if not self.messages:
            await asyncio.Event().wait()  # a real server blocks until something happens
        return self.messages.pop(0)

    async def send(self, message: dict) -> None:
        if self.failing_sends:
            self.failing_sends -= 1
            raise OSError("connection reset by peer")
        self.sent.append(message)

    async def call(self, app: Callable[..., Awaitable[None]], asgi_scope: dict) -> None:
        await asyncio.wait_for(app(asgi_scope, self.receive, self.send), 10)

    @property
    def status(self) -> int:
        (start,) = [m for m in self.sent if m["type"] == "http.response.start"]
        return start["status"]

    @property
    def json(self) -> Any:
        return json.loads(b"".join(m.get("body", b"") for m in self.sent if m["type"] == "http.response.body"))


# -- Redis failures are 503 unavailable, never an unhandled exception -----------------------------------


async def test_redis_going_away_is_503_unavailable_with_retry_after(servers, redis_prefix, redis, caplog) -> None:
    caplog.set_level(logging.WARNING, logger="hookyard.edge")
    relay = RedisRelay(servers.redis_url)
    settings = load_settings({}, redis_url=await relay.start(), redis_prefix=redis_prefix)
    cached = await put_endpoint(redis, settings)
    fresh = await put_endpoint(redis, settings)
    try:
        async with started_edge(settings) as app, http(app) as client:
            assert (await client.post(f"/h/{cached}", content=BODY)).status_code == 200
            await relay.cut()
            # A token never looked up (the config lookup fails), one served a moment ago (the lookup or the
            # stream write fails), an unknown one: each is refused with a retry, none stored, none a 500.
            for token in (fresh, cached, "NoSuchToken0000000000000"):
                for _ in range(3):
                    resp = await asyncio.wait_for(client.post(f"/h/{token}", content=BODY), 10)
                    assert_error(resp, 503, "unavailable")
                    assert resp.headers["retry-after"].isdigit()
            assert_error(await client.get("/healthz"), 503, "unavailable")
    finally:
        await relay.cut()
    assert len(await stored(redis, settings)) == 1
    # logged once for the outage, not once per refused request
    assert len([r for r in caplog.records if "config lookup failed" in r.getMessage()]) == 1


async def test_the_edge_client_waits_for_a_free_connection(edge_settings) -> None:
    """More commands in flight than connections: they queue instead of failing (redis-py's default pool
    raises MaxConnectionsError the moment it is exhausted)."""
    client = redis_client.connect(edge_settings.redis_url, max_connections=3)
    try:
        replies = await asyncio.gather(*(client.get(f"{edge_settings.redis_prefix}nothing:{i}") for i in range(300)))
        assert replies == [None] * 300
        assert isinstance(client.connection_pool, aioredis.BlockingConnectionPool)
        assert len(client.connection_pool._in_use_connections) + len(client.connection_pool._available_connections) <= 3
    finally:
        await client.aclose()


# -- no code path answers a bare 500 --------------------------------------------------------------------


def assert_internal_error(server: Server) -> None:
    assert server.status == 500
    assert server.json["error"]["code"] == "internal_error"
    assert server.json["error"]["message"]


def logged_tracebacks(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "hookyard.edge" and r.levelno == logging.ERROR and r.exc_info]


async def test_a_send_that_fails_is_answered_500_in_the_envelope(edge_app, redis, edge_settings, caplog) -> None:
    token = await put_endpoint(redis, edge_settings)
    server = Server(failing_sends=1)  # the 200 cannot be started: the server's send raises
    await server.call(edge_app, scope(b"/h/" + token.encode()))
    assert_internal_error(server)
    (record,) = logged_tracebacks(caplog)
    assert record.exc_info is not None
    assert isinstance(record.exc_info[1], OSError)


async def test_a_receive_that_fails_is_500_and_nothing_is_stored(edge_app, redis, edge_settings, caplog) -> None:
    token = await put_endpoint(redis, edge_settings)

    async def broken_receive() -> dict:
        raise OSError("connection reset by peer")

    server = Server()
    await asyncio.wait_for(edge_app(scope(b"/h/" + token.encode()), broken_receive, server.send), 10)
    assert_internal_error(server)
    assert len(logged_tracebacks(caplog)) == 1
    assert await stored(redis, edge_settings) == []


async def test_a_server_that_cannot_send_anything_gets_no_exception(edge_app, redis, edge_settings, caplog) -> None:
    token = await put_endpoint(redis, edge_settings)
    server = Server(failing_sends=10)
    await server.call(edge_app, scope(b"/h/" + token.encode()))  # returns: nothing escapes to the server
    assert server.sent == []
    assert len(logged_tracebacks(caplog)) == 1


@pytest.mark.parametrize("path", [b"/healthz", b"/nope"])
async def test_health_and_404_answer_500_when_their_send_fails(edge_app, path, caplog) -> None:
    server = Server(failing_sends=1)
    await server.call(edge_app, scope(path, method="GET"))
    assert_internal_error(server)
    assert len(logged_tracebacks(caplog)) == 1


async def test_a_scope_without_a_method_is_500_not_an_exception(edge_app, caplog) -> None:
    broken = scope(b"/nope")
    del broken["method"]
    server = Server()
    await server.call(edge_app, broken)
    assert_internal_error(server)


async def test_a_request_before_startup_is_500_in_the_envelope(edge_settings, caplog) -> None:
    app = create_app(edge_settings)  # no lifespan ran: there is no ingest handler yet
    async with http(app) as client:
        resp = await client.post("/h/AnyTokenAnyToken00000000", content=BODY)
    assert_error(resp, 500, "internal_error")
    assert len(logged_tracebacks(caplog)) == 1


# -- bodies that did not arrive -------------------------------------------------------------------------

DISCONNECT = {"type": "http.disconnect"}


def part(body: bytes, more: bool) -> dict:
    return {"type": "http.request", "body": body, "more_body": more}


@pytest.mark.parametrize(
    ("headers", "messages"),
    [
        pytest.param([(b"content-length", b"100")], [DISCONNECT], id="disconnect-first"),
        pytest.param([(b"content-length", b"100")], [part(b"abc", True), DISCONNECT], id="disconnect-mid-body"),
        pytest.param([(b"content-length", b"100")], [part(b"abc", False)], id="short-body"),
        pytest.param([(b"content-length", b"100")], [part(b"abc", True), part(b"", False)], id="short-in-parts"),
        pytest.param([(b"content-length", b"2")], [part(b"abc", False)], id="long-body"),
        pytest.param([(b"transfer-encoding", b"chunked")], [DISCONNECT], id="chunked-disconnect-first"),
        pytest.param([(b"transfer-encoding", b"chunked")], [part(b"ab", True), DISCONNECT], id="chunked-cut"),
    ],
)
async def test_a_body_that_did_not_arrive_is_400_body_incomplete(
    edge_app, redis, edge_settings, headers, messages
) -> None:
    token = await put_endpoint(redis, edge_settings)
    server = Server(messages)
    await server.call(edge_app, scope(b"/h/" + token.encode(), headers=[(b"host", b"x"), *headers]))
    assert server.status == 400
    assert server.json["error"]["code"] == "body_incomplete"
    assert server.json["error"]["message"].startswith("body:")
    assert await stored(redis, edge_settings) == []


@pytest.mark.parametrize(
    ("headers", "messages", "body"),
    [
        pytest.param([(b"content-length", b"0")], [DISCONNECT], b"", id="declared-empty-then-gone"),
        pytest.param([], [DISCONNECT], b"", id="no-body-then-gone"),
        pytest.param([], [part(b"", False)], b"", id="no-body"),
        pytest.param(
            [(b"transfer-encoding", b"chunked")], [part(b"ab", True), part(b"c", False)], b"abc", id="chunked"
        ),
        pytest.param([(b"content-length", b"3")], [part(b"a", True), part(b"bc", True), part(b"", False)], b"abc"),
    ],
)
async def test_a_complete_body_is_stored(edge_app, redis, edge_settings, headers, messages, body) -> None:
    token = await put_endpoint(redis, edge_settings)
    server = Server(messages)
    await server.call(edge_app, scope(b"/h/" + token.encode(), headers=[(b"host", b"x"), *headers]))
    assert server.status == 200
    (record,) = await stored(redis, edge_settings)
    assert record.body == body


async def test_a_content_length_of_thousands_of_digits_is_read(edge_app, redis, edge_settings) -> None:
    token = await put_endpoint(redis, edge_settings)
    for declared, status in ((b"0" * 5000 + b"3", 200), (b"0" * 10 + b"9" * 5000, 413)):
        server = Server([part(b"abc", False)])
        await server.call(edge_app, scope(b"/h/" + token.encode(), headers=[(b"content-length", declared)]))
        assert server.status == status
    (record,) = await stored(redis, edge_settings)
    assert record.body == b"abc"


# -- path and query as sent -----------------------------------------------------------------------------


async def test_path_and_query_are_recorded_as_sent(edge_client, redis, edge_settings) -> None:
    token = await put_endpoint(redis, edge_settings)
    resp = await edge_client.post(f"/h/{token}/a%FFb%e9%00/%2F/x?x=%00&y=%C3%A9&z=é&flag", content=BODY)
    assert resp.status_code == 200, resp.text
    (record,) = await stored(redis, edge_settings)
    assert record.path == "a%FFb%e9%00/%2F/x"
    assert record.query == "x=%00&y=%C3%A9&z=%C3%A9&flag"


async def test_bytes_outside_printable_ascii_are_percent_encoded(edge_app, redis, edge_settings) -> None:
    token = await put_endpoint(redis, edge_settings)
    server = Server()
    raw = b"/h/" + token.encode() + b"/t\xc3\xa9\x00\x7f%41 b?q=\xff\x01"
    await server.call(edge_app, scope(raw))
    assert server.status == 200
    (record,) = await stored(redis, edge_settings)
    assert record.path == "t%C3%A9%00%7F%41 b"
    assert record.query == "q=%FF%01"


async def test_a_token_is_matched_as_sent(edge_client, redis, edge_settings) -> None:
    token = await put_endpoint(redis, edge_settings)
    # the token percent-encoded, or with a raw UTF-8 byte, names no endpoint: 404, never decoded into one
    encoded = "".join(f"%{ord(c):02X}" for c in token)
    assert_error(await edge_client.post(f"/h/{encoded}", content=BODY), 404, "endpoint_not_found")
    assert_error(await edge_client.post(f"/h/{token}é", content=BODY), 404, "endpoint_not_found")
    assert (await edge_client.post(f"/h/{token}/", content=BODY)).status_code == 200


async def test_a_token_not_found_is_503_until_every_config_is_written(edge_client, redis, edge_settings) -> None:
    """After Redis lost its data (no marker) or while a sweep rebuilds (its token), a token with no config may
    be one Redis lost: 503 with Retry-After, so the sender retries, where a 404 would be final to many."""
    keys = Keys(edge_settings.redis_prefix)
    missing = f"/h/{ingest_token()}"
    for marker in (None, b"rebuilding:0f3c", b"1"):  # b"1": what the sweep wrote before it told the two apart
        if marker is not None:
            await redis.set(keys.config_marker, marker)
        resp = await edge_client.post(missing, content=BODY)
        assert resp.headers["retry-after"] == "2", marker
        assert_error(resp, 503, "unavailable")
        assert "being restored" in resp.json()["error"]["message"]
    await redis.set(keys.config_marker, CONFIGS_COMPLETE)
    assert_error(await edge_client.post(missing, content=BODY), 404, "endpoint_not_found")
    assert await stored(redis, edge_settings) == []


# -- repeated signature headers -------------------------------------------------------------------------


def stripe_header(secret: str) -> tuple[bytes, bytes]:
    value = stripe.WebhookSignature.generate_signature_header(BODY.decode(), secret)
    return (b"stripe-signature", value.encode())


@pytest.mark.parametrize("on_failure", ["accept_log", "reject"])
async def test_a_second_copy_of_a_signature_header_fails_verification(
    edge_client, redis, edge_settings, on_failure
) -> None:
    secret = "whsec_test_secret_of_some_length"
    token = await put_endpoint(redis, edge_settings, hmac_enabled=True, secret=secret, on_failure=on_failure)
    signed = stripe_header(secret)
    resp = await edge_client.post(f"/h/{token}", content=BODY, headers=[signed])
    assert resp.status_code == 200, resp.text
    for second in (signed, stripe_header(secret), (b"stripe-signature", b"t=1,v1=00")):
        resp = await edge_client.post(f"/h/{token}", content=BODY, headers=[signed, (b"x-other", b"1"), second])
        if on_failure == "reject":
            error = assert_error(resp, 401, "signature_invalid")
            assert "malformed_header" in error["message"]
        else:
            assert resp.status_code == 200, resp.text
    records = await stored(redis, edge_settings)
    assert records[0].signature_valid is True
    if on_failure == "accept_log":
        assert len(records) == 4
        for record in records[1:]:
            assert (record.signature_valid, record.signature_failure_reason) == (False, "malformed_header")
            assert [name for name, _ in record.headers].count(b"stripe-signature") == 2
    else:
        assert len(records) == 1


async def test_a_second_copy_of_a_webhook_id_fails_verification(edge_client, redis, edge_settings) -> None:
    secret = signing_secret()
    token = await put_endpoint(redis, edge_settings, hmac_enabled=True, secret=secret, on_failure="accept_log")
    wh = standardwebhooks.Webhook(secret)
    now = datetime.now(UTC)
    headers = [
        (b"webhook-id", b"msg_1"),
        (b"webhook-timestamp", str(int(now.timestamp())).encode()),
        (b"webhook-signature", wh.sign("msg_1", now, BODY.decode()).encode()),
    ]
    assert (await edge_client.post(f"/h/{token}", content=BODY, headers=headers)).status_code == 200
    assert (
        await edge_client.post(f"/h/{token}", content=BODY, headers=[*headers, (b"x-a", b"1"), (b"x-a", b"2")])
    ).status_code == 200
    assert (await edge_client.post(f"/h/{token}", content=BODY, headers=[*headers, headers[0]])).status_code == 200
    verdicts = [(r.signature_valid, r.signature_failure_reason) for r in await stored(redis, edge_settings)]
    assert verdicts == [(True, None), (True, None), (False, "malformed_header")]
