"""The edge as providers meet it: a real granian process (``hookyard edge``), raw sockets where the point is
what arrives on the wire, the real flush worker into Postgres. Bodies that did not arrive are refused and
stored nowhere; the raw path is stored verbatim; a cold edge serves a burst without a single 500."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from typing import Any

import pytest
import redis.asyncio as aioredis

from shared.ids import ingest_token, new_id
from shared.keys import Keys
from shared.settings import Settings
from shared.wire import EdgeEndpoint, IngestRecord, decode_records, encode
from tests.conftest import Account
from tests.helpers import configs_whole, create_endpoint, db, redis_connection, token_of  # noqa: F401 - `redis` fixture
from tests.stack import Stack

pytestmark = pytest.mark.slow

BODY = b'{"type":"invoice.paid","id":"evt_1"}'


class Response:
    def __init__(self, raw: bytes) -> None:
        self.raw = raw
        head, _, self.body = raw.partition(b"\r\n\r\n")
        self.status = int(head.split(b" ", 2)[1]) if raw else None

    def json(self) -> Any:
        return json.loads(self.body)


def content_length(head: bytes) -> int | None:
    lines = head.lower().split(b"\r\n")
    return next((int(line[15:]) for line in lines if line.startswith(b"content-length:")), None)


def exchange(port: int, request: bytes, *, half_close: bool = False, timeout_s: float = 10) -> Response:
    """One request on its own connection, read until the edge closes it (or the response is complete)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as sock:
        sock.sendall(request)
        if half_close:
            sock.shutdown(socket.SHUT_WR)
        data = b""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                chunk = sock.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            data += chunk
            head, sep, body = data.partition(b"\r\n\r\n")
            length = content_length(head)
            if sep and length is not None and len(body) >= length:
                break
        return Response(data)


def post(path: bytes, headers: bytes, body: bytes) -> bytes:
    return b"POST " + path + b" HTTP/1.1\r\nhost: edge\r\n" + headers + b"\r\n" + body


async def stream_records(redis: aioredis.Redis, settings: Settings) -> list[IngestRecord]:
    entries = await redis.xrange(Keys(settings.redis_prefix).ingest_stream(0))
    return [record for _, fields in entries for record in decode_records(fields[b"r"])]


async def stored_events(settings: Settings, endpoint_id: str, want: int, timeout_s: float = 20) -> list[Any]:
    """The endpoint's rows in Postgres once at least ``want`` are there (or the deadline passed)."""
    deadline = time.monotonic() + timeout_s
    async with db(settings.database_url) as conn:
        while True:
            rows = await conn.fetch(
                "SELECT id, path, query, body FROM events WHERE endpoint_id = $1 ORDER BY id", endpoint_id
            )
            if len(rows) >= want or time.monotonic() > deadline:
                return rows
            await asyncio.sleep(0.05)


@pytest.fixture
async def endpoint(client: Any, account: Account) -> dict[str, Any]:
    """Created through the control plane (in process), before the edge starts."""
    return await create_endpoint(client, account.headers)


async def test_bodies_that_did_not_arrive_are_refused_and_stored_nowhere(
    stack: Stack, settings: Settings, endpoint: dict[str, Any], redis: aioredis.Redis
) -> None:
    stack.start_edge()
    path = b"/h/" + token_of(endpoint["ingest_url"]).encode()
    port = stack.edge_port
    refused = {
        "half-closed after 3 of 100 bytes": (post(path, b"content-length: 100\r\n", b"abc"), True),
        "half-closed before any byte": (post(path, b"content-length: 100\r\n", b""), True),
        "chunk size not hex": (post(path, b"transfer-encoding: chunked\r\n", b"zz\r\nabc\r\n0\r\n\r\n"), False),
        "chunk size overflowing": (
            post(path, b"transfer-encoding: chunked\r\n", b"ffffffffffffffffffff\r\nabc\r\n0\r\n\r\n"),
            False,
        ),
        "chunked body cut short": (post(path, b"transfer-encoding: chunked\r\n", b"3\r\nabc\r\n"), True),
    }
    for name, (request, half_close) in refused.items():
        for _ in range(3):  # granian's reading of a half-close varies with timing: each way must be refused
            response = exchange(port, request, half_close=half_close)
            # Where an answer can still be read it is the envelope; a sender that is gone may get none.
            if response.status is not None:
                assert response.status == 400, (name, response.raw)
                error = response.json()["error"]
                assert error["code"] == "body_incomplete", (name, response.raw)
                assert error["message"].startswith("body:")
    # The sender that closes outright after part of its body gets no answer at all, and nothing is kept.
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(post(path, b"content-length: 100\r\n", b"abc"))

    accepted = [
        exchange(port, post(path, b"content-length: " + b"0" * 5000 + b"3\r\n", b"abc")),  # long, but 3
        exchange(port, post(path, b"transfer-encoding: chunked\r\n", b"3\r\nabc\r\n0\r\n\r\n")),
        exchange(port, post(path, b"content-length: 3\r\n", b"abc")),
    ]
    assert [r.status for r in accepted] == [200, 200, 200], [r.raw for r in accepted]
    ids = [r.json()["id"] for r in accepted]

    records = await stream_records(redis, settings)
    assert [(r.id, r.body) for r in records] == [(i, b"abc") for i in ids]

    stack.start_worker("worker", "flush")
    rows = await stored_events(settings, endpoint["id"], len(ids))
    assert [(row["id"], bytes(row["body"])) for row in rows] == sorted((i, b"abc") for i in ids)
    assert await redis.xlen(Keys(settings.redis_prefix).ingest_stream(0)) == 0


