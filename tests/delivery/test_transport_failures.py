"""The outbound transport's failures against real loopback peers: peers that close mid-response or answer
garbage, every timeout (read, connect with TLS, write, the pool's limit), refused connections, invalid
requests, and TLS by host name."""

from __future__ import annotations

import asyncio
import socket
import ssl
from pathlib import Path

import httpx
import pytest

from control.delivery import egress
from control.delivery.send import send
from control.delivery.transport import MAX_HEAD, Transport
from tests.delivery.transport_support import OK, answering, peer, post, scripted, transport
from tests.destination import serving
from tests.helpers import wait_for


async def test_a_peer_closing_mid_response_is_a_clear_failure() -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request = await p.request(reader)
        assert request is not None
        if request[1] == b"headless":
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-le")
        elif request[1] == b"bodiless":
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nonly ten..")
        elif request[1] == b"chunkless":
            writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n64\r\nonly ten..")
        else:
            writer.write(OK)
            await p.request(reader)  # keep the connection: the next request gets nothing back
        await writer.drain()

    async with peer(handle) as p, transport() as t:
        outcomes = {body: await post(t, p.url, body.encode()) for body in ("headless", "bodiless", "chunkless")}
        ok = await post(t, p.url, b"fine")
        assert ok.status == 200
        nothing = await post(t, p.url, b"none")  # the reused connection gets closed without an answer
        again = await post(t, p.url, b"fine")
    for outcome in outcomes.values():
        assert outcome.status is None
        assert outcome.error is not None
        assert outcome.error.startswith("connection closed before"), outcome.error
    assert "response head" in outcomes["headless"].error
    assert "response body" in outcomes["bodiless"].error
    assert nothing.status is None
    assert nothing.error is not None
    assert nothing.error.startswith("connection closed without a response"), nothing.error
    assert again.status == 200


