"""A delivery's headers are copied and encoded a request at a time, in C (``send._request``,
``messages.encode_lines``; ADR 0091): the headers sent, their bytes, the head and whether it asks to close are
what the header-by-header steps made, and a request those refused is refused with the same error."""

from __future__ import annotations

from collections.abc import Mapping

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from control.delivery.send import _request, copy_by_header, encode_by_header
from control.delivery.transport.messages import encode_lines


def _by_header(
    method: str, headers: Mapping[str, str], body: bytes
) -> tuple[dict[str, str], tuple[list[bytes], list[bytes]]]:
    """What ``_request`` made a header at a time before (and still makes for unusual names)."""
    sent = {"host": "127.0.0.1:9"}
    copy_by_header(sent, headers)
    if body or method.upper() in ("POST", "PUT", "PATCH"):
        sent["content-length"] = str(len(body))
    return sent, encode_by_header(sent)


def _close(headers: list[tuple[bytes, bytes]]) -> bool:
    close = False
    for name, value in headers:
        if len(name) == 10 and name.lower() == b"connection":
            close = b"close" in value.lower()
    return close


_names = st.sampled_from(
    ["content-type", "Content-Type", "host", "HOST", "content-length", "Transfer-Encoding", "x-a", "webhook-id",
     "connection", "Connection", "x-\u03a3", "\u03c3-x", "x\nb", "\u0101", "", "x-\xe9"]
)  # fmt: skip
_values = st.one_of(
    st.sampled_from(["application/json", "", "close", "Keep-Alive, CLOSE", "a\nb", "\udcff\udc80", "\ud800", "\xe9"]),
    st.text(alphabet="aZ0 \t\r\n\x00\x7f\xe9\u0101\udcff", max_size=5),
)


@settings(max_examples=600, deadline=None)
@given(st.dictionaries(_names, _values, max_size=8), st.sampled_from(["POST", "GET"]), st.sampled_from([b"", b"{}"]))
def test_headers_sent_and_their_bytes_are_the_per_header_ones(
    headers: dict[str, str], method: str, body: bytes
) -> None:
    error: UnicodeError | None = None
    try:
        expected = _by_header(method, headers, body)
    except UnicodeError as exc:
        error = exc
    if error is not None:
        with pytest.raises(type(error)) as raised:
            _request(method, "http://127.0.0.1:9/h", headers, body)
        assert str(raised.value) == str(error)
        return
    _, sent, names, values = _request(method, "http://127.0.0.1:9/h", headers, body)
    assert list(sent.items()) == list(expected[0].items())
    assert (names, values) == expected[1]


_byte = st.sampled_from(b"aZ09-_!~:; \t\r\n\x00\x7f\x80\xff,")
_pairs = st.lists(
    st.tuples(
        st.one_of(st.sampled_from([b"connection", b"Connection", b"x-connection", b"x-a"]), st.binary(max_size=4)),
        st.one_of(st.sampled_from([b"close", b"Upgrade, CLOSE", b""]), st.lists(_byte, max_size=5).map(bytes)),
    ),
    max_size=6,
)  # fmt: skip


@settings(max_examples=600, deadline=None)
@given(_pairs)
def test_the_head_asks_to_close_as_its_last_connection_header_says(headers: list[tuple[bytes, bytes]]) -> None:
    names, values = [n for n, _ in headers], [v for _, v in headers]
    try:
        head, close = encode_lines("POST", b"/h", names, values)
    except httpx.LocalProtocolError:
        return  # which error: tests/delivery/test_head_checked_whole.py
    assert close == _close(headers)
    assert head == b"POST /h HTTP/1.1\r\n" + b"".join(n + b": " + v + b"\r\n" for n, v in headers) + b"\r\n"
