"""shared.uri.uri_text: the text the edge stores for a request's raw path and query."""

from __future__ import annotations

from urllib.parse import unquote_to_bytes

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.uri import uri_text

PRINTABLE_ASCII = bytes(range(0x20, 0x7F))

# Raw targets: any bytes, weighted towards what URLs are made of (escapes, hex digits, '%' alone).
targets = st.one_of(
    st.binary(max_size=64),
    st.lists(
        st.one_of(
            st.sampled_from([b"%", b"%0", b"%00", b"%FF", b"%e9", b"%zz", b"/", b"?", b"a", b"F", b"0"]),
            st.binary(min_size=1, max_size=3),
        ),
        max_size=24,
    ).map(b"".join),
)


@given(targets)
def test_the_text_is_printable_ascii_and_means_what_the_bytes_meant(raw: bytes) -> None:
    text = uri_text(raw)
    assert text.isascii()
    assert text.isprintable()  # so never NUL, never invalid UTF-8: Postgres text holds it
    assert unquote_to_bytes(text) == unquote_to_bytes(raw)
    assert uri_text(text.encode()) == text  # stored text read again stays the same


@given(st.binary(max_size=64).filter(lambda raw: b"%" not in raw))
def test_without_escapes_percent_decoding_gives_back_the_exact_bytes(raw: bytes) -> None:
    assert unquote_to_bytes(uri_text(raw)) == raw


@given(st.binary(max_size=64).map(lambda raw: bytes(b for b in raw if 0x20 <= b < 0x7F)))
def test_printable_ascii_is_kept_verbatim(raw: bytes) -> None:
    assert uri_text(raw) == raw.decode("ascii")


@pytest.mark.parametrize(
    ("raw", "text"),
    [
        (b"/h/tok/a%FFb%e9%00", "/h/tok/a%FFb%e9%00"),
        (b"/h/t\xc3\xa9ok", "/h/t%C3%A9ok"),
        (b"a\x00b\x7f\x1f", "a%00b%7F%1F"),
        (b"x=\xff&y=%C3%A9", "x=%FF&y=%C3%A9"),
        (b"", ""),
        (PRINTABLE_ASCII, PRINTABLE_ASCII.decode()),
    ],
)
def test_examples(raw: bytes, text: str) -> None:
    assert uri_text(raw) == text
