"""The outbound HTTP/1.1 transport against real loopback servers answering exact bytes: keep-alive reuse,
requests in one piece, response framing (Content-Length, chunked, until close, none), the record cap, and
use as an httpx transport."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest

from control.delivery.send import MAX_RESPONSE_BYTES, send
from control.delivery.transport.messages import framing, parse_head
from tests.delivery.transport_support import OK, answering, peer, post, scripted, transport


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


KEEP_ALIVE = [  # (status line, Connection header or None, whether the connection may be reused)
    (b"HTTP/1.0 200 OK", None, False),
    (b"HTTP/1.0 200 OK", b"keep-alive", True),
    (b"HTTP/1.0 200 OK", b"Keep-Alive", True),
    (b"HTTP/1.0 200 OK", b"close", False),
    (b"HTTP/1.1 200 OK", None, True),
    (b"HTTP/1.1 200 OK", b"keep-alive", True),
    (b"HTTP/1.1 200 OK", b"close", False),
    (b"HTTP/1.1 200 OK", b"foo, Close", False),
]


@pytest.mark.parametrize(("status", "connection", "kept"), KEEP_ALIVE)
def test_keep_alive_follows_the_version_and_the_connection_header(
    status: bytes, connection: bytes | None, kept: bool
) -> None:
    lines = [status, b"Content-Length: 3"] + ([b"Connection: " + connection] if connection else [])
    code, version, _, headers = parse_head(lines)
    assert framing("POST", code, version, headers, False) == (3, False, kept)
    assert framing("POST", code, version, headers, True) == (3, False, False)  # we asked to close


def test_an_http10_body_without_length_ends_at_the_close_and_one_with_transfer_encoding_is_not_reused() -> None:
    code, version, _, headers = parse_head([b"HTTP/1.0 200 OK", b"Connection: keep-alive"])
    assert framing("POST", code, version, headers, False) == (None, False, True)  # the Body closes it at EOF
    chunked = [b"HTTP/1.0 200 OK", b"Transfer-Encoding: chunked", b"Connection: keep-alive"]
    code, version, _, headers = parse_head(chunked)
    assert framing("POST", code, version, headers, False) == (None, True, False)


@pytest.mark.parametrize(("status", "connection", "kept"), KEEP_ALIVE)
async def test_an_http10_answer_is_not_reused_unless_it_says_keep_alive(
    status: bytes, connection: bytes | None, kept: bool
) -> None:
    # The peer leaves every connection open: whether the second send reuses it is the transport's choice.
    extra = b"connection: " + connection + b"\r\n" if connection else b""
    async with scripted(answering(status + b"\r\ncontent-length: 2\r\n" + extra + b"\r\nok")) as p, transport() as t:
        first = await post(t, p.url)
        second = await post(t, p.url)
    assert [(o.status, o.response_body) for o in (first, second)] == [(200, b"ok")] * 2
    assert p.connections == (1 if kept else 2)


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
