"""Tiny ASGI response helpers for the edge; headers are pre-built bytes, bodies pre-encoded where fixed."""

from __future__ import annotations

from typing import Any

import msgspec

from shared.errors import envelope

__all__ = ("JSON_HEADER", "send_error", "send_json")

JSON_HEADER = (b"content-type", b"application/json")
_encoder = msgspec.json.Encoder()


async def send_json(send: Any, status: int, body: bytes, headers: list[tuple[bytes, bytes]] | None = None) -> None:
    out = [JSON_HEADER, (b"content-length", str(len(body)).encode())]
    if headers:
        out.extend(headers)
    await send({"type": "http.response.start", "status": status, "headers": out})
    await send({"type": "http.response.body", "body": body})


async def send_error(
    send: Any, status: int, code: str, message: str, headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    await send_json(send, status, _encoder.encode(envelope(code, message)), headers)
