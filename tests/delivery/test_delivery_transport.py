"""The outbound HTTP/1.1 transport against real loopback servers that answer with exact bytes: keep-alive,
response framing (Content-Length, chunked, until close, none), the record cap, peers that close, stall or
answer garbage, the pool's limit, and every timeout."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import socket
import ssl
import tracemalloc
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import brotli
import httpx
import pytest

from control.delivery import egress
from control.delivery import send as send_module
from control.delivery.send import MAX_RESPONSE_BYTES, Outcome, send
from control.delivery.transport import MAX_HEAD, Transport
from tests.destination import serving
from tests.helpers import wait_for

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


class Peer:
    """A TCP server on a loopback port whose every connection runs ``handler`` (real sockets, scripted
    bytes); counts connections and keeps the request heads it read."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.connections = 0
        self.heads: list[bytes] = []
        self.bodies: list[bytes] = []
        self.port = 0
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            await self.handler(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass  # the client went away, or the test is over
        finally:
            self._tasks.discard(task)
            writer.close()

    async def request(self, reader: asyncio.StreamReader) -> tuple[bytes, bytes] | None:
        """The next request's head and body; None once the client closed."""
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:
            return None
        self.heads.append(head)
        fields = {n.strip().lower(): v.strip() for n, _, v in (line.partition(b":") for line in head.split(b"\r\n"))}
        if fields.get(b"transfer-encoding") == b"chunked":
            body = b""
            while size := int((await reader.readuntil(b"\r\n")).strip(), 16):
                body += (await reader.readexactly(size + 2))[:-2]
            await reader.readuntil(b"\r\n")
        else:
            body = await reader.readexactly(int(fields.get(b"content-length", b"0")))
        self.bodies.append(body)
        return head, body


@contextlib.asynccontextmanager
async def peer(handler: Handler) -> AsyncIterator[Peer]:
    server_peer = Peer(handler)
    server = await asyncio.start_server(server_peer._connection, "127.0.0.1", 0)
    server_peer.port = server.sockets[0].getsockname()[1]
    try:
        yield server_peer
    finally:
        server.close()
        for task in list(server_peer._tasks):
            task.cancel()
        await asyncio.gather(*server_peer._tasks, return_exceptions=True)
        await server.wait_closed()


def answering(*responses: bytes) -> Callable[[Peer], Handler]:
    """A handler answering each request (on any connection) with the next of ``responses`` (the last one
    repeats), keeping the connection open for more."""
    answered = 0

    def make(p: Peer) -> Handler:
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            nonlocal answered
            while await p.request(reader) is not None:
                writer.write(responses[min(answered, len(responses) - 1)])
                answered += 1
                await writer.drain()

        return handle

    return make


@contextlib.asynccontextmanager
async def scripted(make: Callable[[Peer], Handler]) -> AsyncIterator[Peer]:
    holder: list[Peer] = []

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await make(holder[0])(reader, writer)

    async with peer(handler) as p:
        holder.append(p)
        yield p


def transport(**overrides: float) -> Transport:
    timeouts = {"timeout_s": 2.0, "connect_timeout_s": 2.0} | overrides
    return egress.client(
        "any", timeout_s=timeouts["timeout_s"], connect_timeout_s=timeouts["connect_timeout_s"], max_connections=4
    )


async def post(t: Transport, url: str, body: bytes = b"{}", *, method: str = "POST", total_s: float = 5) -> Outcome:
    return await send(t, method, url, {"content-type": "application/json"}, body, total_timeout_s=total_s)


OK = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"


async def test_kept_alive_connections_are_reused() -> None:
    async with scripted(answering(OK)) as p, transport() as t:
        first = await post(t, p.url, b"one")
        second = await post(t, p.url, b"two")
        both = await asyncio.gather(post(t, p.url, b"three"), post(t, p.url, b"four"))
        after = await post(t, p.url, b"five")
    assert [o.status for o in (first, second, *both, after)] == [200] * 5
    assert first.response_body == b"ok"
    # One connection for the sequential requests; the concurrent pair needed a second one; then reuse.
    assert p.connections == 2
    assert len(p.heads) == 5


async def test_requests_go_out_as_given_in_one_piece() -> None:
    async with scripted(answering(OK)) as p, transport() as t:
        outcome = await send(
            t,
            "PUT",
            p.url + "?a=1",
            {"X-Custom": "ünï", "content-length": "999", "host": "evil"},
            b"body",
            total_timeout_s=5,
        )
    assert outcome.status == 200
    assert p.heads == [
        f"PUT /hook?a=1 HTTP/1.1\r\nhost: 127.0.0.1:{p.port}\r\nx-custom: ünï\r\ncontent-length: 4\r\n\r\n".encode()
    ]
    assert outcome.sent_headers == {"host": f"127.0.0.1:{p.port}", "x-custom": "ünï", "content-length": "4"}


async def test_chunked_responses_are_decoded_and_the_connection_kept() -> None:
    chunked = (
        b"HTTP/1.1 202 Accepted\r\ntransfer-encoding: chunked\r\ncontent-type: text/plain\r\n\r\n"
        b"5;ext=1\r\nhello\r\n1\r\n \r\n5\r\nworld\r\n0\r\nx-trailer: dropped\r\n\r\n"
    )
    async with scripted(answering(chunked, OK)) as p, transport() as t:
        first = await post(t, p.url)
        second = await post(t, p.url)
    assert (first.status, first.response_body) == (202, b"hello world")
    assert (second.status, second.response_body) == (200, b"ok")
    assert p.connections == 1


async def test_chunks_arriving_slowly_are_read_across_packets() -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await p.request(reader)
        for piece in (
            b"HTTP/1.1 200 OK\r\ntransfer-",
            b"encoding: chunked\r\n\r\n3\r",
            b"\nabc",
            b"\r\n0\r\n",
            b"\r\n",
        ):
            writer.write(piece)
            await writer.drain()
            await asyncio.sleep(0.01)
        await p.request(reader)
        writer.write(OK)

    async with peer(handle) as p, transport() as t:
        first = await post(t, p.url)
        second = await post(t, p.url)
    assert (first.status, first.response_body) == (200, b"abc")
    assert second.status == 200
    assert p.connections == 1


async def test_a_body_over_the_record_cap_is_cut_and_its_connection_closed() -> None:
    big = bytes(range(97, 123)) * 10_000  # 260 KB of letters
    huge = b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n%b" % (len(big), big)
    chunks = b"".join(
        b"%x\r\n%b\r\n" % (len(big[i : i + 50_000]), big[i : i + 50_000]) for i in range(0, len(big), 50_000)
    )
    huge_chunked = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n" + chunks + b"0\r\n\r\n"
    async with scripted(answering(huge, huge_chunked, OK)) as p, transport() as t:
        first = await post(t, p.url)
        second = await post(t, p.url)
        third = await post(t, p.url)
    for outcome in (first, second):
        assert outcome.status == 200
        assert outcome.response_body == big[:MAX_RESPONSE_BYTES]
    assert (third.status, third.response_body) == (200, b"ok")
    assert p.connections == 3  # the half-read bodies took their connections with them


async def test_a_cut_never_splits_a_utf8_character_and_a_body_at_the_cap_is_kept_whole() -> None:
    split = b"a" + "\u00e9".encode() * 40_000  # the cap falls inside an "\u00e9" (two bytes)
    at_cap = b"b" * (MAX_RESPONSE_BYTES - 1) + b"\xc3"  # exactly the cap, ending mid-character: not a cut

    def reply(body: bytes) -> bytes:
        return b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n%b" % (len(body), body)

    async with scripted(answering(reply(split), reply(at_cap))) as p, transport() as t:
        cut = await post(t, p.url)
        whole = await post(t, p.url)
    assert cut.response_body == split[: MAX_RESPONSE_BYTES - 1]  # one byte short: the character is left out
    assert cut.response_body.decode("utf-8")
    assert whole.response_body == at_cap  # the exact bytes, though they are not UTF-8


async def test_a_body_until_the_close_is_read_and_not_reused() -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await p.request(reader)
        writer.write(b"HTTP/1.0 200 OK\r\ncontent-type: text/plain\r\n\r\nuntil ")
        await writer.drain()
        writer.write(b"the close")

    async with peer(handle) as p, transport() as t:
        first = await post(t, p.url)
        second = await post(t, p.url)
    assert [(o.status, o.response_body) for o in (first, second)] == [(200, b"until the close")] * 2
    assert p.connections == 2


@pytest.mark.parametrize(
    ("method", "response"),
    [
        ("HEAD", b"HTTP/1.1 200 OK\r\ncontent-length: 1000\r\n\r\n"),
        ("HEAD", b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"),
        ("POST", b"HTTP/1.1 204 No Content\r\n\r\n"),
        ("POST", b"HTTP/1.1 304 Not Modified\r\ncontent-length: 1000\r\n\r\n"),
        ("POST", b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n"),
    ],
)
async def test_responses_without_a_body_do_not_wait_for_one(method: str, response: bytes) -> None:
    async with scripted(answering(response, OK)) as p, transport(timeout_s=1) as t:
        first = await post(t, p.url, b"" if method == "HEAD" else b"{}", method=method)
        second = await post(t, p.url)
    assert first.error is None
    assert first.status in (200, 204, 304)
    assert first.response_body == b""
    assert (second.status, second.response_body) == (200, b"ok")  # same connection, nothing left over
    assert p.connections == 1


async def test_usable_as_an_httpx_client_transport() -> None:
    chunked = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n"
    async with scripted(answering(chunked, OK)) as p:

        async def parts() -> AsyncIterator[bytes]:
            yield b"streamed "
            yield b"body"

        async with httpx.AsyncClient(transport=transport(), timeout=2) as client:
            first = await client.get(p.url)
            second = await client.post(p.url, content=parts())
    assert (first.status_code, first.text, first.http_version) == (200, "hi", "HTTP/1.1")
    assert (second.status_code, second.text) == (200, "ok")
    assert b"transfer-encoding: chunked" in p.heads[1].lower()
    assert p.bodies[1] == b"streamed body"
    assert p.connections == 1


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


async def test_the_pool_limit_queues_requests_and_times_out() -> None:
    release = asyncio.Event()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while await p.request(reader) is not None:
            await release.wait()
            writer.write(OK)
            await writer.drain()

    async with peer(handle) as p:
        one = Transport(
            egress.connector("any"),
            ssl_context=ssl.create_default_context,
            timeout=httpx.Timeout(2.0, pool=0.2),
            max_connections=1,
        )
        async with one:
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


def _encoded(encoding: bytes, body: bytes) -> bytes:
    return b"HTTP/1.1 200 OK\r\ncontent-encoding: %b\r\ncontent-length: %d\r\n\r\n%b" % (encoding, len(body), body)


async def _post_measuring_peak(t: Transport, url: str) -> tuple[Outcome, int]:
    """One delivery, and the most memory Python had allocated at once while it ran."""
    tracemalloc.start()
    try:
        outcome = await post(t, url)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return outcome, peak


async def test_compressed_bodies_are_inflated_only_up_to_the_record_cap() -> None:
    text = b"accepted " * 20
    bomb = gzip.compress(b"0" * (64 << 20))  # 64 MiB of zeros in about 64 KB
    raw_deflate = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    deflated_raw = raw_deflate.compress(text) + raw_deflate.flush()

    replies = (
        _encoded(b"gzip", bomb),
        _encoded(b"gzip", gzip.compress(text)),
        _encoded(b"deflate", zlib.compress(text)),
        _encoded(b"deflate", deflated_raw),
        _encoded(b"gzip", b"not gzip at all"),
    )
    async with scripted(answering(*replies)) as p, transport() as t:
        first, peak = await _post_measuring_peak(t, p.url)
        outcomes = [first] + [await post(t, p.url) for _ in replies[1:]]
    assert peak < 8 << 20, f"inflating the bomb peaked at {peak >> 20} MiB"
    assert outcomes[0].status == 200
    assert outcomes[0].response_body == b"0" * MAX_RESPONSE_BYTES
    assert [o.response_body for o in outcomes[1:4]] == [text] * 3
    assert outcomes[4].status == 200
    assert outcomes[4].response_body.startswith(b"(response body not stored: gzip data is invalid")


async def test_brotli_bodies_are_inflated_only_up_to_the_record_cap() -> None:
    text = b"accepted " * 20
    bomb = brotli.compress(b"0" * (64 << 20), quality=5)  # 64 MiB of zeros in about 100 bytes
    replies = (_encoded(b"br", bomb), _encoded(b"br", brotli.compress(text)), _encoded(b"br", b"not brotli"))
    async with scripted(answering(*replies)) as p, transport() as t:
        first, peak = await _post_measuring_peak(t, p.url)
        outcomes = [first] + [await post(t, p.url) for _ in replies[1:]]
    assert peak < 8 << 20, f"inflating the bomb peaked at {peak >> 20} MiB"
    assert [o.status for o in outcomes] == [200, 200, 200]
    assert outcomes[0].response_body == b"0" * MAX_RESPONSE_BYTES
    assert outcomes[1].response_body == text
    assert outcomes[2].response_body.startswith(b"(response body not stored: br data is invalid")


async def test_encodings_not_inflated_are_recorded_as_such(monkeypatch: pytest.MonkeyPatch) -> None:
    """No body reaches a decoder that could inflate it unbounded: compressions we do not inflate (and br
    without brotli installed) are noted instead; an unknown token is read as identity, as httpx does."""
    text = b"plain text after all"
    replies = (
        _encoded(b"zstd", b"\x28\xb5\x2f\xfd" + b"x" * 20),
        _encoded(b"gzip, br", brotli.compress(gzip.compress(text))),
        _encoded(b"utf-8", text),
        _encoded(b"identity", text),
        _encoded(b"br", brotli.compress(text)),
    )
    async with scripted(answering(*replies)) as p, transport() as t:
        outcomes = [await post(t, p.url) for _ in replies[:-1]]
        monkeypatch.setattr(send_module, "brotli", None)
        outcomes.append(await post(t, p.url))
    assert [o.status for o in outcomes] == [200] * 5
    assert [o.response_body for o in outcomes] == [
        b"(response body not stored: content-encoding zstd is not inflated)",
        b"(response body not stored: content-encoding gzip, br is not inflated)",
        text,
        text,
        b"(response body not stored: br needs brotli 1.2 or later)",
    ]
