"""The inbox's "copy as curl" must not run the sender's command.

Anyone who can post to an ingest URL chooses the method, path, query, headers and body, and RFC 9110 allows
`` ` $ & | ' `` in a method or header name. The owner pastes the copied text into a shell. Each case here
takes the text from the shipped builder (``control/static/curl.js`` in node), runs it in bash and dash
with ``curl`` a recording function, and checks that curl got exactly the request's parts and that nothing
else ran. The end-to-end case through the real edge is ``test_copy_as_curl_e2e.py``.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.security.curl_support import SHELLS, Copier, copier_process, request_parts, run_copied

INGEST = "http://127.0.0.1:8001/h/tok_abc"
AUDIT_METHOD = "PO`touch$IFS'x'`ST"  # the audit's method: a valid token that runs `touch x` unquoted
TCHARS = "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
FRAGMENTS = [
    "$(touch pwned)", "`touch pwned`", "';touch pwned;'", '";touch pwned;"', "'\\''", "\x15touch pwned\n",
    "$IFS", "${IFS}", "$'\\x41'", "\\", "\\n", "\\0", "\\c", "%", "%s", "%n", "%%", "-", "--", "-v", "@-",
    "@/etc/passwd", "'", '"', "\n", "\r", "\t", "\x00", "\x1b[2J", "\x03", "\x7f", "\x85", "é", "\u202e",
    "\U0001f600", "&", "|", ";", "#", "!", "*", "?", "[a]", "{1,2}", "~", " ", "\\\n",
]  # fmt: skip
PRINTABLE_TEXT = re.compile(r"[\x20-\x7e\n]*")


@pytest.fixture(scope="module")
def copy() -> Iterator[Copier]:
    yield from copier_process()


def event(
    method: str = "POST",
    path: str = "",
    query: str = "",
    headers: dict[str, tuple[str, str | None]] | None = None,
    body: bytes | None = None,
) -> dict[str, Any]:
    """An event as the inbox data route returns it: a body that is UTF-8 text is text, any other base64."""
    encoded: str | None = None
    encoding = "utf8"
    if body is not None:
        try:
            encoded = body.decode()
        except UnicodeDecodeError:
            encoded, encoding = base64.b64encode(body).decode(), "base64"
    headers = headers or {}
    return {
        "method": method,
        "path": path,
        "query": query,
        "headers": {name: value for name, (value, _) in headers.items()},
        "header_encodings": {name: enc for name, (_, enc) in headers.items() if enc},
        "body": encoded,
        "body_encoding": encoding,
    }


def check(copy: Copier, sent: dict[str, Any]) -> None:
    """The copied text is printable ASCII and newlines, and in every shell sends exactly ``sent``, alone."""
    text = copy(INGEST, sent)
    assert PRINTABLE_TEXT.fullmatch(text), f"the text holds bytes a terminal acts on: {text!r}"
    for shell in SHELLS:
        ran = run_copied(text, shell)
        ran.assert_clean()
        assert ran.parts() == request_parts(INGEST, sent), (shell, text)


CASES = {
    "audit method": event(AUDIT_METHOD),
    "method substitution": event("$(touch pwned)"),
    "path and query": event(path="/a'$(touch${IFS}p)'`touch q`", query="x=';touch r;'&a[0]={1,2}"),
    "header name": event(headers={"x-`touch$IFS'y'`": ("1", None)}),
    "header value": event(headers={"x-v": ("'; touch z; '$(touch w)", None), "x-empty": ("", None)}),
    "header value not utf-8": event(headers={"x-raw": (base64.b64encode(b"a\xff'$(touch v)").decode(), "base64")}),
    "body names a file for curl": event(body=b"@/etc/passwd"),
    "body with nul and invalid utf-8": event(body=b"\x00\xff'$(touch b)'\n%s\\c-"),
    "body like an option": event(body=b"-v --output pwned"),
    "body pasted with Ctrl-U": event(body=b"\x15touch pwned\n"),
    "headers left out": event(
        headers={
            "Host": ("evil", None),
            "@/etc/passwd": ("x", None),
            "a:b": ("x", None),
            "x-nul": (base64.b64encode(b"a\0b").decode(), "base64"),
            "x-split": ("a\r\nx-injected: 1", None),
        }
    ),
}


@pytest.mark.parametrize("sent", CASES.values(), ids=CASES.keys())
def test_each_hostile_part_is_one_argument_and_nothing_else_runs(copy: Copier, sent: dict[str, Any]) -> None:
    check(copy, sent)


def test_the_headers_curl_cannot_carry_are_left_out(copy: Copier) -> None:
    """The rule of ``request_parts`` is not vacuous: these really are absent, the token one present."""
    text = copy(INGEST, CASES["headers left out"] | {"headers": {"X-Ok": "1", **CASES["headers left out"]["headers"]}})
    assert run_copied(text, "bash").parts().headers == (b"X-Ok: 1",)


hostile = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=4)), max_size=6).map("".join)
stored_text = hostile.map(lambda s: s.replace("\x00", ""))  # method, path, query: Postgres text, never NUL
names = st.one_of(
    st.text(TCHARS, min_size=1, max_size=12),
    st.sampled_from(["Host", "Content-Length", "__proto__", "123", "x-`touch$IFS'pwned'`", "@/etc/passwd", "a:b"]),
    hostile,
)
values = st.one_of(
    hostile.map(lambda v: (v, None)),
    st.binary(max_size=24).map(lambda b: (base64.b64encode(b).decode(), "base64")),
)
bodies = st.one_of(st.none(), hostile.map(str.encode), st.binary(max_size=64))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    method=st.one_of(st.text(TCHARS, min_size=1, max_size=16), stored_text),
    path=stored_text,
    query=stored_text,
    headers=st.dictionaries(names, values, max_size=5),
    body=bodies,
)
@example(method=AUDIT_METHOD, path="", query="", headers={}, body=None)
def test_any_request_is_sent_exactly_and_runs_nothing(
    copy: Copier, method: str, path: str, query: str, headers: dict[str, tuple[str, str | None]], body: bytes | None
) -> None:
    check(copy, event(method, path, query, headers, body))
