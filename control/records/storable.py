"""Text Postgres can store: the one rule, and the three ways hookyard applies it.

Postgres ``text`` and ``jsonb`` cannot hold NUL (U+0000); a lone UTF-16 surrogate (U+D800..U+DFFF, not a
Unicode scalar value, yet Python strings carry them: ``surrogateescape``, ``json.loads('"\\ud800"')``) has no
UTF-8 form for asyncpg to send; bytes that are not UTF-8 have no text form at all. Any of them reaching a
query fails the statement: a 500 for what is a caller's mistake, a failed group commit of delivery results, a
flush batch split to isolate one record. What to do instead depends on whose text it is, so the rule is
written here once, with its three applications (no length cap in any of them: limits are each field's own):

- caller text (a name, a rule, a filter, an email) is refused: :func:`text_problem` says why and
  :func:`check_text` raises the 400 naming the field. The service layer checks every field it writes or
  queries with, here, once per field: the JSON decoder of /v1 already refuses lone surrogate escapes, but
  MCP arguments go through Python's ``json``, which accepts ``"\\ud800"``, and the CLI reads argv with
  surrogate escapes;
- text that describes what happened (a delivery attempt's headers as sent, the destination's name and URL,
  error messages built from exceptions, label values) is repaired, because refusing it would lose the record
  of the attempt: :func:`storable` turns every NUL and every lone surrogate into U+FFFD, nothing else;
- a captured request is kept whole, every value storable and every one of them turned back into the exact
  bytes (:func:`event_row`, :func:`headers_object` and its inverse :func:`captured_headers`):

  - the body is ``bytea`` (with ``body_is_utf8``), always exact;
  - a header whose value is UTF-8 text without NUL is stored as that text; any other value (invalid UTF-8,
    or NUL from a sender whose server let it through) is stored as the base64 of its raw bytes and its name
    is listed in ``headers_base64`` (the API's ``header_encodings``), so the exact bytes come back. Repeated
    headers are joined with ", " (RFC 9110 5.3) before that choice, so the object stays string to string;
  - path and query are the edge's text (``shared.uri``: printable ASCII, other bytes percent-encoded); a
    record from an older edge, which stored the decoded path, goes through the same rule here, so a NUL in
    it becomes ``%00``, exactly what the sender's URL said;
  - attributed fields (event type, idempotency key) that cannot be text are null: attribution is a reading
    of the request, not part of it, and the request itself is kept whole; the search text leaves NUL out.

  Nothing here may raise for any input an edge can produce: a record Postgres still refuses is isolated by
  the flush (``control.db.faults``), never the batch it came in.

Bodies are never text here: they are stored as the exact bytes and never pass through :func:`storable`.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple, TypeVar
from urllib.parse import unquote_plus

from shared.errors import ValidationError
from shared.headers import header_text
from shared.uri import uri_text
from shared.wire import IngestRecord

__all__ = (
    "NUL_PROBLEM",
    "REPLACEMENT",
    "EventRow",
    "captured_headers",
    "check_text",
    "event_row",
    "headers_object",
    "storable",
    "text_problem",
)

NUL_PROBLEM = "must not contain NUL characters"
_SURROGATE_PROBLEM = "must not contain lone UTF-16 surrogates (U+D800 to U+DFFF); they are not Unicode text"
REPLACEMENT = "\ufffd"
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")

T = TypeVar("T")


# -- caller text: refused -------------------------------------------------------------------------------


def text_problem(value: str) -> str | None:
    """Why Postgres could not store ``value`` (a message without the field name), or None when it can:
    ``text`` and ``jsonb`` hold no NUL, and a lone UTF-16 surrogate (U+D800..U+DFFF, not a Unicode scalar
    value) has no UTF-8 form for asyncpg to send."""
    if "\x00" in value:
        return NUL_PROBLEM
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return _SURROGATE_PROBLEM
    return None


def check_text(value: Any, field: str) -> Any:
    """``value`` unchanged when it is not a string or is storable text; ValidationError naming ``field``."""
    if isinstance(value, str) and (problem := text_problem(value)) is not None:
        raise ValidationError(f"{field}: {problem}")
    return value


# -- text describing what happened: repaired ------------------------------------------------------------


def storable(value: T) -> T:
    """``value`` with NUL and lone surrogates replaced by U+FFFD: a string, or the keys and values of a
    (nested) dict or list, as jsonb takes them; anything else unchanged."""
    if isinstance(value, str):
        if value.isascii():  # the usual case: only NUL can be wrong, and it almost never is
            return value.replace("\x00", REPLACEMENT) if "\x00" in value else value  # type: ignore[return-value]  # a str in, the same str type out
        return _UNSTORABLE.sub(REPLACEMENT, value)  # type: ignore[return-value]  # a str in, the same str type out
    if isinstance(value, dict):
        try:  # the usual dict, a request's headers: flat ASCII text, checked in one pass rather than per item
            flat = "".join(value) + "".join(value.values())
        except TypeError:  # a value that is not a string: item by item
            flat = None
        if flat is not None and flat.isascii() and "\x00" not in flat:
            return dict(value)  # type: ignore[return-value]  # a dict in, a dict out
        return {storable(k): storable(v) for k, v in value.items()}  # type: ignore[return-value]  # a dict in, a dict out
    if isinstance(value, list):
        return [storable(v) for v in value]  # type: ignore[return-value]  # a list in, a list out
    return value


# -- a captured request: kept whole ---------------------------------------------------------------------


def _name(raw: bytes) -> str:
    """Header names are HTTP tokens (ASCII) from any real server; anything else is percent-encoded."""
    name = raw.decode("latin-1")
    if name.isascii() and name.isprintable():
        return name
    return "".join(c if c.isascii() and c.isprintable() and c != "%" else f"%{ord(c):02X}" for c in name)


def _uri_text(value: str) -> str:
    return uri_text(value.encode("utf-8", "surrogatepass"))


def headers_object(headers: list[tuple[bytes, bytes]]) -> tuple[dict[str, str], list[str] | None]:
    """(name → value, the names whose value is base64 of raw bytes, or None when every value is text).

    The usual request (names seen once and ASCII, values UTF-8 text, no NUL anywhere) in one comprehension
    and three checks over the joined text, with no Python step per header; anything else takes the general
    path. The flush runs this for every event: per header checks cost it about 1 µs an event (ADR 0070)."""
    try:
        out = {raw_name.decode("latin-1"): raw_value.decode() for raw_name, raw_value in headers}
    except UnicodeDecodeError:
        return _headers_object(headers)
    names = "".join(out)
    if len(out) != len(headers) or not names.isascii() or "\x00" in names or "\x00" in "".join(out.values()):
        return _headers_object(headers)
    return out, None


def _headers_object(headers: list[tuple[bytes, bytes]]) -> tuple[dict[str, str], list[str] | None]:
    joined: dict[str, bytes] = {}
    for raw_name, raw_value in headers:
        name = _name(raw_name)
        earlier = joined.get(name)
        joined[name] = raw_value if earlier is None else earlier + b", " + raw_value
    out: dict[str, str] = {}
    encoded: list[str] | None = None
    for name, raw_value in joined.items():
        try:
            value = raw_value.decode()
            if "\x00" in value:
                raise UnicodeError
        except UnicodeError:
            value = base64.b64encode(raw_value).decode("ascii")
            encoded = [name] if encoded is None else [*encoded, name]
        out[name] = value
    return out, encoded


def captured_headers(headers: Mapping[str, str], encoded: Sequence[str] | None) -> dict[str, str]:
    """A stored event's headers as they arrived, to send them again (deliveries, replays): a value kept as
    base64 is decoded back to its bytes, carried in the ``str`` as ``surrogateescape``, which is how the
    delivery transport encodes header values (``control.delivery.send``), so those exact bytes go out."""
    out = dict(headers)
    for name in encoded or ():
        if name in out:
            out[name] = base64.b64decode(out[name]).decode("utf-8", "surrogateescape")
    return out


class EventRow(NamedTuple):
    """An ``events`` row as the flush writes it: its fields, in their order, are the columns the flush COPYs
    (``control.db.flush.COLUMNS`` is ``EventRow._fields``), so no list of names has to be kept in step with
    it. A tuple still (COPY takes it as it is); routing and tracing read it by field name."""

    id: str
    endpoint_id: str
    received_at: int
    """Microseconds since the Unix epoch, as the edge took them (``IngestRecord.received_at_us``): the flush's
    statement makes the ``timestamptz`` (``control.db.flush``), where a ``datetime`` built here and encoded by
    asyncpg cost the worker about 1.5 µs an event (ADR 0070)."""
    method: str
    path: str
    query: str
    headers: dict[str, str]
    headers_base64: list[str] | None
    body: bytes
    body_is_utf8: bool
    content_type: str | None
    source_ip: str | None
    provider: str | None
    event_type: str | None
    idempotency_key: str | None
    signature_valid: bool | None
    signature_failure_reason: str | None
    ip_allowed: bool | None
    traceparent: str | None
    handshake: bool
    labels: list[dict[str, str]] | None
    """None: no label (stored as ``[]``), which COPY sends as a null instead of encoding an empty list."""
    search_text: str


_new_row = tuple.__new__


def event_row(record: IngestRecord, labels: list[dict[str, str]] | None = None) -> EventRow:
    """The event's row. Built by position, in field order, as a tuple made an ``EventRow`` directly: by keyword
    it cost about 5 µs more per event on the flush's hot path, and the named tuple's own ``__new__`` (a Python
    function of 22 arguments) about 0.5 µs."""
    headers, encoded = headers_object(record.headers)
    content_type = headers.get("content-type")
    if content_type is not None and encoded is not None and "content-type" in encoded:
        # a reading of the header (as attribution reads headers), not the header itself
        content_type = header_text(base64.b64decode(content_type)).replace("\x00", "\ufffd")
    try:
        text = record.body.decode()
        is_utf8 = True
    except UnicodeDecodeError:
        text, is_utf8 = "", False
    # Inlined, as the flush runs this per event. An attributed field with NUL is null (a decoded record
    # cannot hold a lone surrogate: msgpack strings are UTF-8); a path or query of an older edge (which
    # stored the decoded path) goes through the edge's rule. The edge sends the sub-path after the token
    # without its slash (``IngestRecord.path``); the event keeps it, as the sender wrote it: ``/stripe``,
    # ``/`` for the bare ingest URL.
    event_type, key, path, query = record.event_type, record.idempotency_key, record.path, record.query
    if event_type is not None and "\x00" in event_type:
        event_type = None
    if key is not None and "\x00" in key:
        key = None
    if path and not (path.isascii() and path.isprintable()):
        path = _uri_text(path)
    path = "/" + path
    if query and not (query.isascii() and query.isprintable()):
        query = _uri_text(query)
    # ``q`` finds an event by what a person remembers of it: its body, type and labels, and where it was sent
    # and with what (the path, the query, as sent and decoded, and every header value that is text: one kept
    # as base64 holds no text, and no value here holds NUL). One list joined once: this runs per event.
    parts = [text.replace("\x00", ""), content_type or "", record.method, event_type or "", path, query]
    if "%" in query or "+" in query:
        parts.append(unquote_plus(query).replace("\x00", ""))
    parts.extend(headers.values() if encoded is None else (v for n, v in headers.items() if n not in encoded))
    if labels:
        parts.extend(label["value"] for label in labels)
    search = "\n".join(parts).lower()
    return _new_row(
        EventRow,
        (
            record.id,
            record.endpoint_id,
            record.received_at_us,
            record.method,
            path,
            query,
            headers,
            encoded,
            record.body,
            is_utf8,
            content_type,
            record.source_ip,
            record.provider,
            event_type,
            key,
            record.signature_valid,
            record.signature_failure_reason,
            record.ip_allowed,
            record.traceparent,
            record.handshake,
            labels or None,
            search,
        ),
    )
