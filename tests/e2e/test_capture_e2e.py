"""Capture end to end through real processes: edge on granian → Redis stream → worker → Postgres → /v1."""

from __future__ import annotations

import asyncio
import base64
import time
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from control.db.context import Context
from control.support import edge_config
from shared.settings import Settings
from tests.conftest import Account, Servers, make_account
from tests.e2e.conftest import new_endpoint, stored_events
from tests.helpers import refusing_connections
from tests.stack import Stack, free_port

pytestmark = pytest.mark.slow


def _body(event: dict) -> bytes:
    if event["body_encoding"] == "base64":
        return base64.b64decode(event["body"])
    return (event["body"] or "").encode()  # an empty body is null


async def test_requests_are_captured_verbatim(capture_stack: tuple[Stack, Account]) -> None:
    stack, account = capture_stack
    endpoint = new_endpoint(stack, account)
    url = endpoint["ingest_url"]
    assert url.startswith(stack.edge_url + "/h/")
    sent = [
        ("POST", "", b'{"type":"user.created","data":{"id":"u_1","name":"J\xc3\xbcrgen"}}', "application/json"),
        ("POST", "/forms/signup", b"a=1&b=two+words&c=%C3%A9", "application/x-www-form-urlencoded"),
        ("PUT", "/deep/sub/path", b"", None),
        ("POST", "/bin", bytes(range(256)) * 4, "application/octet-stream"),
        ("GET", "", b"", None),
        ("DELETE", "/thing/42", b"", None),
        ("PATCH", "/p", b"\xff\xfe\x00not utf-8", "text/plain"),
    ]
    started = time.monotonic()
    with httpx.Client() as client:
        acks = []
        for i, (method, path, body, content_type) in enumerate(sent):
            headers = {"x-test-seq": str(i), "x-multi": "a"}
            if content_type:
                headers["content-type"] = content_type
            response = client.request(method, f"{url}{path}?seq={i}&flag", content=body, headers=headers)
            assert response.status_code == 200, response.text
            assert response.json() == {"ok": True, "id": response.headers["x-hookyard-event-id"]}
            acks.append(response.json()["id"])
    events = stored_events(stack, account, endpoint["id"], len(sent))
    assert time.monotonic() - started < 5
    by_id = {e["id"]: e for e in events}
    assert set(by_id) == set(acks)
    for event_id, (method, path, body, content_type) in zip(acks, sent, strict=True):
        event = by_id[event_id]
        seq = event["headers"]["x-test-seq"]
        assert event["method"] == method
        assert event["path"] == (path or "/")  # with its slash; "/" for the bare ingest URL
        assert event["query"] == f"seq={seq}&flag"
        assert _body(event) == body
        assert event["body_encoding"] == ("utf8" if body.decode("utf-8", "replace").encode() == body else "base64")
        assert event["content_type"] == content_type
        assert event["headers"]["x-multi"] == "a"
        assert event["source_ip"] == "127.0.0.1"
        assert event["endpoint_id"] == endpoint["id"]
        assert event["provider"] is None


async def test_edge_rejections(stack: Stack, ctx: Context, database_url: str) -> None:
    stack.env["HOOKYARD_MAX_BODY_BYTES"] = "1024"
    stack.start_control()
    stack.start_edge()
    account = await make_account(database_url)
    endpoint = new_endpoint(stack, account)
    url = endpoint["ingest_url"]
    with httpx.Client() as client:
        assert client.post(url, content=b"x" * 1024).status_code == 200
        too_big = client.post(url, content=b"x" * 1025)
        assert too_big.status_code == 413
        assert too_big.json()["error"]["code"] == "payload_too_large"
        chunked = client.post(url, content=iter([b"x" * 600, b"y" * 600]))  # no Content-Length: streamed
        assert chunked.status_code == 413
        # No worker runs here: until a sweep has written every config, a token the edge does not find may be
        # one Redis lost, so it is 503; after the sweep's rebuild (the same call), it is unknown for sure.
        rebuilding = client.post(f"{stack.edge_url}/h/NoSuchTokenNoSuchToken00")
        assert (rebuilding.status_code, rebuilding.headers["retry-after"]) == (503, "2"), rebuilding.text
        assert rebuilding.json()["error"]["code"] == "unavailable"
        await edge_config.rebuild_all(ctx)
        unknown = client.post(f"{stack.edge_url}/h/NoSuchTokenNoSuchToken00")
        assert unknown.status_code == 404
        assert unknown.json() == {"error": {"code": "endpoint_not_found", "message": "no endpoint has this ingest URL"}}
        async with ctx.pool.acquire() as conn:
            await conn.execute(
                "UPDATE endpoints SET temporary = true, expires_at = $2 WHERE id = $1",
                endpoint["id"],
                datetime.now(UTC) - timedelta(seconds=1),
            )
            await edge_config.sync(ctx, conn, [endpoint["id"]])
        deadline = time.monotonic() + 1.0  # a change applies on the edge within a second
        while (expired := client.post(url, content=b"{}")).status_code != 410 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert expired.status_code == 410
        assert expired.json()["error"]["code"] == "endpoint_expired"


