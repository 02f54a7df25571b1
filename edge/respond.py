"""Tiny ASGI response helpers for the edge; headers are pre-built bytes, bodies pre-encoded where fixed."""

from __future__ import annotations

import logging
from typing import Any

import msgspec

from edge.metrics import REQUESTS
from shared.errors import envelope

__all__ = ("JSON_HEADER", "send_error", "send_internal_error", "send_json")

JSON_HEADER = (b"content-type", b"application/json")
_encoder = msgspec.json.Encoder()
_INTERNAL_ERROR = _encoder.encode(envelope("internal_error", "the edge failed to handle this request; retry it"))

log = logging.getLogger("hookyard.edge")


async def send_json(send: Any, status: int, body: bytes, headers: list[tuple[bytes, bytes]] | None = None) -> None:
    out = [JSON_HEADER, (b"content-length", str(len(body)).encode())]
    if headers:
        out.extend(headers)
    await send({"type": "http.response.start", "status": status, "headers": out})
    await send({"type": "http.response.body", "body": body})


async def send_error(
    send: Any, status: int, code: str, message: str, headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    REQUESTS.inc((code, ""))
    await send_json(send, status, _encoder.encode(envelope(code, message)), headers)


def _route_of(scope: dict[str, Any]) -> str:
    """The request's first path segment only (``/h/…``): the rest is the ingest token and the sender's own
    path, which may hold a person's data, and a log line outlives an erasure (docs/reference/retention.md)."""
    raw = scope.get("raw_path") or scope.get("path") or b""
    text = raw.decode("latin-1") if isinstance(raw, bytes) else str(raw)
    first, _, rest = text.lstrip("/").partition("/")
    first = "".join(c for c in first[:32] if c.isascii() and (c.isalnum() or c in "-_"))  # nothing to forge a line
    return f"/{first}/…" if rest else f"/{first}"


async def send_internal_error(scope: dict[str, Any], send: Any, exc: BaseException) -> None:
    """What every edge handler does with an exception nothing else expected: log it with its traceback and
    answer ``500 internal_error`` in the envelope, never the server's plain-text 500.

    If the response had already started, the server refuses a second start (granian raises
    ``RuntimeError``); that, and a sender that is gone, is logged and otherwise ignored: there is nobody
    left to tell. Never raises.
    """
    log.error(
        "unhandled error on %s %s",
        scope.get("method", "?"),
        _route_of(scope),
        exc_info=(type(exc), exc, exc.__traceback__),
    )
    REQUESTS.inc(("internal_error", ""))
    try:
        await send_json(send, 500, _INTERNAL_ERROR)
    except Exception as late:  # noqa: BLE001 - response already under way, or the sender is gone
        log.debug("could not answer 500 after the error above: %r", late)
