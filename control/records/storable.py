"""How a captured request becomes an events row that Postgres can always store, losing nothing.

Postgres text and jsonb cannot hold NUL, and text must be valid UTF-8; the edge accepts bytes. So every
value goes in as something storable, and every one of them can be turned back into the exact bytes:

- the body is ``bytea`` (with ``body_is_utf8``), always exact;
- a header whose value is UTF-8 text without NUL is stored as that text; any other value (invalid UTF-8,
  or NUL from a sender whose server let it through) is stored as the base64 of its raw bytes and its name is
  listed in ``headers_base64`` (the API's ``header_encodings``), so the exact bytes come back. Repeated
  headers are joined with ", " (RFC 9110 5.3) before that choice, so the object stays string to string;
- path and query are the edge's text (``shared.uri``: printable ASCII, other bytes percent-encoded); a
  record from an older edge, which stored the decoded path, goes through the same rule here, so a NUL in
  it becomes ``%00``, exactly what the sender's URL said;
- attributed fields (event type, idempotency key) that cannot be text are null: attribution is a reading of
  the request, not part of it, and the request itself is kept whole.

Nothing here may raise for any input an edge can produce: a record Postgres still refuses is isolated by
the flush (``control.db.faults``), never the batch it came in.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta

from shared.headers import header_text
from shared.uri import uri_text
from shared.wire import IngestRecord

__all__ = ("captured_headers", "event_row", "headers_object")

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


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

    One pass for the usual request (names seen once, values UTF-8 text); anything else takes the general
    path. The flush runs this for every event, so the usual case is kept to a few C calls per header."""
    out: dict[str, str] = {}
    for raw_name, raw_value in headers:
        name = raw_name.decode("latin-1")
        try:
            value = raw_value.decode()
        except UnicodeDecodeError:
            return _headers_object(headers)
        if name in out or "\x00" in value or "\x00" in name or not name.isascii():
            return _headers_object(headers)
        out[name] = value
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


def event_row(record: IngestRecord, labels: list[dict[str, str]] | None = None) -> tuple:
    """The row in ``control.db.flush.COLUMNS`` order."""
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
    # stored the decoded path) goes through the edge's rule.
    event_type, key, path, query = record.event_type, record.idempotency_key, record.path, record.query
    if event_type is not None and "\x00" in event_type:
        event_type = None
    if key is not None and "\x00" in key:
        key = None
    if path and not (path.isascii() and path.isprintable()):
        path = _uri_text(path)
    if query and not (query.isascii() and query.isprintable()):
        query = _uri_text(query)
    labels = labels or []
    search = "\n".join(
        part
        for part in (
            text.replace("\x00", ""),  # Postgres text cannot hold NUL
            content_type or "",
            record.method,
            event_type or "",
            *(label["value"] for label in labels),
        )
        if part
    ).lower()
    return (
        record.id,
        record.endpoint_id,
        _EPOCH + timedelta(microseconds=record.received_at_us),
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
        labels,
        search,
    )
