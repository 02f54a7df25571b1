"""Request headers in the form the edge receives them, and the one rule for turning their bytes into text.

The edge reads headers as ASGI delivers them: lowercased byte names, raw byte values. Signature checks and
attribution work on that form directly (``dict(scope["headers"])``, one C call), because decoding every
header to ``str`` was a measurable share of the edge's per-request time. Callers holding text headers (a
stored event's, a test's) convert with :func:`raw_headers`.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ("RawHeaders", "header_text", "raw_headers")

RawHeaders = Mapping[bytes, bytes]
"""Lowercased header name → value, both bytes; a repeated header keeps its last value (``dict()`` of the
ASGI list)."""


def raw_headers(headers: Mapping[str, str]) -> dict[bytes, bytes]:
    """Text headers in the edge's form: names lowercased, values UTF-8 (never raises)."""
    return {
        name.lower().encode("utf-8", "surrogatepass"): value.encode("utf-8", "surrogatepass")
        for name, value in headers.items()
    }


def header_text(value: bytes) -> str:
    """UTF-8 when the bytes are valid UTF-8, else Latin-1 (what HTTP/1.1 historically allowed)."""
    try:
        return value.decode()
    except UnicodeDecodeError:
        return value.decode("latin-1")