async def test_the_raw_path_and_query_are_stored_verbatim(
    stack: Stack, settings: Settings, endpoint: dict[str, Any], client: Any, account: Account
) -> None:
    stack.start_edge()
    stack.start_worker("worker", "flush", "sweep")
    token = token_of(endpoint["ingest_url"]).encode()
    sent = {
        b"/h/" + token + b"/a%FFb%e9%00?x=%00&y=\xc3\xa9": ("/a%FFb%e9%00", "x=%00&y=%C3%A9"),
        b"/h/" + token + b"/t\xc3\xa9/%2F/x?": ("/t%C3%A9/%2F/x", ""),
        b"/h/" + token + b"?a=1&a=2&flag": ("/", "a=1&a=2&flag"),
        b"/h/" + token + b"//double": ("//double", ""),
    }
    acks = {}
    for target, expected in sent.items():
        response = exchange(stack.edge_port, post(target, b"content-length: 2\r\n", b"{}"))
        assert response.status == 200, response.raw
        acks[response.json()["id"]] = expected
    # a token with a raw UTF-8 byte names no endpoint: a 404 in the envelope, once the sweep wrote every config
    await configs_whole(settings)
    unknown = exchange(stack.edge_port, post(b"/h/t\xc3\xa9ok", b"content-length: 2\r\n", b"{}"))
    assert unknown.status == 404
    assert unknown.json()["error"]["code"] == "endpoint_not_found"

    rows = await stored_events(settings, endpoint["id"], len(acks))
    assert {row["id"]: (row["path"], row["query"]) for row in rows} == acks
    for event_id, (path, query) in acks.items():
        resp = await client.get(f"/v1/events/{event_id}", headers=account.headers)
        assert resp.status_code == 200, resp.text
        assert (resp.json()["path"], resp.json()["query"]) == (path, query)


async def _cold_burst(port: int, tokens: list[str], per_connection: int) -> list[tuple[int, bytes]]:
    """Every connection opened first, then each sends its requests one after another (keep-alive): the
    first requests of all connections reach the edge together, each for a token it never saw."""
    connections = await asyncio.gather(*(asyncio.open_connection("127.0.0.1", port) for _ in tokens))
    start = asyncio.Event()

    async def run(token: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> list[tuple[int, bytes]]:
        await start.wait()
        out = []
        try:
            for _ in range(per_connection):
                writer.write(post(f"/h/{token}".encode(), b"content-length: %d\r\n" % len(BODY), BODY))
                head = await reader.readuntil(b"\r\n\r\n")
                status = int(head.split(b" ", 2)[1])
                length = content_length(head)
                assert length is not None
                out.append((status, await reader.readexactly(length)))
        finally:
            writer.close()
            await writer.wait_closed()
        return out

    tasks = [asyncio.create_task(run(token, *conn)) for token, conn in zip(tokens, connections, strict=True)]
    start.set()
    return [answer for answers in await asyncio.wait_for(asyncio.gather(*tasks), 60) for answer in answers]


async def test_a_cold_edge_answers_a_burst_without_a_500(
    stack: Stack, settings: Settings, redis: aioredis.Redis
) -> None:
    """200 connections, each to an endpoint the edge has not seen, 400 requests: far more concurrent config
    lookups than the Redis client has connections. Every request is acknowledged and in the stream."""
    keys = Keys(settings.redis_prefix)
    endpoints = {ingest_token(): new_id("ep") for _ in range(200)}
    async with redis.pipeline(transaction=False) as pipe:
        for token, endpoint_id in endpoints.items():
            config = EdgeEndpoint(endpoint_id=endpoint_id, account_id="acct_burst", environment="production")
            pipe.set(keys.endpoint_config(token), encode(config))
        await pipe.execute()
    stack.start_edge()
    answers = await _cold_burst(stack.edge_port, list(endpoints), per_connection=2)
    statuses = [status for status, _ in answers]
    assert statuses == [200] * 400, {s: statuses.count(s) for s in set(statuses)}
    acknowledged = {json.loads(body)["id"] for _, body in answers}
    records = await stream_records(redis, settings)
    assert {r.id for r in records} == acknowledged
    assert sorted(r.endpoint_id for r in records) == sorted(list(endpoints.values()) * 2)