async def test_a_delete_reaches_every_edge_node_within_a_second(stack: Stack, database_url: str) -> None:
    stack.start_control()
    first = stack.start_edge("edge")
    second = stack.start_edge("edge2", port=free_port())
    account = await make_account(database_url)
    endpoint = new_endpoint(stack, account)
    token = endpoint["ingest_url"].rsplit("/", 1)[-1]
    with httpx.Client() as client:
        for base in (first, second):  # both nodes now cache the endpoint
            assert client.post(f"{base}/h/{token}", content=b"{}").status_code == 200
        deleted = client.delete(f"{stack.control_url}/v1/endpoints/{endpoint['id']}", headers=account.headers)
        assert deleted.status_code == 200
        deadline = time.monotonic() + 1.0
        for base in (first, second):
            while client.post(f"{base}/h/{token}", content=b"{}").status_code != 404:
                assert time.monotonic() < deadline, f"{base} still accepts a deleted endpoint"
                time.sleep(0.02)


async def test_worker_killed_mid_batch_loses_and_duplicates_nothing(capture_stack: tuple[Stack, Account]) -> None:
    stack, account = capture_stack
    stack.kill("worker", 9)
    endpoint = new_endpoint(stack, account)
    total = 3000
    with httpx.Client() as client:
        for i in range(total):
            assert client.post(endpoint["ingest_url"], content=b'{"n":%d}' % i).status_code == 200
    stack.start_worker("worker", "flush")
    events = []
    while len(events) == 0:  # let it get going, then kill it while the backlog is being flushed
        events = stored_events(stack, account, endpoint["id"], 1, timeout_s=10)
    stack.kill("worker", 9)
    stack.start_worker("worker", "flush")
    events = stored_events(stack, account, endpoint["id"], total, timeout_s=30)
    ids = [e["id"] for e in events]
    assert len(ids) == total
    assert len(set(ids)) == total
    assert sorted(int(_body(e)[5:-1]) for e in events) == list(range(total))


async def test_postgres_away_the_edge_keeps_accepting(
    capture_stack: tuple[Stack, Account], servers: Servers, settings: Settings
) -> None:
    stack, account = capture_stack
    endpoint = new_endpoint(stack, account)
    async with refusing_connections(servers, settings.database_url):
        with httpx.Client() as client:
            for i in range(200):
                assert client.post(endpoint["ingest_url"], content=b'{"n":%d}' % i).status_code == 200
    events = stored_events(stack, account, endpoint["id"], 200, timeout_s=30)
    assert len({e["id"] for e in events}) == 200


async def test_a_slow_body_gets_408_and_a_full_stream_503(stack: Stack, database_url: str) -> None:
    """No worker runs, so the stream only grows: past its high-water mark the edge sheds load."""
    stack.env.update(HOOKYARD_BODY_READ_TIMEOUT_S="1", HOOKYARD_STREAM_HIGH_WATER="3")
    stack.start_control()
    stack.start_edge()
    account = await make_account(database_url)
    endpoint = new_endpoint(stack, account)
    path = "/h/" + endpoint["ingest_url"].rsplit("/", 1)[-1]

    # Half a body, then silence: answered 408 once the read timeout passes, not held forever.
    reader, writer = await asyncio.open_connection("127.0.0.1", stack.edge_port)
    writer.write(f"POST {path} HTTP/1.1\r\nhost: x\r\ncontent-length: 100\r\n\r\n".encode() + b"x" * 40)
    await writer.drain()
    async with asyncio.timeout(10):
        head = await reader.readuntil(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408"), head
    writer.close()

    statuses = []
    with httpx.Client() as client:
        for _ in range(6):
            response = client.post(endpoint["ingest_url"], content=b"{}")
            statuses.append(response.status_code)
            if response.status_code == 503:
                assert response.headers["retry-after"].isdigit()
                assert response.json()["error"]["code"] == "backpressure"
    assert statuses[:3] == [200, 200, 200]
    assert statuses[3:] == [503, 503, 503]

    # Shedding ends once the flush drains the stream: the edge re-reads the length of a shard it sheds, so
    # a burst past the mark does not leave it answering 503 until a restart.
    stack.start_worker()
    deadline = time.monotonic() + 15
    with httpx.Client() as client:
        while (status := client.post(endpoint["ingest_url"], content=b'{"after":1}').status_code) == 503:
            assert time.monotonic() < deadline, "the edge still sheds load after the stream was drained"
            time.sleep(0.1)
    assert status == 200
    assert len(stored_events(stack, account, endpoint["id"], 4, timeout_s=15)) == 4
