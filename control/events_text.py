"""How a captured request becomes an events row: headers as an object, the body kept as bytes, and the
lowercased text that ``q`` searches."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from shared.headers import header_text
from shared.wire import IngestRecord

__all__ = ("event_row", "headers_object")

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def headers_object(headers: list[tuple[bytes, bytes]]) -> dict[str, str]:
    """Repeated headers are joined with ", " (RFC 9110 5.3), so the object stays string to string.

    Values decode as :func:`shared.headers.header_text` says, the rule attribution uses too.
    """
    out: dict[str, str] = {}
    for raw_name, raw_value in headers:
        name = raw_name.decode("latin-1")  # ASGI servers deliver names lowercased
        value = header_text(raw_value)
        if name in out:
            value = f"{out[name]}, {value}"
        out[name] = value
    return out


def event_row(record: IngestRecord, labels: list[dict[str, str]] | None = None) -> tuple:
    """The row in ``control.db.flush.COLUMNS`` order."""
    headers = headers_object(record.headers)
    content_type = headers.get("content-type")
    try:
        text = record.body.decode()
        is_utf8 = True
    except UnicodeDecodeError:
        text, is_utf8 = "", False
    labels = labels or []
    search = "\n".join(
        part
        for part in (
            text.replace("\x00", ""),  # Postgres text cannot hold NUL
            content_type or "",
            record.method,
            record.event_type or "",
            *(label["value"] for label in labels),
        )
        if part
    ).lower()
    return (
        record.id,
        record.endpoint_id,
        _EPOCH + timedelta(microseconds=record.received_at_us),
        record.method,
        record.path,
        record.query,
        headers,
        record.body,
        is_utf8,
        content_type,
        record.source_ip,
        record.provider,
        record.event_type,
        record.idempotency_key,
        record.signature_valid,
        record.signature_failure_reason,
        record.ip_allowed,
        labels,
        search,
    )
