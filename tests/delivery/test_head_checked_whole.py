"""``encode_head`` checks a request's header names together and its values together (ADR 0071): a head of
several headers is accepted exactly when each header alone would be, and a refused one names the first header
that fails, as the header-by-header check did."""

from __future__ import annotations

import re

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from control.delivery.transport.messages import encode_head

_NAME = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_VALUE = re.compile(rb"[\t\x20-\x7e\x80-\xff]*")


def _expected(headers: list[tuple[bytes, bytes]]) -> bytes | str:
    """The head RFC 9110's grammar allows, or the error of the first header it does not, header by header."""
    for name, value in headers:
        if not _NAME.fullmatch(name):
            return f"invalid header name {name[:60]!r}"
        if not _VALUE.fullmatch(value):
            return f"header {name.decode('ascii')}: CR, LF and NUL are not allowed in values"
    return b"POST /h HTTP/1.1\r\n" + b"".join(n + b": " + v + b"\r\n" for n, v in headers) + b"\r\n"


_byte = st.sampled_from(b"aZ09-_!~:; \t\r\n\x00\x7f\x80\xff\x1f,")
_headers = st.lists(
    st.tuples(
        st.one_of(st.sampled_from([b"content-type", b"x-a", b"webhook-id"]), st.binary(max_size=6)),
        st.one_of(st.sampled_from([b"application/json", b"", b"v1,abc=="]), st.lists(_byte, max_size=6).map(bytes)),
    ),
    max_size=8,
)


@settings(max_examples=400, deadline=None)
@given(_headers)
def test_a_head_is_taken_or_refused_as_each_header_alone_would_be(headers: list[tuple[bytes, bytes]]) -> None:
    expected = _expected(headers)
    if isinstance(expected, str):
        with pytest.raises(httpx.LocalProtocolError) as refused:
            encode_head("POST", b"/h", headers)
        assert str(refused.value) == expected
    else:
        assert encode_head("POST", b"/h", headers)[0] == expected


@pytest.mark.parametrize(
    ("headers", "error"),
    [
        ([(b"x-a", b"1"), (b"x b", b"2"), (b"x-c", b"\r\n")], "invalid header name b'x b'"),
        ([(b"x-a", b"1"), (b"x-b", b"2\n"), (b"", b"3")], "header x-b: CR, LF and NUL are not allowed in values"),
        ([(b"x-a", b"1"), (b"", b"2")], "invalid header name b''"),
    ],
)
def test_the_first_header_that_fails_is_named(headers: list[tuple[bytes, bytes]], error: str) -> None:
    with pytest.raises(httpx.LocalProtocolError) as refused:
        encode_head("POST", b"/h", headers)
    assert str(refused.value) == error


def test_a_connection_close_among_others_still_asks_to_close() -> None:
    _, close = encode_head("POST", b"/h", [(b"x-a", b"1"), (b"Connection", b"Close"), (b"x-b", b"2")])
    assert close
