"""One outbound HTTP exchange: build the request, send it, read a bounded response, classify the outcome.

Requests are ``httpx.Request`` objects handed straight to the transport (``control.delivery.transport``),
not through an ``httpx.AsyncClient``: nothing of a client's (default headers such as ``user-agent:
python-httpx``, a cookie jar filled by every destination's ``set-cookie``, auth and redirect handling) is
wanted here, and that layer cost as much CPU per delivery as the HTTP exchange itself. What goes out is
exactly the given headers plus ``host`` and ``content-length``.

Nothing here raises for a failed exchange: refused egress, connect errors, timeouts, a dropped connection
and non-2xx answers all come back as an :class:`Outcome`, with ``error`` saying why when no response came.
An ``error`` names the URL by ``shared.logs.safe_url`` at most: it is stored in delivery records and shown in
listings and logs, where a URL's user info, path and query (often its secret) do not belong.
"""

from __future__ import annotations

import asyncio
import sys
import time
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx

from control.delivery.signing import signature_headers
from control.delivery.transport import TlsProfile, Transport
from control.delivery.transport.http11 import Reply, origin_of
from control.delivery.transport.messages import encode_lines
from control.records.destinations import HOP_BY_HOP
from control.records.storable import storable
from shared import ids
from shared.bytes_lru import memoize
from shared.errors import EgressRefusedError
from shared.logs import safe_url

__all__ = (
    "MAX_RESPONSE_BYTES",
    "Outcome",
    "delivery_row",
    "forwardable",
    "merge",
    "send",
    "signature",
)

MAX_RESPONSE_BYTES = 65_536
"""Response bodies are stored up to 64 KiB (docs/reference/delivery.md); the rest is never read."""


@dataclass(slots=True)
class Outcome:
    status: int | None
    """The response status; None when no response came back (``error`` says why)."""
    latency_ms: int
    sent_headers: dict[str, str]
    """What went on the wire, ``host`` and ``content-length`` included (names lowercased)."""
    response_body: bytes | None = None
    """Up to ``MAX_RESPONSE_BYTES`` of the (decompressed) response body, or why it was not stored."""
    error: str | None = None
    retry_after: str | None = None
    """The raw ``Retry-After`` of a 429 or 503, for the retry schedule."""
    permanent: bool = False
    """Retrying cannot help (refused egress, an unusable URL or header)."""
    started_at: float = field(default_factory=time.time)

    @property
    def success(self) -> bool:
        return self.status is not None and 200 <= self.status < 300


def forwardable(captured: Mapping[str, str]) -> dict[str, str]:
    """The captured headers minus hop-by-hop ones, including any the ``connection`` header names."""
    named = {token.strip().lower() for token in captured.get("connection", "").split(",")}
    return {name: value for name, value in captured.items() if name not in HOP_BY_HOP and name not in named}


def signature(event_id: str, body: bytes, secret: str | Sequence[str]) -> dict[str, str]:
    """hookyard's own signature on what it sends to a destination (rule deliveries and the destination test):
    Standard Webhooks headers (``webhook-id`` = the event id, stable across attempts, so receivers deduplicate
    on it; ``webhook-timestamp`` = now; ``webhook-signature``) with the destination's signing secret: ``v1``
    for a ``whsec_`` one, ``v1a`` (Ed25519) for a ``whsk_`` one, one entry per secret when several are given
    (a rotation's overlap: ``control.delivery.signing``). They are layered over the captured headers, so an
    event that arrived with ``webhook-*`` headers of its own carries hookyard's instead (a destination that
    wants the provider's: ``sign_deliveries: false``)."""
    secrets = (secret,) if isinstance(secret, str) else secret
    return signature_headers(event_id, body, secrets, int(time.time()))


def merge(*layers: Mapping[str, str] | None) -> dict[str, str]:
    """Header layers, later ones winning; names compared (and sent) lowercased."""
    out: dict[str, str] = {}
    for layer in layers:
        for name, value in (layer or {}).items():
            out[name.lower()] = value
    return out