@pytest.mark.parametrize(
    ("garbage", "says"),
    [
        (b"SSH-2.0-OpenSSH_9.6\r\n\r\n", "not an HTTP/1.x response"),
        (b"HTTP/2 200\r\n\r\n", "not an HTTP/1.x response"),
        (b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n", "not an HTTP/1.x response"),
        (b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", "invalid response header line"),
        (b"HTTP/1.1 200 OK\r\ncontent-length: 12x\r\n\r\n", "invalid content-length"),
        (b"HTTP/1.1 200 OK\r\ncontent-length: 1\r\ncontent-length: 2\r\n\r\nab", "invalid content-length"),
        (b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n", "invalid chunk size"),
        (b"HTTP/1.1 101 Switching Protocols\r\n\r\n", "101 switching protocols"),
        (b"HTTP/1.1 200 OK\r\nx-big: " + b"a" * (MAX_HEAD + 10), "response head larger than"),
    ],
)
async def test_a_peer_answering_garbage_is_a_clear_error(garbage: bytes, says: str) -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if await p.request(reader) is not None:
            writer.write(garbage)
            await writer.drain()
            await p.request(reader)  # no close from this side: the client must not wait for more

    async with peer(handle) as p, transport(timeout_s=3) as t:
        outcome = await post(t, p.url)
        with serving() as good:
            after = await post(t, good.url)  # the transport is still fine
    assert outcome.status is None
    assert outcome.error is not None
    assert outcome.error.startswith("invalid response: "), outcome.error
    assert says in outcome.error
    assert not outcome.permanent
    assert after.status == 200


async def test_a_lenient_head_with_bare_line_feeds_is_read() -> None:
    response = b"HTTP/1.1 200\ncontent-length: 2\nx-folded: a\n  b\n\nok"
    async with scripted(answering(response, OK)) as p, httpx.AsyncClient(transport=transport()) as client:
        first = await client.post(p.url)
        second = await client.post(p.url)
    assert (first.status_code, first.text, first.headers["x-folded"]) == (200, "ok", "a b")
    assert first.reason_phrase == ""
    assert (second.status_code, second.text) == (200, "ok")
    assert p.connections == 1


async def test_read_timeout() -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await p.request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\n")  # then nothing
        await writer.drain()
        await asyncio.Event().wait()  # and nothing more, ever

    async with peer(handle) as p, transport(timeout_s=0.2) as t:
        outcome = await post(t, p.url)
    assert outcome.status is None
    assert outcome.error == "timeout: waiting for the response (no response data within 0.2s)"
    assert 150 <= outcome.latency_ms < 2000


async def test_connect_timeout_covers_the_tls_handshake(tmp_path: Path) -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await asyncio.Event().wait()  # accepts the TCP connection, never answers the TLS client hello

    async with peer(silent) as p, transport(connect_timeout_s=0.2) as t:
        outcome = await post(t, f"https://127.0.0.1:{p.port}/hook")
    assert outcome.status is None
    assert outcome.error is not None
    assert outcome.error.startswith("timeout: connecting"), outcome.error
    assert 150 <= outcome.latency_ms < 2000
    assert p.connections == 1


async def test_refused_connection_is_a_connect_failure() -> None:
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    async with transport() as t:
        outcome = await post(t, f"http://127.0.0.1:{port}/hook")
    assert outcome.status is None
    assert outcome.error is not None
    assert outcome.error.startswith("connection failed"), outcome.error


async def test_write_timeout_when_the_peer_reads_nothing() -> None:
    async def deaf(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await asyncio.Event().wait()  # never reads

    async with peer(deaf) as p, transport(timeout_s=0.3) as t:
        outcome = await post(t, p.url, b"x" * (64 * 1024 * 1024), total_s=10)
    assert outcome.status is None
    assert outcome.error is not None
    assert outcome.error.startswith("timeout: sending the request"), outcome.error


def _one_connection(timeout: httpx.Timeout) -> Transport:
    """A transport of one connection: a second request waits for the pool while the first is out."""
    return Transport(
        egress.connector("any"), ssl_context=ssl.create_default_context, timeout=timeout, max_connections=1
    )


async def test_the_pool_limit_queues_requests_and_times_out() -> None:
    release = asyncio.Event()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while await p.request(reader) is not None:
            await release.wait()
            writer.write(OK)
            await writer.drain()

    async with peer(handle) as p, _one_connection(httpx.Timeout(2.0, pool=0.2)) as one:
        slow = asyncio.create_task(post(one, p.url))
        await wait_for(lambda: asyncio.sleep(0, len(p.heads) == 1))  # the only connection is taken
        waited = await post(one, p.url)  # the only connection is busy for longer than the pool timeout
        release.set()
        queued = await asyncio.gather(post(one, p.url), post(one, p.url))
    assert waited.status is None
    assert waited.error == "timeout: waiting for a free connection (no free connection within the pool timeout)"
    assert (await slow).status == 200
    assert [o.status for o in queued] == [200, 200]
    assert p.connections == 1


async def test_invalid_requests_are_refused_before_sending() -> None:
    async with scripted(answering(OK)) as p, transport() as t:
        bad_value = await send(t, "POST", p.url, {"x-evil": "a\r\nx-injected: 1"}, b"", total_timeout_s=5)
        bad_name = await send(t, "POST", p.url, {"bad name": "v"}, b"", total_timeout_s=5)
        bad_scheme = await send(t, "POST", "ftp://127.0.0.1/x", {}, b"", total_timeout_s=5)
    for outcome in (bad_value, bad_name, bad_scheme):
        assert outcome.status is None
        assert outcome.permanent, outcome.error
    assert p.heads == []


async def test_tls_by_host_name(tmp_path: Path) -> None:
    """The certificate is checked against the URL's host name (here ``localhost``), not the address."""
    with serving(tls_dir=tmp_path) as secure:
        context = secure.client_context()
        async with egress.client("any", timeout_s=2, connect_timeout_s=2, max_connections=2, ssl_context=context) as t:
            first = await post(t, f"https://localhost:{secure.port}/hook", b"one")
            second = await post(t, f"https://localhost:{secure.port}/hook", b"two")
    assert (first.status, second.status) == (200, 200)
    assert [r.body for r in secure.requests] == [b"one", b"two"]
    assert secure.requests[0].headers["host"] == f"localhost:{secure.port}"


async def test_the_total_timeout_bounds_a_body_that_trickles_in() -> None:
    """Each byte arrives within the read timeout, so only the whole exchange's bound can end it."""

    async def trickle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await p.request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
        while True:
            writer.write(b"1\r\nx\r\n")
            await writer.drain()
            await asyncio.sleep(0.05)

    async with peer(trickle) as p, transport(timeout_s=2.0) as t:
        outcome = await post(t, p.url, total_s=0.4)
        after = await post(t, p.url, total_s=0.4)  # the timed-out connection was not reused mid-body
    assert outcome.status is None
    assert outcome.error == "timeout: no complete response within 0.4s"
    assert 350 <= outcome.latency_ms < 1500
    assert after.error == outcome.error
    assert p.connections == 2


async def test_the_total_timeout_bounds_a_head_that_trickles_in() -> None:
    async def trickle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await p.request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\n")
        while True:  # header lines, never the blank line that ends the head
            writer.write(b"x-a: b\r\n")
            await writer.drain()
            await asyncio.sleep(0.05)

    async with peer(trickle) as p, transport(timeout_s=2.0) as t:
        outcome = await post(t, p.url, total_s=0.3)
    assert outcome.error == "timeout: no complete response within 0.3s"
    assert 250 <= outcome.latency_ms < 1500


async def test_the_total_timeout_bounds_the_wait_for_a_free_connection_and_the_connect() -> None:
    release = asyncio.Event()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while await p.request(reader) is not None:
            await release.wait()
            writer.write(OK)
            await writer.drain()

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await asyncio.Event().wait()  # never answers the TLS client hello

    async with peer(handle) as p, peer(silent) as quiet:
        async with _one_connection(httpx.Timeout(5.0)) as one:
            slow = asyncio.create_task(post(one, p.url))
            await wait_for(lambda: asyncio.sleep(0, len(p.heads) == 1))
            waited = await post(one, p.url, total_s=0.3)  # the pool timeout (5 s) would wait much longer
            release.set()
            assert (await slow).status == 200
        async with transport(connect_timeout_s=5.0) as t:
            handshake = await post(t, f"https://127.0.0.1:{quiet.port}/hook", total_s=0.3)
    assert waited.error == "timeout: no complete response within 0.3s"
    assert 250 <= waited.latency_ms < 1500
    assert handshake.error == "timeout: no complete response within 0.3s"
    assert 250 <= handshake.latency_ms < 1500
