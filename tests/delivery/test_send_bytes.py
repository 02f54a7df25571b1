"""``send()`` encodes its request straight to bytes and reads a plain ``Reply`` (ADR 0042): no httpx request,
headers or response object per delivery, the same bytes on the wire, and response headers read as httpx read
them (repeated ones joined)."""

from __future__ import annotations

import gzip
import re

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from control.delivery.send import send
from control.delivery.transport.messages import encode_head, parse_head
from tests.delivery.transport_support import OK, answering, post, scripted, transport


async def test_a_send_builds_no_httpx_request_or_response(monkeypatch: pytest.MonkeyPatch) -> None:
    def refused(*_: object, **__: object) -> None:
        raise AssertionError("send() built an httpx object")

    async with scripted(answering(OK)) as p, transport() as t:
        monkeypatch.setattr(httpx.Request, "__init__", refused)
        monkeypatch.setattr(httpx.Response, "__init__", refused)
        outcome = await post(t, p.url + "?a=1", b'{"n":1}')
        again = await post(t, p.url, b"{}")
    assert (outcome.status, outcome.response_body, outcome.error) == (200, b"ok", None)
    assert again.status == 200
    assert p.connections == 1
    assert (
        p.heads[0]
        == (
            f"POST /hook?a=1 HTTP/1.1\r\nhost: 127.0.0.1:{p.port}\r\ncontent-type: application/json\r\n"
            "content-length: 7\r\n\r\n"
        ).encode()
    )
    assert p.bodies[0] == b'{"n":1}'


async def test_repeated_response_headers_are_joined_as_httpx_joins_them() -> None:
    body = gzip.compress(b"x" * 10)
    stacked = b"HTTP/1.1 200 OK\r\ncontent-encoding: gzip\r\ncontent-encoding: br\r\ncontent-length: %d\r\n\r\n%b" % (
        len(body),
        body,
    )
    single = b"HTTP/1.1 200 OK\r\ncontent-encoding: gzip\r\ncontent-length: %d\r\n\r\n%b" % (len(body), body)
    async with scripted(answering(stacked, single)) as p, transport() as t:
        first = await post(t, p.url)
        second = await post(t, p.url)
    assert first.response_body == b"(response body not stored: content-encoding gzip, br is not inflated)"
    assert second.response_body == b"x" * 10


async def test_a_header_value_with_a_line_break_is_refused_before_a_byte_is_sent() -> None:
    async with scripted(answering(OK)) as p, transport() as t:
        outcome = await send(t, "POST", p.url, {"x-evil": "a\r\nx-injected: 1"}, b"{}", total_timeout_s=5)
    assert outcome.status is None
    assert outcome.permanent
    assert outcome.error == "request not sendable: header x-evil: CR, LF and NUL are not allowed in values"
    assert p.connections == 0


_NAME = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_VALUE = re.compile(rb"[\t\x20-\x7e\x80-\xff]*")
"""RFC 9110's grammar as regexes: what the byte maps of ``messages`` must accept exactly."""


def _accepted(name: bytes, value: bytes) -> tuple[bool, bool]:
    """Whether ``encode_head`` takes the header and ``parse_head`` reads it as it is (name, value stripped)."""
    try:
        head, _ = encode_head("POST", b"/", [(name, value)])
        sent = head == b"POST / HTTP/1.1\r\n" + name + b": " + value + b"\r\n\r\n"
    except httpx.LocalProtocolError:
        sent = False
    try:
        _, _, _, headers = parse_head([b"HTTP/1.1 200 OK", name + b":" + value])
        read = headers == [(name, value.strip(b" \t"))]
    except httpx.RemoteProtocolError:
        read = False
    return sent, read


def test_the_byte_maps_accept_each_byte_as_the_grammar_does() -> None:
    """Request heads (``encode_head``) and response heads (``parse_head``) check names and values by a byte
    map, not a regex per character: every one of the 256 bytes, in a name and in a value, is accepted or
    refused as RFC 9110's grammar says."""
    for byte in (bytes([b]) for b in range(256)):
        name_ok = bool(_NAME.fullmatch(byte))
        assert _accepted(b"x" + byte + b"y", b"v") == (name_ok, name_ok and byte != b":"), byte
        value_ok = bool(_VALUE.fullmatch(byte))
        assert _accepted(b"x", b"v" + byte + b"w") == (value_ok, value_ok), byte


_SOME = st.sampled_from([b"a", b"Z", b"-", b"!", b" ", b"\t", b":", b"\x00", b"\r", b"\n", b"\x7f", b"\x80", b"\xff"])


@settings(max_examples=500, deadline=None)
@given(name=st.lists(_SOME, max_size=6).map(b"".join), value=st.lists(_SOME, max_size=8).map(b"".join))
def test_the_byte_maps_accept_exactly_the_grammar(name: bytes, value: bytes) -> None:
    """Any arrangement of the bytes that matter (empty names, edges, colons, spaces to strip)."""
    line = name + b":" + value
    read_name, _, read_value = line.partition(b":")
    read_valid = bool(_NAME.fullmatch(read_name)) and bool(_VALUE.fullmatch(read_value.strip(b" \t")))
    sent, read = _accepted(name, value)
    assert sent == (bool(_NAME.fullmatch(name)) and bool(_VALUE.fullmatch(value)))
    assert read == (read_valid and read_name == name)
