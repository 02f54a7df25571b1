"""The comparison for the edge: a bare raw-ASGI app under granian that reads the body and returns 200."""

from __future__ import annotations

from typing import Any

_HEADERS = [(b"content-type", b"application/json"), (b"content-length", b"11")]


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    more = True
    while more:
        message = await receive()
        more = message.get("more_body", False)
    await send({"type": "http.response.start", "status": 200, "headers": _HEADERS})
    await send({"type": "http.response.body", "body": b'{"ok":true}'})
