"""``send()`` encodes its request straight to bytes and reads a plain ``Reply`` (ADR 0042): no httpx request,
headers or response object per delivery, the same bytes on the wire, and response headers read as httpx read
them (repeated ones joined)."""

from __future__ import annotations

import gzip

import httpx
import pytest

from control.delivery.send import send
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
