"""HTTP/1.1 message syntax: a request head written, a response head parsed, the response body's framing.

Apart from the connection and the exchange because this is what decides which bytes are valid on the wire
(RFC 9112's grammar, lenient only where h11 is: bare LF line ends, obsolete line folding) and it is pure: no
I/O, no state, so every rule about what we send and what we accept reads in one place. Anything the peer
sends that is not HTTP/1.x is a clear ``httpx.RemoteProtocolError``, never a crash or a guess; anything we
would send that is not (a header value with CR or LF) is an ``httpx.LocalProtocolError`` before a byte goes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import httpx

__all__ = ("HEX", "closed_error", "encode_head", "encode_lines", "encode_request", "framing", "invalid", "parse_head")

_STATUS = re.compile(rb"HTTP/1\.([01]) ([0-9]{3})(?: ([^\r\n]*))?")
_TOKEN = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_TOKEN_BYTES = b"!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_VALUE_BYTES = bytes([0x09, *range(0x20, 0x7F), *range(0x80, 0x100)])
_NAME_MAP = bytes(0x20 if b in _TOKEN_BYTES else 0 for b in range(256))
_VALUE_MAP = bytes(0x20 if b in _VALUE_BYTES else 0 for b in range(256))
"""A header name is one or more of ``_TOKEN_BYTES``, a value any number of ``_VALUE_BYTES`` (RFC 9110's
field-vchar, SP and HTAB: no CR, LF, NUL or other control). Checked as ``0 in x.translate(map)``, the map
sending every allowed byte to a space and every other to NUL: a table lookup per byte and a memchr, in C,
150 ns a header where the two regexes took 430 (``translate(None, allowed)`` builds its table on every call
and took as long as the regexes). Measured per delivery: docs/adr/0042-delivery-cpu-per-send.md."""
HEX = re.compile(rb"[0-9A-Fa-f]{1,16}")
"""A chunk size."""
_DIGITS = re.compile(rb"[0-9]{1,18}")


def closed_error(what: str) -> httpx.RemoteProtocolError:
    return httpx.RemoteProtocolError(f"connection closed {what}")


def invalid(what: str) -> httpx.RemoteProtocolError:
    """The peer answered something that is not HTTP/1.x: a clear error, never a crash or a guess."""
    return httpx.RemoteProtocolError(f"invalid response: {what}")


def parse_head(lines: list[bytes]) -> tuple[int, bytes, bytes, list[tuple[bytes, bytes]]]:
    """(status, minor version (``b"0"`` or ``b"1"``), reason, headers) of a response head's lines (status line
    first)."""
    match = _STATUS.fullmatch(lines[0])
    if match is None:
        raise invalid(f"not an HTTP/1.x response: {lines[0][:60]!r}")
    headers: list[tuple[bytes, bytes]] = []
    for line in lines[1:]:
        if line[:1] in (b" ", b"\t"):  # obsolete line folding: part of the previous value
            if not headers:
                raise invalid("a response head starts with a continuation line")
            name, value = headers[-1]
            headers[-1] = (name, value + b" " + line.strip(b" \t"))
            continue
        name, sep, value = line.partition(b":")
        if not sep or not name or 0 in name.translate(_NAME_MAP):
            raise invalid(f"invalid response header line {line[:60]!r}")
        value = value.strip(b" \t")
        if 0 in value.translate(_VALUE_MAP):
            raise invalid(f"invalid value of response header {name[:60]!r}")
        headers.append((name, value))
    return int(match[2]), match[1], match[3] or b"", headers


def framing(
    method: str, status: int, version: bytes, headers: list[tuple[bytes, bytes]], close_after: bool
) -> tuple[int | None, bool, bool]:
    """(Content-Length or None, chunked, keep-alive) of a response: how its body ends, and whether the
    connection may carry another exchange after it. ``None`` and not chunked: the body ends at the close.
    ``version`` is the minor version as ``parse_head`` gives it (``b"0"`` or ``b"1"``): an HTTP/1.0 server
    closes after its answer unless it sends ``Connection: keep-alive`` (RFC 9112 9.3), and one it closed
    must not go back to the pool, where the next send would find it dead (RFC 9112 6.1: a 1.0 message with
    Transfer-Encoding is closed after, too)."""
    length: int | None = None
    chunked = False
    keep_alive = not close_after
    connection = transfer = content_length = None
    for name, value in headers:
        lower = name.lower()
        if lower == b"connection":
            connection = value.lower() if connection is None else connection + b"," + value.lower()
        elif lower == b"transfer-encoding":
            transfer = value.lower() if transfer is None else transfer + b"," + value.lower()
        elif lower == b"content-length":
            content_length = value if content_length is None else content_length + b"," + value
    tokens = {t.strip() for t in connection.split(b",")} if connection else set()
    if version == b"0":  # HTTP/1.0 closes unless it says otherwise; a Transfer-Encoding in it closes anyway
        keep_alive = keep_alive and b"keep-alive" in tokens and transfer is None
    else:
        keep_alive = keep_alive and b"close" not in tokens
    if method == "HEAD" or status in (204, 304):
        length = 0
    elif transfer is not None:
        chunked = transfer.rsplit(b",", 1)[-1].strip() == b"chunked"  # else: the body ends at the close
    elif content_length is not None:
        values = {v.strip() for v in content_length.split(b",")}
        if len(values) != 1 or not _DIGITS.fullmatch(value := values.pop()):
            raise invalid(f"invalid content-length {content_length[:40]!r}")
        length = int(value)
    return length, chunked, keep_alive


def encode_request(request: httpx.Request) -> tuple[bytes, bytes | None, bool]:
    """(request head, body or None when it is a stream, whether the request asks to close)."""
    head, close = encode_head(request.method, request.url.raw_path, request.headers.raw)
    try:
        body: bytes | None = request.content
    except httpx.RequestNotRead:
        body = None
    return head, body, close


def encode_head(method: str, target: bytes, headers: Iterable[tuple[bytes, bytes]]) -> tuple[bytes, bool]:
    """(request head, whether it asks to close) of (name, value) pairs: ``encode_lines``."""
    pairs = list(headers)
    return encode_lines(method, target, [name for name, _ in pairs], [value for _, value in pairs])


def encode_lines(method: str, target: bytes, names: list[bytes], values: list[bytes]) -> tuple[bytes, bool]:
    """(request head, whether it asks to close) of the headers ``names[i]: values[i]``, in order: every byte
    checked before any is sent. The names are checked together and the values together (two ``translate``
    calls a request, not two a header: docs/adr/0071-worker-cpu-per-delivery.md), and the lines are joined in
    C, with no Python step per header (ADR 0091); only a head that fails is walked header by header, for the
    error that names the header, and only one with a name containing ``connection`` for the last
    ``Connection`` header's ``close``."""
    if not _TOKEN.fullmatch(raw_method := method.encode("ascii")):
        raise httpx.LocalProtocolError(f"invalid method {method!r}")
    if not target or b" " in target or b"\r" in target or b"\n" in target:
        # Not quoted: a path and query are where webhook URLs keep their secrets.
        raise httpx.LocalProtocolError("invalid request target (empty, or with a space or line break)")
    joined = b"".join(names)
    if b"" in names or 0 in joined.translate(_NAME_MAP) or 0 in b"".join(values).translate(_VALUE_MAP):
        _refuse(zip(names, values, strict=True))
    close = False
    if b"connection" in joined.lower():  # rare: which header it is, and the last one's value, one by one
        for name, value in zip(names, values, strict=True):
            if len(name) == 10 and name.lower() == b"connection":
                close = b"close" in value.lower()
    if not names:
        return b"".join((raw_method, b" ", target, b" HTTP/1.1\r\n\r\n")), close
    lines = b"\r\n".join(map(b": ".join, zip(names, values, strict=True)))
    return b"".join((raw_method, b" ", target, b" HTTP/1.1\r\n", lines, b"\r\n\r\n")), close


def _refuse(headers: Iterable[tuple[bytes, bytes]]) -> None:
    """Raises the error of the first header a request may not carry (an empty name or one not a token, a value
    with a control byte)."""
    for name, value in headers:
        if not name or 0 in name.translate(_NAME_MAP):
            raise httpx.LocalProtocolError(f"invalid header name {name[:60]!r}")
        if 0 in value.translate(_VALUE_MAP):
            raise httpx.LocalProtocolError(f"header {name.decode('ascii')}: CR, LF and NUL are not allowed in values")