def delivery_row(
    outcome: Outcome,
    body: bytes,
    *,
    endpoint_id: str,
    event_id: str,
    task_id: str | None,
    destination_id: str | None,
    destination_name: str | None,
    destination_url: str,
    rule_id: str | None,
    source: str,
    attempt: int,
    transform: Mapping[str, Any] | None = None,
    trace: tuple[str, str] | None = None,
    auth: Mapping[str, Any] | None = None,
) -> tuple[Any, ...]:
    """The ``deliveries`` row of one attempt, in ``control.db.delivery_records.COLUMNS`` order: one shape for
    rule deliveries and replays. Its id (first) carries the attempt's start time; ``request_headers`` is null
    when nothing went out. Bodies are the exact bytes (null when empty, or when no response came back); the
    descriptive text goes through ``storable`` (NUL and lone surrogates become U+FFFD), so every row built
    here can be written. ``transform``: what a transform did (``control.records.transforms.TransformRecord``
    as a dict); one that skipped the delivery makes it a success with nothing sent. ``trace``: (trace id, span
    id) of the attempt's span when tracing recorded it (``control.delivery.tracing``). ``auth``: what
    authentication did (an OAuth2 token fetched: ``control.delivery.auth``), never a credential."""
    skipped = transform is not None and transform.get("outcome") == "skipped"
    return (
        ids.new_id("dlv", int(outcome.started_at * 1000)),
        endpoint_id,
        event_id,
        task_id,
        destination_id,
        storable(destination_name),
        storable(destination_url),
        rule_id,
        source,
        attempt,
        storable(outcome.sent_headers) or None,
        body or None,
        outcome.status,
        outcome.response_body,
        outcome.latency_ms,
        outcome.success or skipped,
        storable(outcome.error),
        datetime.fromtimestamp(outcome.started_at, UTC),
        _storable_record(transform) if transform is not None else None,
        *(trace or (None, None)),
        storable(dict(auth)) if auth is not None else None,
    )


_NOT_TEXT = frozenset({type(None), bool, int, float})


def _storable_record(record: Mapping[str, Any]) -> dict[str, Any]:
    """``storable`` of what a transform did (a ``TransformRecord`` as a dict: its names are ours): only its
    values that may hold text are looked at. Through ``storable`` whole, its mixed values took the slow path
    (a failed join, then each key and value): 2.3 µs per transformed delivery, most of the worker's own
    bookkeeping of a trivial transform's result (ADR 0060)."""
    if isinstance(record, dict) and not record.get("logs") and record.get("error") is None:
        return record  # nothing that may hold text: no logs, no error (the outcome is ours); 0.9 µs less a delivery
    return {name: value if value.__class__ in _NOT_TEXT else storable(value) for name, value in record.items()}


def _parts_weight(parts: tuple[str, bytes, str, str, int | None]) -> int:
    return sum(sys.getsizeof(part) for part in parts)


@memoize(16 * 1024 * 1024, size=_parts_weight, max_entry=64 * 1024)
def _url(url: str) -> tuple[str, bytes, str, str, int | None]:
    """(``host`` header, request target, scheme, host, port) of a URL. Parsing a URL is most of what
    building a request costs, and a worker sends to few distinct URLs. Bounded in bytes, not entries: a
    transform may make every URL different and megabytes long (such a URL is parsed each time)."""
    parsed = httpx.URL(url)
    return parsed.netloc.decode("ascii"), parsed.raw_path, parsed.scheme, parsed.host, parsed.port


_SET_BY_US = frozenset({"host", "content-length", "transfer-encoding"})


def _request(
    method: str, url: str, headers: Mapping[str, str], body: bytes
) -> tuple[tuple[str, bytes, str, str, int | None], dict[str, str], list[bytes], list[bytes]]:
    """The parsed URL, the headers sent (names lowercased) and their names' and values' bytes on the wire, in
    order, ``host`` and ``content-length`` made here from the URL and the body. No ``httpx.Request``: the head
    is encoded straight from these (``messages.encode_lines``, which checks every byte), as httpx's request
    and headers objects cost a tenth of a delivery's CPU for nothing the transport needs
    (docs/adr/0042-delivery-cpu-per-send.md).

    The usual headers (names lowercased already, as ``captured`` and ``merge`` leave them; no line break in
    any) are copied and encoded a request at a time, in C, rather than a header at a time (ADR 0091); the
    others take the step per header, with its errors."""
    target = _url(url)
    sent = {"host": target[0]}
    names = "".join(headers)
    if names == names.lower():  # one comparison for every name's ``lower()`` (Σ, which depends on context, differs)
        sent.update(headers)
        sent["host"] = target[0]  # the same place, first, as when a captured ``host`` is skipped
        sent.pop("content-length", None)
        sent.pop("transfer-encoding", None)
    else:
        copy_by_header(sent, headers)
    if body or method.upper() in ("POST", "PUT", "PATCH"):
        sent["content-length"] = str(len(body))
    # Values are UTF-8 text, or a captured value's exact bytes carried as surrogateescape
    # (``control.records.storable.captured_headers``): this encoding gives back the bytes that arrived.
    count = len(sent)
    try:
        raw_names = "\n".join(sent).encode("latin-1").split(b"\n")
        raw_values = "\n".join(sent.values()).encode("utf-8", "surrogateescape").split(b"\n")
    except UnicodeError:  # encoded one by one below, for the error of the header that cannot be
        raw_names = raw_values = []
    if len(raw_names) != count or len(raw_values) != count:  # a line break in one, or an encoding error
        raw_names, raw_values = encode_by_header(sent)
    return target, sent, raw_names, raw_values


def copy_by_header(sent: dict[str, str], headers: Mapping[str, str]) -> None:
    """``headers`` into ``sent`` a header at a time, names lowercased, those ``_request`` makes skipped."""
    for name, value in headers.items():
        lower = name.lower()
        if lower not in _SET_BY_US:
            sent[lower] = value


def encode_by_header(sent: Mapping[str, str]) -> tuple[list[bytes], list[bytes]]:
    """The names' and values' bytes a header at a time: the error, if any, is the first header's that fails."""
    wire = [(name.encode("latin-1"), value.encode("utf-8", "surrogateescape")) for name, value in sent.items()]
    return [name for name, _ in wire], [value for _, value in wire]


class _Inflater:
    """gzip or deflate, never producing more than asked for.

    httpx inflates each received chunk whole before the cap applies: a hostile destination's gzip of zeros
    (1,000:1) would cost tens of MB per chunk, per concurrent delivery. ``zlib``'s ``max_length`` stops at
    the cap instead. ``deflate`` is the zlib format, or raw deflate from servers that get it wrong (httpx
    accepts both): the first chunk tells which."""

    def __init__(self, encoding: str) -> None:
        self._inflater = zlib.decompressobj(16 + zlib.MAX_WBITS if encoding != "deflate" else zlib.MAX_WBITS)
        self._may_be_raw = encoding == "deflate"

    def __call__(self, data: bytes, max_length: int) -> bytes:
        if self._may_be_raw:
            self._may_be_raw = False
            try:
                return self._inflater.decompress(data, max_length)
            except zlib.error:
                self._inflater = zlib.decompressobj(-zlib.MAX_WBITS)
        return self._inflater.decompress(data, max_length)


try:  # optional, as for httpx: without it a br response is recorded as not stored, never inflated unbounded
    import brotli

    brotli.Decompressor().process(b"", output_buffer_limit=1)  # before 1.2 it cannot bound its output
    _INVALID: tuple[type[Exception], ...] = (zlib.error, brotli.error)
except (ImportError, TypeError):  # brotli comes with the dev dependencies, so the tests take the other branch
    brotli = None
    _INVALID = (zlib.error,)


class _BrotliInflater:
    """br, bounded the same way through the decoder's ``output_buffer_limit`` (the caller stops reading once
    the cap is reached, so the decoder is never asked to continue past it)."""

    def __init__(self) -> None:
        self._decoder = brotli.Decompressor()

    def __call__(self, data: bytes, max_length: int) -> bytes:
        inflated: bytes = self._decoder.process(data, output_buffer_limit=max_length)
        return inflated


_ZLIB = frozenset({"gzip", "x-gzip", "deflate"})
_NOT_INFLATED = frozenset({"zstd", "compress", "x-compress"})
"""Compressions we do not inflate: recorded as not stored rather than as compressed bytes."""


def _inflater(encoding: str) -> _Inflater | _BrotliInflater | str | None:
    """How to read a body of this ``content-encoding``: an inflater, ``None`` for the bytes as they come, or
    why the body is not stored. Every path is bounded: httpx's own decoders, which inflate a chunk whole,
    are never used. An unknown token (``utf-8``, ``none``: servers do send them) is read as identity, as
    httpx reads it."""
    if encoding in _ZLIB:
        return _Inflater(encoding)
    if encoding == "br":
        return _BrotliInflater() if brotli is not None else "(response body not stored: br needs brotli 1.2 or later)"
    if encoding in _NOT_INFLATED or "," in encoding:
        return f"(response body not stored: content-encoding {encoding} is not inflated)"
    return None


def _capped(body: bytes) -> bytes:
    """The first ``MAX_RESPONSE_BYTES`` of a longer body, less a UTF-8 character the cut split in two (at
    most 3 bytes): a text answer stays text rather than turning into base64 for its last character."""
    cut = body[:MAX_RESPONSE_BYTES]
    try:
        cut.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.reason == "unexpected end of data" and exc.start >= MAX_RESPONSE_BYTES - 3:
            return cut[: exc.start]
    return cut


async def _read_capped(reply: Reply) -> bytes:
    """The body's first ``MAX_RESPONSE_BYTES`` exactly as received (decompressed), or why it is not stored.
    One byte more is read than is kept, which is how a cut is told from a body of exactly the cap."""
    encoding = (reply.header(b"content-encoding") or "").strip().lower()
    decompress = _inflater(encoding)
    if isinstance(decompress, str):
        return decompress.encode()
    content = reply.body
    if isinstance(content, bytes) and decompress is None:  # the usual answer: all of it arrived with the head
        return content if len(content) <= MAX_RESPONSE_BYTES else _capped(content)
    limit = MAX_RESPONSE_BYTES + 1
    body = bytearray()
    try:
        if isinstance(content, bytes):
            body += decompress(content, limit) if content and decompress is not None else content
        else:
            async for raw in content:
                body += raw if decompress is None else decompress(raw, limit - len(body))
                if len(body) >= limit:
                    break
    except _INVALID as exc:  # a body we cannot decompress; the status still stands
        return f"(response body not stored: {encoding} data is invalid: {exc})".encode()
    return bytes(body) if len(body) <= MAX_RESPONSE_BYTES else _capped(bytes(body))


async def send(
    transport: Transport,
    method: str,
    url: str,
    headers: Mapping[str, str],
    body: bytes,
    *,
    total_timeout_s: float,
    tls: TlsProfile | None = None,
) -> Outcome:
    """Sends once; the whole exchange (connect, send, response, bounded body) within ``total_timeout_s``.
    ``tls``: the destination's own CA and client certificate (``control.delivery.auth``)."""
    started, clock = time.time(), time.perf_counter()

    def outcome(**values: object) -> Outcome:
        latency = round((time.perf_counter() - clock) * 1000)
        return Outcome(latency_ms=latency, started_at=started, **values)  # type: ignore[arg-type]  # the values are Outcome's own fields

    try:
        target, sent, names, values = _request(method, url, headers, body)
    except httpx.InvalidURL:  # its message quotes a piece of the URL (a port that may be a password)
        error = f"invalid request: not a valid URL ({safe_url(url)})"
        return outcome(status=None, sent_headers=dict(headers), error=error, permanent=True)
    except (ValueError, UnicodeError) as exc:
        return outcome(status=None, sent_headers=dict(headers), error=f"invalid request: {exc}", permanent=True)
    try:
        verb = method.upper()
        _, raw_path, scheme, host, port = target
        destination = origin_of(scheme, host, port)
        head, close_after = encode_lines(verb, raw_path, names, values)
        # The transport bounds every wait of the exchange (the body's too) by the deadline: one timer per
        # wait, not a second one around the whole send (docs/adr/0042-delivery-cpu-per-send.md).
        deadline = asyncio.get_running_loop().time() + total_timeout_s
        reply = await transport.send(verb, destination, head, body, close_after, deadline=deadline, tls=tls)
        try:
            received = await _read_capped(reply)
        finally:
            await reply.aclose()
    except EgressRefusedError as exc:
        return outcome(status=None, sent_headers=sent, error=str(exc), permanent=True)
    except TimeoutError:
        return outcome(
            status=None, sent_headers=sent, error=f"timeout: no complete response within {total_timeout_s:g}s"
        )
    except httpx.TimeoutException as exc:
        return outcome(status=None, sent_headers=sent, error=f"timeout: {_phase(exc)} ({exc or type(exc).__name__})")
    except (httpx.UnsupportedProtocol, httpx.LocalProtocolError) as exc:
        return outcome(status=None, sent_headers=sent, error=f"request not sendable: {exc}", permanent=True)
    except httpx.RemoteProtocolError as exc:  # the transport's messages say which: closed, or not HTTP
        return outcome(status=None, sent_headers=sent, error=str(exc))
    except httpx.ConnectError as exc:
        return outcome(status=None, sent_headers=sent, error=f"connection failed: {exc}")
    except httpx.HTTPError as exc:
        return outcome(status=None, sent_headers=sent, error=f"{type(exc).__name__}: {exc}")
    status = reply.status
    retry_after = reply.header(b"retry-after") if status in (429, 503) else None
    return outcome(status=status, sent_headers=sent, response_body=received, retry_after=retry_after)


def _phase(exc: httpx.TimeoutException) -> str:
    return {
        httpx.ConnectTimeout: "connecting",
        httpx.ReadTimeout: "waiting for the response",
        httpx.WriteTimeout: "sending the request",
        httpx.PoolTimeout: "waiting for a free connection",
    }.get(type(exc), "exchange")
